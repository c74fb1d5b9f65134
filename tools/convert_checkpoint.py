"""Converts BERT checkpoints between Google's TF1 layout, HF safetensors and our preset layout.

The source is anything `from_preset` accepts: a registry name, a Google directory or zip
(`bert_model.ckpt.*` + `bert_config.json` + `vocab.txt`), a HF directory
(`model.safetensors` + `config.json`), or one of our preset directories. Pretraining heads
and fine-tuned heads are carried over. PyTorch pickles are refused.

Usage:
    python tools/convert_checkpoint.py uncased_L-2_H-128_A-2.zip out/hf --to hf
    python tools/convert_checkpoint.py out/hf out/google --to google
    python tools/convert_checkpoint.py out/google out/preset --to keras_bert_zoo
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from keras_bert_zoo.weights import configs, google_checkpoint, preset_format  # noqa: E402
from keras_bert_zoo.weights import safetensors_checkpoint, sources  # noqa: E402

FORMATS = ("google", "hf", "keras_bert_zoo")


def convert(source, target, to):
    """Converts `source` (any preset) into `target` in format `to`; returns a summary line."""
    if to not in FORMATS:
        raise ValueError(f"`to` must be one of {FORMATS}. Received: to={to!r}.")
    layout, directory = sources.locate(source)
    tensors, _ = sources.read_tensors(layout, directory)
    config = sources.read_config(layout, directory)
    vocab = sources.vocabulary_path(layout, directory)
    has_heads = any(name.startswith("cls/") for name in tensors)
    if to == "keras_bert_zoo":
        preset_format.write_preset(target, tensors, config, vocabulary=vocab)
    elif to == "google":
        google_checkpoint.write_google_checkpoint(
            tensors, target, bert_config=configs.foreign_config_from_backbone(config), vocabulary_path=vocab
        )
    else:
        architecture = "BertForPreTraining" if has_heads else "BertModel"
        hf_config = configs.foreign_config_from_backbone(config, hf=True, architecture=architecture)
        safetensors_checkpoint.write_hf_checkpoint(tensors, target, hf_config, vocabulary_path=vocab)
    return f"{source} ({layout}, {len(tensors)} tensors) -> {target} ({to})"


def main(argv=None):
    parser = argparse.ArgumentParser(description="Convert BERT checkpoints: Google TF1 <-> HF safetensors <-> keras_bert_zoo.")
    parser.add_argument("source", help="registry name, or a Google / HF / keras_bert_zoo directory or zip")
    parser.add_argument("target", help="output directory")
    parser.add_argument("--to", required=True, choices=FORMATS, help="output layout")
    args = parser.parse_args(argv)
    print(convert(args.source, args.target, args.to))


if __name__ == "__main__":
    main()
