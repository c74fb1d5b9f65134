"""Writes a task (or a backbone, or the pretrainer) as the HF folder of its `transformers` class.

`save_hf_checkpoint(model_or_preset, directory)` is the inverse of loading an HF folder with
`from_preset`: the same name mapping (`safetensors_checkpoint.canonical_to_hf`: kernels
`[in, out]` -> torch `[out, in]`, `output_weights` [K, H] -> `classifier.weight`,
`cls/squad/output_weights` -> `qa_outputs.weight`), written as `config.json`
(`architectures`, and for the classifiers `id2label`/`label2id` and `problem_type`),
`model.safetensors`, `vocab.txt` and `tokenizer_config.json` (`do_lower_case`, so HF's
tokenizer splits as ours does). `transformers.AutoModelFor….from_pretrained(directory)` loads it.

    BertBackbone        -> BertModel
    BertPretrainer      -> BertForPreTraining
    BertClassifier      -> BertForSequenceClassification (labels as id2label; num_classes=1: regression)
    BertTokenClassifier -> BertForTokenClassification (tags as id2label)
    BertSpanExtractor   -> BertForQuestionAnswering
    BertMultipleChoice  -> BertForMultipleChoice

Only the tensors the HF class has are written; the others are returned (and logged): the
pooler for the token classifier and the span extractor (HF builds both with
`add_pooling_layer=False`), and any head another class has. A model with no HF class (the
feature extractor) is refused, naming the classes that have one.
"""

import logging
import os

from keras_bert_zoo.utils import files
from keras_bert_zoo.weights import configs, mapping, safetensors_checkpoint
from keras_bert_zoo.presets import loading, preset_format, task_heads
from keras_bert_zoo.presets.preset import open as open_preset

logger = logging.getLogger("keras_bert_zoo.weights")
SQUAD_HEAD = mapping.FINE_TUNED_HEADS["squad"]
CLASSIFIER_HEAD = mapping.FINE_TUNED_HEADS["classifier"]
# HF class -> (heads it has, whether it has the pooler).
_CONTENTS = {
    "BertModel": ((), True),
    "BertForPreTraining": (("mlm", "nsp"), True),
    "BertForSequenceClassification": (("classifier",), True),
    "BertForTokenClassification": (("classifier",), False),
    "BertForQuestionAnswering": (("squad",), False),
    "BertForMultipleChoice": (("classifier",), True),
}


def _kept(name, architecture):
    heads, pooler = _CONTENTS[architecture]
    head = mapping.head_of(name)
    if head is None:
        return pooler or not name.startswith("bert/pooler/")
    return head in heads


def _from_model(model, vocabulary):
    """`(tensors, backbone config, vocabulary, lowercase, class name, task config)` of a model."""
    backbone = loading.backbone_of(model)
    tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
    if vocabulary is None:
        vocabulary = tokenizer
    lowercase = getattr(vocabulary if tokenizer is None else tokenizer, "lowercase", None)
    task_config = model.task_config() if hasattr(model, "task_config") else {}
    return (loading.model_tensors(model), loading.backbone_config(backbone), vocabulary, lowercase,
            type(model).__name__, task_config)


def _class_of_preset(tensors, saved):
    """Our class a preset is written as: its saved task's; else by its heads (SQuAD: the span
    extractor; MLM/NSP: the pretrainer; none: the backbone)."""
    task = saved.get("task") or {}
    if task.get("class_name"):
        return task["class_name"]
    heads = {mapping.head_of(name) for name in tensors} - {None}
    if "squad" in heads:
        return "BertSpanExtractor"
    if "classifier" in heads:
        raise ValueError("The preset has a `classifier` head and no saved task saying which (a sentence classifier, "
                         "a token classifier or multiple choice): load it as that task and pass the task.")
    return "BertPretrainer" if heads & {"mlm", "nsp"} else "BertBackbone"


def _from_preset(preset, vocabulary):
    preset = open_preset(preset)
    tensors, _ = preset.tensors()
    saved = preset.task_config
    class_name = _class_of_preset(tensors, saved)
    task_config = dict((saved.get("task") or {}).get("config") or {})
    if vocabulary is None:
        vocabulary = preset.vocabulary_file
    # Casing as on load: our preset's `lowercase`, HF's `do_lower_case`, else the name.
    lowercase = preset.lowercase()
    return tensors, preset.file_config(), vocabulary, lowercase, class_name, task_config


def _label_config(architecture, tensors, task_config):
    """`id2label`, `label2id`, `num_labels` and `problem_type` of the classifiers' HF config."""
    if architecture not in ("BertForSequenceClassification", "BertForTokenClassification"):
        return {}
    count = int(tensors[CLASSIFIER_HEAD[1]].shape[0])
    labels = task_config.get("labels") or [f"LABEL_{i}" for i in range(count)]
    out = {"id2label": {str(i): label for i, label in enumerate(labels)},
           "label2id": {label: i for i, label in enumerate(labels)}, "num_labels": count}
    if architecture == "BertForSequenceClassification":
        out["problem_type"] = "regression" if count == 1 else "single_label_classification"
    return out


def save_hf_checkpoint(model_or_preset, directory, vocabulary=None):
    """Writes a model (or a preset) as the HF folder of its `transformers` class (see the module).

    Args:
        model_or_preset: a `BertBackbone`, `BertPretrainer`, `BertClassifier`, `BertTokenClassifier`,
            `BertSpanExtractor` or `BertMultipleChoice`, or any preset `from_preset` accepts (a saved
            task is written as its class; a preset without one by its heads).
        directory: str. Created; its checkpoint files are replaced atomically.
        vocabulary: a `vocab.txt` path, a token list or a tokenizer; None: the task's tokenizer's (or
            the preset's). A backbone without one is written without `vocab.txt` (logged).

    Returns:
        list of str: the canonical names of the tensors dropped (not in the HF class).

    Raises:
        ValueError: a model with no HF class, or without the head its class needs, naming it.
    """
    if isinstance(model_or_preset, (str, os.PathLike)):
        parts = _from_preset(os.fspath(model_or_preset), vocabulary)
    else:
        parts = _from_model(model_or_preset, vocabulary)
    tensors, config, vocabulary, lowercase, class_name, task_config = parts
    architecture = task_heads.HF_ARCHITECTURES.get(class_name)
    if architecture is None:
        raise ValueError(
            f"{class_name} has no HF transformers class: save_hf_checkpoint writes "
            f"{', '.join(f'{ours} ({hf})' for ours, hf in task_heads.HF_ARCHITECTURES.items())}. Received: "
            f"{model_or_preset!r}."
        )
    needed = {"BertForQuestionAnswering": SQUAD_HEAD}.get(architecture, ())
    needed = CLASSIFIER_HEAD if "classifier" in _CONTENTS[architecture][0] else needed
    missing = [name for name in needed if name not in tensors]
    if missing:
        what = "SQuAD" if architecture == "BertForQuestionAnswering" else "classifier"
        raise ValueError(f"`model_or_preset` has no {what} head ({', '.join(missing)} missing), which HF's "
                         f"{architecture} needs. Received: {model_or_preset!r}.")
    kept = {name: value for name, value in tensors.items() if _kept(name, architecture)}
    dropped = sorted(set(tensors) - set(kept))
    if dropped:
        logger.info("HF %s has no %s: not written.", architecture, ", ".join(dropped))
    hf_config = configs.foreign_config_from_backbone(config, hf=True, architecture=architecture)
    hf_config.update(_label_config(architecture, tensors, task_config))
    os.makedirs(directory, exist_ok=True)
    if vocabulary is None:
        logger.warning("%s written without vocab.txt: pass `vocabulary=` for a folder HF's tokenizer can read.",
                       directory)
    else:
        files.atomic_write_bytes(os.path.join(directory, preset_format.VOCAB_FILE),
                                 preset_format.vocabulary_bytes(vocabulary))
    safetensors_checkpoint.write_hf_checkpoint(kept, directory, hf_config)
    if vocabulary is not None:
        files.atomic_write_json(os.path.join(directory, "tokenizer_config.json"),
                                {"do_lower_case": bool(True if lowercase is None else lowercase),
                                 "tokenizer_class": "BertTokenizer",
                                 "model_max_length": int(config["max_sequence_length"])})
    return dropped
