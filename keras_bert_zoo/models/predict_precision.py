"""`Task.predict(..., precision=...)`: inference in another float policy than the model's own.

Only when asked: without `precision` a model predicts in its own policy (float32 unless the
user asked otherwise, `utils/precision.py`). With `precision="mixed_bfloat16"` (or `"auto"`,
which picks it where the CPU has native bf16, about twice as fast there) a float32 model
predicts in bf16 without being rebuilt: for the call, every layer that runs
the model's own policy takes the requested one (the variables stay as they are; Keras
casts them to the compute dtype as it reads them), and the predict function traced under
it is kept for the next call under the same policy. Afterwards every layer has its own
policy back, so `fit`, `evaluate`, saving and export see the model unchanged. Layers
with a policy of their own (the layer norms' float32) keep it, as in a model built with
the policy.
"""

import contextlib

import keras

from keras_bert_zoo.utils.keras_internals import flatten_layers
from keras_bert_zoo.utils.precision import resolve_precision


def own_policy(model):
    """The model's float policy: its backbone's (a task's own Keras policy may be the global default)."""
    return getattr(model, "backbone", model).dtype_policy


def _switched_layers(model, own):
    preprocessor = getattr(model, "preprocessor", None)
    skip = set() if preprocessor is None else {id(layer) for layer in flatten_layers(preprocessor)}
    layers = flatten_layers(model)  # the model first
    return [
        layer for layer in layers
        if id(layer) not in skip and layer.dtype_policy.name == own.name
        and not isinstance(layer, (keras.layers.LayerNormalization, keras.layers.InputLayer))
    ]


@contextlib.contextmanager
def predicting_in(model, precision):
    """Runs the body with `model`'s float layers under `precision` (None: the model's own).

    Args:
        model: a built `keras.Model` whose policy is a plain float policy.
        precision: None (the model's own policy: nothing is switched), `"auto"`
            (`utils.precision.auto_precision()`) or a policy name (`"float32"`,
            `"mixed_bfloat16"`, `"mixed_float16"`).

    Raises:
        ValueError: an unknown `precision`, or a quantized model (its layers' policies
            carry the quantization and are not swapped).
    """
    if precision is None:
        yield
        return
    policy = resolve_precision(precision)
    own = own_policy(model)
    if own.name == policy:
        yield
        return
    quantized = [layer.dtype_policy.name for layer in flatten_layers(model)
                 if getattr(layer.dtype_policy, "quantization_mode", None) is not None]
    if quantized:
        raise ValueError(
            f"`precision` cannot be combined with a quantized model (policy {quantized[0]!r}). Received: "
            f"precision={precision!r}. Drop `precision`: the quantized model predicts in its own policy."
        )
    layers = _switched_layers(model, own)
    functions = model.__dict__.setdefault("_predict_functions_by_policy", {})
    functions[own.name] = model.predict_function
    model.predict_function = functions.get(policy)
    for layer in layers:
        layer.dtype_policy = policy
    try:
        yield
    finally:
        for layer in layers:
            layer.dtype_policy = own
        functions[policy] = model.predict_function
        model.predict_function = functions.pop(own.name)
