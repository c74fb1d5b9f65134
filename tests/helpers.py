"""Shared assertions for every layer and model test (config, saving, fit, precision)."""

import json
import os
import signal

import keras
import numpy as np


def sigint_at_default():
    """`preexec_fn` of a child started as from a terminal: SIGINT at its default. A `make test` worker
    can come to ignore SIGINT, which a child inherits (Python then installs no KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _to_numpy(tree):
    return keras.tree.map_structure(lambda t: keras.ops.convert_to_numpy(t), tree)


def assert_all_close(actual, expected, atol=1e-6, rtol=1e-6):
    actual, expected = _to_numpy(actual), _to_numpy(expected)
    keras.tree.assert_same_structure(actual, expected)
    for a, e in zip(keras.tree.flatten(actual), keras.tree.flatten(expected)):
        np.testing.assert_allclose(a, e, atol=atol, rtol=rtol)


def assert_config_round_trip(obj):
    """`get_config` is JSON-serialisable and `from_config` rebuilds an equal config."""
    config = obj.get_config()
    json.dumps(config)
    clone = obj.__class__.from_config(config)
    assert clone.get_config() == config
    return clone


def assert_saved_model_equal(model, inputs, tmp_path, atol=1e-6):
    """`.keras` save → load in safe mode gives the same outputs in inference mode."""
    path = os.path.join(str(tmp_path), "model.keras")
    expected = model(inputs, training=False)
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert restored.__class__ is model.__class__
    assert_all_close(restored(inputs, training=False), expected, atol=atol, rtol=atol)
    return restored


def serve_strings(export_dir, **texts):
    """The `serving_default` signature of a SavedModel export called on lists of strings (by input name)."""
    import tensorflow as tf

    serve = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    return serve(**{name: tf.constant(list(values)) for name, values in texts.items()})


def assert_fit_one_step(model, x, y=None, loss=None):
    """One `fit` step runs, gives a finite loss and changes the trainable weights."""
    before = [np.array(w) for w in model.trainable_weights]
    if loss is not None:
        model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    history = model.fit(x, y, batch_size=len(keras.tree.flatten(x)[0]), epochs=1, verbose=0)
    loss_value = history.history["loss"][-1]
    assert np.isfinite(loss_value), loss_value
    after = [np.array(w) for w in model.trainable_weights]
    assert any(not np.array_equal(b, a) for b, a in zip(before, after)), "fit changed no weight"
    return loss_value


def assert_mixed_precision(build, inputs, float32_dtypes=("float32",)):
    """Built under mixed_float16 and mixed_bfloat16, the model runs, its variables stay
    float32 and its floating outputs are in the compute dtype (or float32 where stated).

    Args:
        build: callable(dtype) -> model.
        inputs: model inputs.
    """
    for policy, compute in (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")):
        model = build(policy)
        outputs = model(inputs, training=False)
        for v in model.weights:
            if "seed" in v.path:
                continue
            assert keras.backend.standardize_dtype(v.dtype) in ("float32", "int32", "int64", "uint32"), v.path
        for t in keras.tree.flatten(outputs):
            dtype = keras.backend.standardize_dtype(t.dtype)
            if dtype.startswith("float") or dtype == "bfloat16":
                assert dtype in (compute,) + tuple(float32_dtypes), (policy, dtype)
                assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(t, "float32"))))


def without_dropout(model):
    """Sets every `Dropout` inside `model` to rate 0 (before its first trace): runs to compare
    draw no dropout masks."""
    for layer in model._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0
    return model
