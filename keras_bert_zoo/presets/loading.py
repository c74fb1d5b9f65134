"""Loads preset weights into models and writes models back as presets.

A preset is a registry name or alias (`"bert_base_en_uncased"`), a registry-style
entry dict, a local directory / zip in our, Google's (`bert_model.ckpt` +
`bert_config.json`), HF's (`model.safetensors` + `config.json`) or keras-hub's
(`model.weights.h5` + `config.json`, a serialized Keras object) layout, or a `Preset`
(`presets.open`: one opened once, which each function here asks instead of finding it again).

A model is written as a preset by its own method, `model.save_to_preset(directory)`
(`Backbone.save_to_preset`, `Task.save_to_preset`); `write_model_preset` here is the
writer they share.

Examples:
>>> backbone = keras_bert_zoo.BertBackbone.from_preset("tiny_preset")
>>> path = backbone.save_to_preset("my_preset", vocabulary="vocab.txt")
>>> keras_bert_zoo.BertBackbone.from_preset("my_preset").num_layers
2
"""

import logging

from keras_bert_zoo.weights import mapping
from keras_bert_zoo.presets import preset_format
from keras_bert_zoo.presets.preset import open as open_preset

logger = logging.getLogger("keras_bert_zoo.weights")


def read_preset_tensors(preset, verify=True):
    """Returns `({canonical name: array}, source)` for any preset (see module doc).

    `verify=False` accepts hand edits of our preset's files (see `preset_format.verify_preset`).
    """
    return open_preset(preset).tensors(verify=verify)


def get_preset_vocabulary(preset):
    """Returns the path of the preset's `vocab.txt` (downloading the preset if needed).

    Raises:
        ValueError: the preset has no vocabulary.
    """
    return open_preset(preset).vocabulary_path()


def _report_unused(tensors, used, source):
    """Logs one line naming the heads present in the checkpoint but not loaded."""
    unused = {}
    for name in tensors:
        head = mapping.head_of(name)
        if head is not None and name not in used:
            unused[head] = unused.get(head, 0) + 1
    if unused:
        heads = ", ".join(f"{h} ({n} tensors)" for h, n in sorted(unused.items()))
        level = logging.WARNING if set(unused) & {"classifier", "squad"} else logging.INFO
        logger.log(level, "Heads in %s not loaded into this model: %s.", source, heads)
    return sorted(unused)


def _check_unexpected(tensors, targets, source):
    """A backbone tensor the model has no place for (e.g. layer_12 in a 6-layer model)."""
    unexpected = sorted(n for n in tensors if mapping.head_of(n) is None and n not in targets)
    if unexpected:
        raise ValueError(
            f"The checkpoint {source} has tensor(s) this model has no place for: "
            f"{', '.join(unexpected[:8])}. Build the model with the checkpoint's config "
            "(`from_preset` does)."
        )


def _load(targets, preset, verify=True):
    tensors, source = read_preset_tensors(preset, verify=verify)
    return _assign(targets, tensors, source)


POOLER = ("bert/pooler/dense/kernel", "bert/pooler/dense/bias")


def _assign(targets, tensors, source, pooler_used=True):
    if all(name in targets and name not in tensors for name in POOLER):
        # HF's BertFor{QuestionAnswering,TokenClassification} save no pooler (`add_pooling_layer=False`).
        targets = {name: var for name, var in targets.items() if name not in POOLER}
        # A warning only where the pooler is used: token and span tasks freeze it and never read it.
        logger.log(logging.WARNING if pooler_used else logging.INFO,
                   "The checkpoint %s has no pooler (bert/pooler/dense): left randomly initialised%s.", source,
                   "" if pooler_used else " (this task does not use it)")
    _check_unexpected(tensors, targets, source)
    mapping.assign_tensors(targets, tensors, source)
    unused = _report_unused(tensors, targets, source)
    return {"source": str(source), "loaded": len(targets), "unused_heads": unused}


def load_backbone_weights(backbone, preset, verify=True):
    """Loads a preset's backbone weights into a `BertBackbone`.

    Every tensor's shape is checked before anything is assigned; a missing or
    unexpected backbone tensor is an error naming it. Heads in the checkpoint
    (MLM, NSP, classifier, SQuAD) are reported in one log line.

    Args:
        backbone: `keras_bert_zoo.BertBackbone`.
        preset: str, dict or `Preset`. Registry name, entry dict or local path.
        verify: bool. Check our preset's files against its manifest. Defaults to True.

    Returns:
        dict with `source`, `loaded` (tensor count) and `unused_heads`.
    """
    return _load(backbone.declared_variables(), preset, verify=verify)


MISSING_HEADS = ("warn", "error", "fresh")


def _head_fits(names, targets, tensors):
    return all(mapping.to_keras_layout(n, tensors[n]).shape == tuple(targets[n].shape) for n in names)


def _drop_unloadable_heads(targets, tensors, source, missing_heads):
    """Removes the declared heads that the checkpoint lacks entirely (a bare `BertModel`,
    or a pretrained checkpoint for a task head) or has with other shapes (another task's
    head: e.g. a 3-class classifier for a 2-class task). A head partly present stays,
    so that the assignment names its missing tensors."""
    absent, other_shape = [], []
    for head in sorted({mapping.head_of(n) for n in targets} - {None}):
        names = [n for n in targets if mapping.head_of(n) == head]
        present = [n for n in names if n in tensors]
        if present and (len(present) < len(names) or _head_fits(names, targets, tensors)):
            continue
        (other_shape if present else absent).append(head)
        for name in names:
            del targets[name]
    if missing_heads == "error" and (absent or other_shape):
        raise ValueError(f"The checkpoint {source} has no {' and no '.join(absent + other_shape)} head weights.")
    if absent:
        level = logging.INFO if missing_heads == "fresh" else logging.WARNING
        logger.log(level, "The checkpoint %s has no %s head: left randomly initialised.", source, "/".join(absent))
    for head in other_shape:
        logger.warning(
            "The %s head of %s has other shapes than this model's (another task's head): left "
            "randomly initialised.", head, source,
        )
    return targets


def assign_declared_weights(model, tensors, source, missing_heads="warn"):
    """Assigns checkpoint tensors to the variables a model declares (`declared_variables()`).

    The backbone must be complete. A head is loaded whole or not at all: one absent
    from the checkpoint, or there with other shapes, is left as initialised (see
    `missing_heads`); one partly present is an error naming the missing tensors.

    Args:
        model: a `Backbone` or `Task` (anything with `declared_variables()`).
        tensors: dict `{canonical name: array}`, from `read_preset_tensors`.
        source: str. Where the tensors come from, for messages.
        missing_heads: str. A declared head the checkpoint lacks: `"warn"` (a warning;
            default), `"fresh"` (an info line: expected for a new task head) or
            `"error"`.

    Returns:
        dict as `load_backbone_weights`, plus `heads`: the heads loaded, sorted.
    """
    if missing_heads not in MISSING_HEADS:
        raise ValueError(f"`missing_heads` must be one of {MISSING_HEADS}. Received: missing_heads={missing_heads!r}.")
    targets = _drop_unloadable_heads(dict(model.declared_variables()), tensors, source, missing_heads)
    heads = sorted({mapping.head_of(n) for n in targets} - {None})
    pooler = getattr(backbone_of(model), "pooled_dense", None)
    return dict(_assign(targets, tensors, source, pooler_used=pooler is None or pooler.trainable), heads=heads)


def load_pretrainer_weights(pretrainer, preset, missing_heads="warn", verify=True):
    """Loads backbone, MLM head (transform, LayerNorm, output bias) and NSP head weights.

    A head is loaded whole or not at all: a head partly present in the checkpoint
    is an error naming the missing tensors.

    Args:
        pretrainer: `keras_bert_zoo.models.bert_pretrainer.BertPretrainer`.
        preset: str, dict or `Preset`. Registry name, entry dict or local path.
        missing_heads: str. A head the checkpoint lacks entirely (a bare `BertModel`
            save): `"warn"` (one log line, head left random; default) or `"error"`.
        verify: bool. Check our preset's files against its manifest. Defaults to True.

    Returns:
        dict as `load_backbone_weights`, plus `heads`: the heads loaded (`"mlm"`,
        `"nsp"`), in that order.
    """
    tensors, source = read_preset_tensors(preset, verify=verify)
    return assign_declared_weights(pretrainer, tensors, source, missing_heads)


def get_head_tensors(preset, head):
    """Returns a fine-tuned head's `(kernel [H, K], bias [K])` in Keras layout.

    Args:
        preset: str, dict or `Preset`. A fine-tuned checkpoint.
        head: str. `"classifier"` (original `output_weights`/`output_bias`, HF
            `classifier.*`) or `"squad"` (`cls/squad/*`, HF `qa_outputs.*`).

    Raises:
        ValueError: unknown `head`, or the checkpoint lacks it.
    """
    if head not in mapping.FINE_TUNED_HEADS:
        raise ValueError(f"`head` must be one of {sorted(mapping.FINE_TUNED_HEADS)}. Received: head={head!r}.")
    tensors, source = read_preset_tensors(preset)
    kernel_name, bias_name = mapping.FINE_TUNED_HEADS[head]
    if kernel_name not in tensors or bias_name not in tensors:
        present = sorted({mapping.head_of(n) for n in tensors} - {None})
        raise ValueError(f"The checkpoint {source} has no {head!r} head. Heads present: {present}.")
    return mapping.to_keras_layout(kernel_name, tensors[kernel_name]), tensors[bias_name]


def load_head_weights(dense, preset, head):
    """Loads a fine-tuned head (see `get_head_tensors`) into a built `keras.layers.Dense`."""
    kernel, bias = get_head_tensors(preset, head)
    if tuple(dense.kernel.shape) != kernel.shape or tuple(dense.bias.shape) != bias.shape:
        raise ValueError(
            f"The {head!r} head of {preset!r} has kernel {kernel.shape}, bias {bias.shape}; the layer "
            f"{dense.name} has {tuple(dense.kernel.shape)}, {tuple(dense.bias.shape)}. Build the task "
            "with the checkpoint's number of classes."
        )
    dense.kernel.assign(kernel)
    dense.bias.assign(bias)


def backbone_of(model):
    """A task's backbone, or the backbone itself.

    Raises:
        ValueError: `model` is neither (it declares no variables).
    """
    if not hasattr(model, "declared_variables"):
        raise ValueError(
            "`model` must be a keras_bert_zoo backbone or task (it declares its variables). "
            f"Received: {type(model).__name__}."
        )
    return getattr(model, "backbone", model)




def model_tensors(model):
    """Returns `{canonical name: array}` of a backbone or task (with its heads)."""
    return mapping.collect_tensors(model.declared_variables())


def read_task_config(preset):
    """The `task`, `preprocessor`, `lowercase` and `pretraining` fields of a task saved by
    `Task.save_to_preset`; for an HF `BertFor…` folder or a keras-hub `BertTextClassifier`
    preset the same fields from their files (`task_heads`; the task then has a `source`);
    `{}` for any other preset (Google's, a backbone). See `Preset.task_config`."""
    return open_preset(preset).task_config


def backbone_config(backbone):
    """The backbone's constructor arguments a preset keeps: no Keras bookkeeping (name, dtype), and
    no `skip_padding` or `per_sequence_above`, which say how this session computes, not what the
    model is: `from_preset` picks them for the task and the device that load the preset."""
    config = backbone.get_config()
    for key in ("name", "trainable", "dtype", "skip_padding", "per_sequence_above"):
        config.pop(key, None)
    return config


def write_model_preset(model, directory, vocabulary=None, extra=None, card=None):
    """Writes a model's weights as a preset directory: config, vocabulary, weights, manifest.

    The writer behind `model.save_to_preset(directory)`, which is the way to save a
    model (a task's method adds the task's settings, which serving needs).

    The directory is written atomically (a temporary directory renamed into place;
    a failure keeps an existing preset intact). A pretrainer's MLM and NSP heads are
    saved with the backbone, and so is a task's head (`head_variables()`).
    `from_preset(directory)` loads it back.

    Args:
        model: a `BertBackbone`, or a task (`BertPretrainer`, `BertClassifier`, ...):
            every variable it declares is written.
        directory: str. Created or replaced.
        vocabulary: path to `vocab.txt`, list of tokens, a tokenizer with
            `get_vocabulary()`, or None (then the model's preprocessor's tokenizer,
            if any).
        extra: dict or None. More `config.json` fields (a task's settings).
        card: dict or None. The model card's facts, written as `README.md` (`model_card`).

    `config.json` records the float policy the model ran in as `precision_when_saved`: a
    record, not a setting (`from_preset` builds float32 unless `dtype=` asks otherwise).

    Returns:
        The directory.
    """
    if vocabulary is None:
        tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
        vocabulary = tokenizer if tokenizer is not None and hasattr(tokenizer, "get_vocabulary") else None
    backbone = backbone_of(model)
    extra = {"precision_when_saved": backbone.dtype_policy.name, **(extra or {})}
    return preset_format.write_preset(
        directory, model_tensors(model), backbone_config(backbone), vocabulary=vocabulary, extra=extra, card=card
    )
