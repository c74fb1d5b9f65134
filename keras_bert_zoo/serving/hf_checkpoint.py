"""Writes a span extractor as an HF `BertForQuestionAnswering` folder.

`save_hf_checkpoint(task_or_preset, directory)` is the inverse of loading an HF QA folder
with `BertSpanExtractor.from_preset`: the same name mapping
(`safetensors_checkpoint.canonical_to_hf`, e.g. `cls/squad/output_weights` [2, H] ->
`qa_outputs.weight` [2, H], kernels `[in, out]` -> torch `[out, in]`), written as
`config.json` (`architectures: ["BertForQuestionAnswering"]`), `model.safetensors`,
`vocab.txt` and `tokenizer_config.json` (`do_lower_case`, so HF's tokenizer splits as
ours does).

Only the tensors `BertForQuestionAnswering` has are written: the encoder and embeddings,
and `qa_outputs`. Dropped (returned, and logged): the pooler (HF's QA model is built with
`add_pooling_layer=False`) and any other head (MLM, NSP, classifier).
"""

import logging
import os

from keras_bert_zoo.utils import files
from keras_bert_zoo.weights import configs, mapping, safetensors_checkpoint
from keras_bert_zoo.presets import loading, config as preset_config, preset_format
from keras_bert_zoo.presets import sources

logger = logging.getLogger("keras_bert_zoo.weights")
ARCHITECTURE = "BertForQuestionAnswering"
SQUAD_HEAD = mapping.FINE_TUNED_HEADS["squad"]


def _kept(name):
    """True for the tensors of HF's `BertForQuestionAnswering`."""
    return name in SQUAD_HEAD or (mapping.head_of(name) is None and not name.startswith("bert/pooler/"))


def _from_task(task):
    tokenizer = task.preprocessor.tokenizer if getattr(task, "preprocessor", None) is not None else None
    if tokenizer is None:
        raise ValueError("`task_or_preset` has no preprocessor (hence no vocabulary). Build the task with its "
                         "preprocessor, or pass its preset directory.")
    backbone = loading.backbone_of(task)
    return loading.model_tensors(task), loading.backbone_config(backbone), tokenizer, bool(tokenizer.lowercase)


def _from_preset(preset):
    layout, directory = sources.locate(preset)
    tensors, _ = sources.read_tensors(layout, directory)
    # Casing as on load: our preset's `lowercase`, HF's `do_lower_case`, else the name.
    lowercase = preset_config.preset_lowercase(preset)
    return tensors, sources.read_config(layout, directory), loading.get_preset_vocabulary(preset), lowercase


def save_hf_checkpoint(task_or_preset, directory):
    """Writes `task_or_preset` as an HF `BertForQuestionAnswering` folder.

    Args:
        task_or_preset: a `BertSpanExtractor` (with its preprocessor), or any preset
            `from_preset` accepts that holds a SQuAD head (ours, Google's `cls/squad/*`,
            HF's `qa_outputs.*`).
        directory: str. Created; its checkpoint files are replaced atomically.

    Returns:
        list of str: the canonical names of the tensors dropped (not in HF's class).

    Raises:
        ValueError: there is no SQuAD head, naming what was given.
    """
    if isinstance(task_or_preset, (str, os.PathLike)):
        tensors, config, vocabulary, lowercase = _from_preset(os.fspath(task_or_preset))
    else:
        tensors, config, vocabulary, lowercase = _from_task(task_or_preset)
    missing = [name for name in SQUAD_HEAD if name not in tensors]
    if missing:
        raise ValueError(f"`task_or_preset` has no SQuAD head ({', '.join(missing)} missing). Received: "
                         f"task_or_preset={task_or_preset!r}. Pass a `BertSpanExtractor` or its saved preset.")
    kept = {name: value for name, value in tensors.items() if _kept(name)}
    dropped = sorted(set(tensors) - set(kept))
    if dropped:
        logger.info("HF %s has no %s: not written.", ARCHITECTURE, ", ".join(dropped))
    hf_config = configs.foreign_config_from_backbone(config, hf=True, architecture=ARCHITECTURE)
    os.makedirs(directory, exist_ok=True)
    files.atomic_write_bytes(os.path.join(directory, preset_format.VOCAB_FILE),
                             preset_format.vocabulary_bytes(vocabulary))
    safetensors_checkpoint.write_hf_checkpoint(kept, directory, hf_config)
    files.atomic_write_json(os.path.join(directory, "tokenizer_config.json"),
                            {"do_lower_case": lowercase, "tokenizer_class": "BertTokenizer",
                             "model_max_length": int(config["max_sequence_length"])})
    return dropped
