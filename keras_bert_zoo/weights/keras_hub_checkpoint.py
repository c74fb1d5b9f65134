"""Reads keras-hub BERT presets (`keras_hub.models.BertBackbone` / `BertTextClassifier`
`save_to_preset` folders) into canonical tensors, and names keras-hub's variables canonically.

A keras-hub preset is `config.json` (the backbone as a serialized Keras object,
`registered_name: "keras_hub>BertBackbone"`), `model.weights.h5` (the backbone's variables),
`tokenizer.json` (its `lowercase`, `strip_accents`), `assets/tokenizer/vocabulary.txt`, and
for a task `task.json` + `task.weights.h5` (the head only). The weights files are read with
h5py, so loading one needs no keras-hub: each layer's group carries its layer name (`vars`'
`name` attribute), which gives the variable path keras-hub's model has
(`transformer_layer_0/self_attention_layer/query/kernel`); `KERAS_HUB_NAMES` maps those paths
to the canonical names of `mapping`, the reverse of keras-hub's HF converter
(`keras_hub/src/utils/transformers/convert_bert.py`). keras-hub's attention kernels are
per head (`EinsumDense`, `[hidden, heads, head_size]`); canonical ones are `[hidden, hidden]`.
"""

import os
import re

import h5py
import numpy as np

from keras_bert_zoo.utils import files

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
TASK_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
TOKENIZER_FILE = "tokenizer.json"
VOCABULARY_FILE = os.path.join("assets", "tokenizer", "vocabulary.txt")
BACKBONE = "keras_hub>BertBackbone"
CLASSIFIER = "keras_hub>BertTextClassifier"
# keras-hub's BertBackbone always runs the tanh approximation of GELU (`gelu_approximate`).
ACTIVATION = "gelu_approximate"
_CONFIG_KEYS = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
                "max_sequence_length", "num_segments")

# keras-hub variable path (layer path / slot) -> canonical name; `{i}` is the layer index.
_FIXED = {
    "token_embedding/embeddings": "bert/embeddings/word_embeddings",
    "position_embedding/embeddings": "bert/embeddings/position_embeddings",
    "segment_embedding/embeddings": "bert/embeddings/token_type_embeddings",
    "embeddings_layer_norm/gamma": "bert/embeddings/LayerNorm/gamma",
    "embeddings_layer_norm/beta": "bert/embeddings/LayerNorm/beta",
    "pooled_dense/kernel": "bert/pooler/dense/kernel",
    "pooled_dense/bias": "bert/pooler/dense/bias",
    "logits/kernel": "output_weights",  # BertTextClassifier's head
    "logits/bias": "output_bias",
}
_PER_LAYER = {
    "self_attention_layer/query": "attention/self/query",
    "self_attention_layer/key": "attention/self/key",
    "self_attention_layer/value": "attention/self/value",
    "self_attention_layer/attention_output": "attention/output/dense",
    "self_attention_layer_norm": "attention/output/LayerNorm",
    "feedforward_intermediate_dense": "intermediate/dense",
    "feedforward_output_dense": "output/dense",
    "feedforward_layer_norm": "output/LayerNorm",
}
# Group names Keras gives a layer by its class, for files written without the layer names.
_CLASS_GROUPS = {"reversible_embedding": "token_embedding", "position_embedding": "position_embedding",
                 "embedding": "segment_embedding", "layer_normalization": "embeddings_layer_norm",
                 "dense": "pooled_dense", "query_dense": "query", "key_dense": "key", "value_dense": "value",
                 "output_dense": "attention_output"}


def keras_object_name(config):
    """The registered name (`keras_hub>BertBackbone`) of a config.json that is a serialized Keras
    object, as keras-hub (and keras-nlp before it) writes a preset's, else None. HF's and ours are not."""
    if not isinstance(config, dict):
        return None
    for name in (config.get("registered_name"), config.get("class_name")):
        if isinstance(name, str) and ">" in name:
            return name
    module = config.get("module")
    if isinstance(module, str) and module.startswith(("keras_hub", "keras_nlp")):
        return f"{module.split('.', 1)[0]}>{config.get('class_name')}"
    return None


def is_keras_hub_preset(directory):
    """True when `directory/config.json` is a serialized Keras object (a keras-hub preset)."""
    path = os.path.join(directory, CONFIG_FILE)
    return os.path.isfile(path) and keras_object_name(files.read_json(path)) is not None


def _check_name(name, expected, path, what):
    # keras-nlp, keras-hub's former name, wrote the same BERT classes under its own package.
    if name is None or name.split(">", 1)[-1] != expected.split(">", 1)[-1]:
        raise ValueError(
            f"{path} is the keras-hub {what} {name!r}: keras_bert_zoo reads keras-hub's {expected!r} only "
            "(BERT). Load this model with keras-hub itself."
        )


def canonical_name(path):
    """`(canonical name, kind)` of a keras-hub BERT variable path, or `(None, None)`.

    `kind` says how the array is laid out there: `"heads_in"` (`[hidden, heads, size]` query/key/
    value kernels), `"heads_bias"` (`[heads, size]`), `"heads_out"` (`[heads, size, hidden]`
    attention output kernel), `"transposed"` (the classifier kernel, `[hidden, classes]` there,
    `[classes, hidden]` canonically) or `"same"`."""
    if path in _FIXED:
        name = _FIXED[path]
        return name, "transposed" if name == "output_weights" else "same"
    match = re.fullmatch(r"transformer_layer_(\d+)/(.+)/(kernel|bias|gamma|beta)", path)
    if not match or match.group(2) not in _PER_LAYER:
        return None, None
    index, layer, slot = match.groups()
    name = f"bert/encoder/layer_{index}/{_PER_LAYER[layer]}/{slot}"
    if layer.startswith("self_attention_layer/"):
        if layer.endswith("attention_output"):
            return name, "heads_out" if slot == "kernel" else "same"
        return name, "heads_in" if slot == "kernel" else "heads_bias"
    return name, "same"


def to_canonical(kind, array):
    """A keras-hub array (see `canonical_name`) in canonical layout."""
    array = np.asarray(array, dtype="float32")
    if kind == "heads_in":
        return array.reshape(array.shape[0], -1)
    if kind == "heads_bias":
        return array.reshape(-1)
    if kind == "heads_out":
        return array.reshape(-1, array.shape[-1])
    return array.T if kind == "transposed" else array


def from_canonical(kind, array, shape):
    """The inverse of `to_canonical`, into a keras-hub variable of `shape`."""
    array = np.asarray(array, dtype="float32")
    return (array.T if kind == "transposed" else array).reshape(shape)


def _slots(layer_name):
    if layer_name.endswith("layer_norm"):
        return ("gamma", "beta")
    if layer_name.endswith("embedding"):
        return ("embeddings",)
    return ("kernel", "bias")


def _layer_name(group, parent_path, task_file):
    """A layer group's name as in the model: its `vars` `name` attribute, else from Keras'
    class-derived group name (`transformer_encoder_3` -> `transformer_layer_3`)."""
    stored = group["vars"].attrs.get("name") if "vars" in group else None
    if stored:
        return stored.decode() if isinstance(stored, bytes) else str(stored)
    key = group.name.rsplit("/", 1)[-1].lstrip("_")
    if parent_path:
        return _CLASS_GROUPS.get(key, key) if key.endswith("_dense") else key
    match = re.fullmatch(r"transformer_encoder(?:_(\d+))?", key)
    if match:
        return f"transformer_layer_{match.group(1) or 0}"
    return "logits" if key == "dense" and task_file else _CLASS_GROUPS.get(key, key)


def read_h5_variables(path):
    """`{keras-hub variable path: array}` of the model's layers in a Keras `.weights.h5` file."""
    out = {}
    task_file = os.path.basename(path) == TASK_WEIGHTS_FILE

    def walk(group, parent_path):
        for key in group:
            child = group[key]
            if key == "vars" or not isinstance(child, h5py.Group):
                continue
            name = _layer_name(child, parent_path, task_file)
            layer_path = f"{parent_path}/{name}" if parent_path else name
            if "vars" in child:
                variables = child["vars"]
                slots = _slots(name)
                for index in sorted(variables, key=int):
                    slot = slots[int(index)] if int(index) < len(slots) else index
                    out[f"{layer_path}/{slot}"] = np.asarray(variables[index])
            walk(child, layer_path)

    with h5py.File(path, "r") as h5:
        if "layers" not in h5:
            raise ValueError(f"{path} has no `layers` group: not a Keras `.weights.h5` file of a model.")
        walk(h5["layers"], "")
    return out


def read_keras_hub_config(directory):
    """`BertBackbone` arguments from a keras-hub preset's `config.json` (`activation` is keras-hub's
    tanh GELU approximation, which its BertBackbone always runs)."""
    path = os.path.join(directory, CONFIG_FILE)
    config = files.read_json(path)
    _check_name(keras_object_name(config), BACKBONE, path, "backbone")
    inner = config.get("config") or {}
    missing = [key for key in _CONFIG_KEYS[:5] if key not in inner]
    if missing:
        raise ValueError(f"{path} lacks the BertBackbone argument(s) {missing}.")
    out = {key: int(inner[key]) for key in _CONFIG_KEYS if key in inner}
    if "dropout" in inner:
        out["dropout"] = float(inner["dropout"])
    out["activation"] = ACTIVATION
    return out


def read_task_json(directory):
    """The `config` of a keras-hub preset's `task.json` when it is a `BertTextClassifier`, None
    when there is no task.json; another task class is an error naming it (its head is not read)."""
    path = os.path.join(directory, TASK_FILE)
    if not os.path.isfile(path):
        return None
    task = files.read_json(path)
    name = keras_object_name(task)
    if name is not None and name.split(">", 1)[-1] != CLASSIFIER.split(">", 1)[-1]:
        return {"unsupported": name}
    return dict(task.get("config") or {})


def read_keras_hub_tensors(directory):
    """`{canonical name: array}` of a keras-hub BERT preset: the backbone (`model.weights.h5`)
    and, for a `BertTextClassifier`, its head (`task.weights.h5`: `output_weights`/`output_bias`).

    Raises:
        ValueError: not a keras-hub `BertBackbone`, a sharded weights file, or a variable with no
            place in BERT (each named).
    """
    read_keras_hub_config(directory)  # refuses another model's preset before reading weights
    path = os.path.join(directory, WEIGHTS_FILE)
    if not os.path.isfile(path):
        shards = sorted(n for n in os.listdir(directory) if n.endswith(".weights.h5") or n.endswith(".weights.json"))
        raise ValueError(
            f"{directory} has no {WEIGHTS_FILE} (found {shards or 'no weights files'}): sharded keras-hub "
            "weights are not read. Save the preset again without `max_shard_size`."
        )
    variables = read_h5_variables(path)
    task = read_task_json(directory)
    if task is not None and "unsupported" not in task:
        variables.update(read_h5_variables(os.path.join(directory, TASK_WEIGHTS_FILE)))
    out, unknown = {}, []
    for name, value in variables.items():
        canonical, kind = canonical_name(name)
        if canonical is None:
            unknown.append(name)
        else:
            out[canonical] = to_canonical(kind, value)
    if unknown:
        raise ValueError(
            f"Unexpected variable(s) in the keras-hub preset {directory}: {', '.join(sorted(unknown)[:8])}. "
            "They have no place in a BERT backbone or BertTextClassifier head."
        )
    return out


def tokenizer_settings(directory):
    """`{"lowercase", "strip_accents"}` from a keras-hub preset's `tokenizer.json`; `{}` without one."""
    path = os.path.join(directory, TOKENIZER_FILE)
    if not os.path.isfile(path):
        return {}
    config = files.read_json(path).get("config") or {}
    settings = {key: bool(config[key]) for key in ("lowercase", "strip_accents") if config.get(key) is not None}
    # keras-hub's WordPieceTokenizer defaults `strip_accents` to False, lowercase or not.
    settings.setdefault("strip_accents", False)
    return settings
