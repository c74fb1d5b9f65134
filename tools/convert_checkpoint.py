"""Converts BERT checkpoints between Google's TF1 layout, HF safetensors and our preset layout.

The source is anything `from_preset` accepts: a registry name, a Google directory or zip
(`bert_model.ckpt.*` + `bert_config.json` + `vocab.txt`), a HF directory
(`model.safetensors` + `config.json`), or one of our preset directories. Pretraining heads
and fine-tuned heads are carried over. PyTorch pickles are refused.

The target must be a new or empty directory; `--overwrite` replaces one that holds only
a checkpoint's files (never a directory with other files). The target is written as a
whole into a temporary directory and renamed into place, so a failure leaves it as it was.

Usage:
    python tools/convert_checkpoint.py uncased_L-2_H-128_A-2.zip out/hf --to hf
    python tools/convert_checkpoint.py out/hf out/google --to google
    python tools/convert_checkpoint.py out/google out/preset --to keras_bert_zoo
"""

import argparse
import os
import re
import sys

FORMATS = ("google", "hf", "keras_bert_zoo")
# The files a checkpoint directory of any of the three layouts holds; `--overwrite`
# replaces a directory made only of these.
_CHECKPOINT_FILES = re.compile(
    r"(config\.json|bert_config\.json|vocab\.txt|manifest\.json|weights\.safetensors|"
    r"model\.safetensors(\.index\.json)?|model-\d+-of-\d+\.safetensors|checkpoint|"
    r"bert_model\.ckpt\.(index|meta|data-\d+-of-\d+))"
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description="Convert BERT checkpoints: Google TF1 <-> HF safetensors <-> keras_bert_zoo.")
    parser.add_argument("source", help="registry name, or a Google / HF / keras_bert_zoo directory or zip")
    parser.add_argument("target", help="output directory: new or empty (see --overwrite)")
    parser.add_argument("--to", required=True, choices=FORMATS, help="output layout")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a target directory that already holds a checkpoint (only its files)")
    parser.add_argument("--no-verify", action="store_true",
                        help="accept hand edits of a keras_bert_zoo source preset (skip its sha256 manifest check); "
                             "the converted output gets fresh hashes")
    return parser.parse_args(argv)


def check_target(target, overwrite):
    """Raises ValueError unless `target` may be written (see the module doc)."""
    if os.path.lexists(target) and not os.path.isdir(target):
        raise ValueError(f"`target` is an existing file, not a directory. Received: target={target!r}.")
    names = sorted(os.listdir(target)) if os.path.isdir(target) else []
    if not names:
        return
    foreign = [n for n in names if not _CHECKPOINT_FILES.fullmatch(n)]
    if foreign:
        raise ValueError(
            f"`target` holds files that are not part of a checkpoint: {foreign[:5]}. Received: "
            f"target={target!r}. Pass a new or empty directory; nothing was written."
        )
    if not overwrite:
        raise ValueError(
            f"`target` already holds a checkpoint ({', '.join(names[:5])}). Received: target={target!r}. "
            "Pass a new or empty directory, or --overwrite to replace it; nothing was written."
        )


def convert(source, target, to, overwrite=False, verify=True):
    """Converts `source` (any preset) into `target` in format `to`; returns a summary line."""
    # Imported here: `--help` and argument errors answer without loading TensorFlow.
    from keras_bert_zoo.utils import files
    from keras_bert_zoo.weights import configs, google_checkpoint
    from keras_bert_zoo.presets import preset_format
    from keras_bert_zoo.weights import safetensors_checkpoint
    from keras_bert_zoo.presets.preset import open as open_preset

    if to not in FORMATS:
        raise ValueError(f"`to` must be one of {FORMATS}. Received: to={to!r}.")
    check_target(target, overwrite)
    preset = open_preset(source)
    tensors, _ = preset.tensors(verify=verify)
    config = preset.file_config()
    vocab, layout = preset.vocabulary_file, preset.layout
    has_heads = any(name.startswith("cls/") for name in tensors)
    with files.atomic_directory(target) as tmp:
        if to == "keras_bert_zoo":
            preset_format.write_preset(tmp, tensors, config, vocabulary=vocab)
        elif to == "google":
            google_checkpoint.write_google_checkpoint(
                tensors, tmp, bert_config=configs.foreign_config_from_backbone(config), vocabulary_path=vocab
            )
        else:
            architecture = "BertForPreTraining" if has_heads else "BertModel"
            hf_config = configs.foreign_config_from_backbone(config, hf=True, architecture=architecture)
            safetensors_checkpoint.write_hf_checkpoint(tensors, tmp, hf_config, vocabulary_path=vocab)
    return f"{source} ({layout}, {len(tensors)} tensors) -> {target} ({to})"


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    # After the arguments (--help answers at once), TensorFlow as every tool imports it: without
    # its start-up banner and no-CUDA lines, and with its known harmless runtime lines filtered.
    # This tool used to leave that to `convert`'s first package import, which printed the banner
    # once per TensorFlow shared library.
    from tools._startup import import_tensorflow  # lazy: TensorFlow only once the arguments parse

    import_tensorflow()
    print(convert(args.source, args.target, args.to, overwrite=args.overwrite, verify=not args.no_verify))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
