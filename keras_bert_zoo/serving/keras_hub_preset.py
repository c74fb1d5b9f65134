"""Writes a classifier or a backbone as a keras-hub preset that `keras_hub.models.BertTextClassifier.
from_preset(dir)` / `keras_hub.models.BertBackbone.from_preset(dir)` load.

The keras-hub model is built in-process with keras-hub itself, given our weights (the names
of `weights/keras_hub_checkpoint`, the inverse of its reader), and written by its own
`save_to_preset`, so the files are keras-hub's whatever its format version. Reading one back
needs no keras-hub: `from_preset(dir)` reads it (`presets/sources`).

What keras-hub's BERT cannot hold is refused or said, never dropped quietly:
- keras-hub's BertBackbone always runs the tanh approximation of GELU; a backbone with the
  exact (erf) GELU, every Google and HF BERT, is refused unless `allow_gelu_approximation=True`
  (its outputs then differ by the approximation: about 1e-3 per activation).
- keras-hub has no token classifier, span extractor or multiple choice: those are refused,
  naming the backbone as what can be written.
- keras-hub's classifier has no class names: ours are written beside it
  (`keras_bert_zoo_labels.json`, which keras-hub ignores and our `from_preset` reads).
- keras-hub's pair truncation is `round_robin` or `waterfall`; our `longest_first` is written
  as `round_robin` with a warning.
"""

import logging
import os

from keras_bert_zoo.utils import files
from keras_bert_zoo.weights import keras_hub_checkpoint
from keras_bert_zoo.presets import loading, preset_format, task_heads

logger = logging.getLogger("keras_bert_zoo.weights")
WRITTEN = ("BertBackbone", "BertClassifier")


def _keras_hub():
    try:
        import keras_hub  # lazy: only writing a keras-hub preset needs keras-hub (start-up time, optional)
    except ImportError as e:
        raise ImportError(
            "Writing a keras-hub preset builds the model with keras-hub, which is not installed "
            f"({e}). Install it (`pip install keras-hub`, or this package's `bench` extra)."
        ) from e
    return keras_hub


def _check(model, allow_gelu_approximation):
    name = type(model).__name__
    if name not in WRITTEN:
        raise ValueError(
            f"keras-hub has no BERT class for a {name}: it has BertBackbone and BertTextClassifier. Write the "
            f"backbone (save_keras_hub_preset(task.backbone, dir, vocabulary=task.preprocessor.tokenizer)), or "
            "the task as an HF folder (serving.hf_checkpoint.save_hf_checkpoint)."
        )
    config = loading.backbone_config(loading.backbone_of(model))
    if config.get("causal"):
        raise ValueError("keras-hub's BertBackbone attends both ways; this backbone is causal. Nothing was written.")
    if config.get("activation", "gelu") != keras_hub_checkpoint.ACTIVATION and not allow_gelu_approximation:
        raise ValueError(
            f"This backbone runs activation={config.get('activation', 'gelu')!r} (exact GELU); keras-hub's "
            "BertBackbone always runs the tanh approximation (gelu_approximate), so keras-hub's outputs would differ "
            "from ours (about 1e-3 per activation). Pass allow_gelu_approximation=True to write it anyway, as "
            "keras-hub's own converter of HF BERT does."
        )
    return config


def _assign(keras_hub_model, tensors):
    """Our canonical tensors into every variable of a keras-hub BERT model, shapes checked first."""
    values = {}
    for variable in keras_hub_model.weights:
        name, kind = keras_hub_checkpoint.canonical_name(variable.path)
        if name is None or name not in tensors:
            raise ValueError(f"keras-hub's variable {variable.path} has no tensor here ({name or 'unmapped'}).")
        array = tensors[name]
        if name == "bert/embeddings/position_embeddings":
            array = array[: variable.shape[0]]
        values[variable.path] = keras_hub_checkpoint.from_canonical(kind, array, tuple(variable.shape))
    for variable in keras_hub_model.weights:
        variable.assign(values[variable.path])


def _tokenizer(keras_hub, model, vocabulary, lowercase):
    tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
    vocabulary = tokenizer if vocabulary is None else vocabulary
    if vocabulary is None:
        return None
    source = vocabulary if hasattr(vocabulary, "lowercase") else tokenizer
    if lowercase is None:
        lowercase = getattr(source, "lowercase", None)
    if lowercase is None:
        raise ValueError("Pass `lowercase=` with a vocabulary that is not a tokenizer: keras-hub's tokenizer "
                         "stores its casing.")
    strip_accents = getattr(source, "strip_accents", None)
    tokens = preset_format.vocabulary_bytes(vocabulary).decode("utf-8").splitlines()
    return keras_hub.models.BertTokenizer(
        vocabulary=tokens, lowercase=bool(lowercase),
        strip_accents=bool(lowercase if strip_accents is None else strip_accents))


def _classifier(keras_hub, model, backbone, tokenizer):
    preprocessor = None
    if tokenizer is not None:
        truncate = getattr(model.preprocessor, "truncate", "round_robin")
        if truncate not in ("round_robin", "waterfall"):
            logger.warning("keras-hub truncates pairs round_robin or waterfall, not %s: written as round_robin.",
                           truncate)
            truncate = "round_robin"
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
            tokenizer, sequence_length=int(model.preprocessor.sequence_length), truncate=truncate)
    return keras_hub.models.BertTextClassifier(
        backbone, num_classes=model.num_classes, preprocessor=preprocessor, dropout=model.dropout)


def save_keras_hub_preset(model, directory, vocabulary=None, lowercase=None, allow_gelu_approximation=False):
    """Writes a `BertClassifier` (as keras-hub's `BertTextClassifier`) or a `BertBackbone` as a
    keras-hub preset (see the module).

    Args:
        model: a `BertClassifier` or `BertBackbone`.
        directory: str. New, empty or an earlier keras-hub preset; replaced as a whole, atomically.
        vocabulary: a `vocab.txt` path, a token list or a tokenizer; None: the task's tokenizer's.
            A backbone without one is written without a tokenizer.
        lowercase: bool or None. The casing, for a vocabulary that is not a tokenizer.
        allow_gelu_approximation: bool. Write an exact-GELU backbone for keras-hub's tanh GELU.

    Returns:
        The directory.

    Raises:
        ImportError: keras-hub is not installed.
        ValueError: a model keras-hub has no class for, an exact-GELU backbone without
            `allow_gelu_approximation`, or a directory holding other files.
    """
    config = _check(model, allow_gelu_approximation)
    directory = os.path.abspath(os.fspath(directory))
    if os.path.isdir(directory) and os.listdir(directory) and not keras_hub_checkpoint.is_keras_hub_preset(directory):
        raise ValueError(f"`directory` exists and is not a keras-hub preset. Received: directory={directory!r}. "
                         "Pass a new or empty directory (it is replaced as a whole).")
    keras_hub = _keras_hub()
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config["vocabulary_size"], num_layers=config["num_layers"], num_heads=config["num_heads"],
        hidden_dim=config["hidden_dim"], intermediate_dim=config["intermediate_dim"],
        dropout=config.get("dropout", 0.1), max_sequence_length=config["max_sequence_length"],
        num_segments=config.get("num_segments", 2), dtype="float32")
    tokenizer = _tokenizer(keras_hub, model, vocabulary, lowercase)
    tensors = loading.model_tensors(model)
    labels = getattr(model, "labels", None)
    with files.atomic_directory(directory) as tmp:
        if type(model).__name__ == "BertClassifier":
            task = _classifier(keras_hub, model, backbone, tokenizer)
            _assign(task, tensors)
            task.save_to_preset(tmp)
            if labels:
                files.atomic_write_json(os.path.join(tmp, task_heads.KERAS_HUB_LABELS_FILE), {"labels": list(labels)})
        else:
            _assign(backbone, tensors)
            backbone.save_to_preset(tmp)
            if tokenizer is not None:
                tokenizer.save_to_preset(tmp)
    if tokenizer is None:
        logger.warning("%s written without a tokenizer: pass `vocabulary=` for one keras-hub can load.", directory)
    return directory
