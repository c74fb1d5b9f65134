"""Canonical tensor names and their mapping onto keras_bert_zoo models.

Every reader turns a checkpoint into a dict `{canonical name: numpy array}`, where
the canonical names and layouts are those of Google's original TF1 checkpoints
(`bert/encoder/layer_0/attention/self/query/kernel`, kernels `[in, out]`, the NSP
`cls/seq_relationship/output_weights` `[2, H]`). This module maps those names onto
the variables of a `BertBackbone`, a pretrainer's heads or a task's head `Dense`.
"""

import re

import numpy as np

# Names that are never weights of the model: optimizer slots, step counters, buffers.
_SKIP_PATTERNS = (
    re.compile(r".*/adam_[mv]$"),
    re.compile(r".*/(Adam|Adam_1|Momentum)$"),
    re.compile(r"^(global_step|bad_steps|good_steps|loss_scale|current_loss_scale)$"),
    re.compile(r".*position_ids$"),
    re.compile(r"^_CHECKPOINTABLE_OBJECT_GRAPH$"),
)

PRETRAINING_HEAD_PREFIXES = ("cls/predictions/", "cls/seq_relationship/")

# Fine-tuned heads: head name -> (kernel name [K, H], bias name [K]).
FINE_TUNED_HEADS = {
    "classifier": ("output_weights", "output_bias"),
    "squad": ("cls/squad/output_weights", "cls/squad/output_bias"),
}


def is_skipped(name):
    """True for optimizer slots, step counters and buffers (`position_ids`)."""
    return any(p.match(name) for p in _SKIP_PATTERNS)


def head_of(name):
    """Returns the head a canonical name belongs to (`"mlm"`, `"nsp"`, `"classifier"`,
    `"squad"`) or None for backbone tensors."""
    if name.startswith("cls/predictions/"):
        return "mlm"
    if name.startswith("cls/seq_relationship/"):
        return "nsp"
    if name.startswith("cls/squad/"):
        return "squad"
    if name in FINE_TUNED_HEADS["classifier"]:
        return "classifier"
    return None


def google_canonical_name(name):
    """Normalises a Google TF1 variable name (adds a missing `bert/` prefix)."""
    name = name.strip("/")
    if name.startswith(("embeddings/", "encoder/", "pooler/")):
        name = "bert/" + name
    return name


def _dense_slots(prefix):
    return {f"{prefix}/kernel": "kernel", f"{prefix}/bias": "bias"}


def _norm_slots(prefix):
    return {f"{prefix}/gamma": "gamma", f"{prefix}/beta": "beta"}


def _layer_targets(layer, i):
    """(canonical name, variable) pairs of transformer layer `i`."""
    p = f"bert/encoder/layer_{i}"
    parts = [
        (f"{p}/attention/self/query", layer.attention.query_dense, _dense_slots),
        (f"{p}/attention/self/key", layer.attention.key_dense, _dense_slots),
        (f"{p}/attention/self/value", layer.attention.value_dense, _dense_slots),
        (f"{p}/attention/output/dense", layer.attention_output_dense, _dense_slots),
        (f"{p}/attention/output/LayerNorm", layer.attention_layer_norm, _norm_slots),
        (f"{p}/intermediate/dense", layer.intermediate_dense, _dense_slots),
        (f"{p}/output/dense", layer.output_dense, _dense_slots),
        (f"{p}/output/LayerNorm", layer.output_layer_norm, _norm_slots),
    ]
    out = {}
    for prefix, sublayer, slots in parts:
        for name, attr in slots(prefix).items():
            out[name] = getattr(sublayer, attr)
    return out


def backbone_targets(backbone):
    """Returns `{canonical name: keras variable}` for every weight of a `BertBackbone`."""
    emb = backbone.embeddings
    targets = {
        "bert/embeddings/word_embeddings": emb.token_embedding.embeddings,
        "bert/embeddings/token_type_embeddings": emb.segment_embedding.embeddings,
        "bert/embeddings/position_embeddings": emb.position_embeddings,
        "bert/embeddings/LayerNorm/gamma": emb.layer_norm.gamma,
        "bert/embeddings/LayerNorm/beta": emb.layer_norm.beta,
        "bert/pooler/dense/kernel": backbone.pooled_dense.kernel,
        "bert/pooler/dense/bias": backbone.pooled_dense.bias,
    }
    for i, layer in enumerate(backbone.transformer_layers):
        targets.update(_layer_targets(layer, i))
    return targets


def mlm_head_targets(mlm_head):
    """`{canonical name: variable}` of a `MaskedLMHead` (`cls/predictions/*`)."""
    return {
        "cls/predictions/transform/dense/kernel": mlm_head.transform_dense.kernel,
        "cls/predictions/transform/dense/bias": mlm_head.transform_dense.bias,
        "cls/predictions/transform/LayerNorm/gamma": mlm_head.layer_norm.gamma,
        "cls/predictions/transform/LayerNorm/beta": mlm_head.layer_norm.beta,
        "cls/predictions/output_bias": mlm_head.output_bias,
    }


def nsp_head_targets(nsp_head):
    """`{canonical name: (variable, transpose)}` of the NSP `Dense(2)`: the original
    stores `output_weights` as `[2, H]`, a Keras kernel is `[H, 2]`."""
    return {
        "cls/seq_relationship/output_weights": nsp_head.kernel,
        "cls/seq_relationship/output_bias": nsp_head.bias,
    }


# Canonical names stored transposed relative to the Keras variable.
TRANSPOSED = {"cls/seq_relationship/output_weights", "output_weights", "cls/squad/output_weights"}


def to_keras_layout(name, array):
    """Returns the array in the layout of the Keras variable mapped to `name`."""
    return np.transpose(array) if name in TRANSPOSED else array


def from_keras_layout(name, array):
    """Inverse of `to_keras_layout`."""
    return np.transpose(array) if name in TRANSPOSED else array


def assign_tensors(targets, tensors, source):
    """Assigns `tensors[name]` to every variable in `targets`, checking every shape first.

    Nothing is assigned unless every target has a tensor of the right shape, so a
    failed load never leaves a half-loaded model. `bert/embeddings/position_embeddings`
    may have more rows than the model (the first rows are used: a model built with a
    shorter `max_sequence_length`).

    Raises:
        ValueError: a missing tensor or a shape mismatch, naming it and `source`.
    """
    missing = sorted(set(targets) - set(tensors))
    if missing:
        raise ValueError(
            f"The checkpoint {source} lacks {len(missing)} tensor(s) the model needs: "
            f"{', '.join(missing[:8])}{' …' if len(missing) > 8 else ''}. "
            "Check that it is a BERT checkpoint of the same architecture."
        )
    values = {}
    for name, variable in targets.items():
        value = to_keras_layout(name, np.asarray(tensors[name]))
        expected = tuple(variable.shape)
        if name == "bert/embeddings/position_embeddings" and value.shape[0] >= expected[0]:
            value = value[: expected[0]]
        if tuple(value.shape) != expected:
            raise ValueError(
                f"Shape mismatch for {name} from {source}: the checkpoint has "
                f"{tuple(np.asarray(tensors[name]).shape)}, the model expects {expected} "
                f"(variable {variable.path}). Build the model with the checkpoint's config."
            )
        values[name] = value
    for name, variable in targets.items():
        variable.assign(values[name].astype(variable.dtype))


def collect_tensors(targets):
    """Returns `{canonical name: numpy array}` from model variables (canonical layout)."""
    return {
        name: from_keras_layout(name, np.array(variable))
        for name, variable in targets.items()
    }
