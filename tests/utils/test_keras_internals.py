"""Every private Keras/TF access of the package, exercised once, and its loud failure.

If a Keras or TensorFlow upgrade changes one of these internals, this file fails first,
naming it (issue 19 item 6).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.training.replica_input import resumable_input
from keras_bert_zoo.utils import keras_internals as ki
from tests.conftest import TINY_BACKBONE


@keras.saving.register_keras_serializable(package="kbz_internals_test")
class _RecordsSafeMode(keras.layers.Layer):
    seen = []

    @classmethod
    def from_config(cls, config):
        cls.seen.append(ki.in_safe_mode())
        return cls(**config)


def test_every_internal_works_on_this_keras_and_tensorflow(tmp_path):
    layer = keras.layers.Layer()
    ki.accept_raw_inputs(layer)
    assert (layer._convert_input_args, layer._allow_non_tensor_positional_args) == (False, True)

    backbone = BertBackbone(**TINY_BACKBONE)
    layers = ki.flatten_layers(backbone)
    assert layers[0] is backbone and backbone.transformer_layers[1] in layers
    assert backbone.transformer_layers[1].attention.query_dense in layers

    assert ki.in_safe_mode() is False
    path = str(tmp_path / "m.keras")
    keras.Sequential([keras.Input((2,)), _RecordsSafeMode()]).save(path)
    keras.saving.load_model(path, safe_mode=True)
    keras.saving.load_model(path, safe_mode=False)
    assert _RecordsSafeMode.seen == [True, False]

    one = tf.distribute.MirroredStrategy(["/cpu:0"])
    for strategy in (tf.distribute.get_strategy(), one):
        assert ki.in_multi_worker_mode(strategy) is False
        with strategy.scope():  # one replica: the loss is not rescaled
            assert float(ki.scale_loss_for_distribution(tf.constant(3.0))) == 3.0

    # Mirrored input: one saveable plain iterator per replica, yielding the replica's data.
    data = resumable_input(one, lambda i, n, b: tf.data.Dataset.range(10).batch(b), 4)
    assert list(data.trackables) == ["replica_0"]
    assert isinstance(data.trackables["replica_0"], tf.data.Iterator)
    assert ki.per_replica_iterators(data.iterator, 1) == [data.trackables["replica_0"]]
    np.testing.assert_array_equal(one.experimental_local_results(next(data.iterator))[0], [0, 1, 2, 3])

    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse", metrics=["mae"])
    x, y = np.ones((4, 3), "float32"), np.zeros((4, 1), "float32")
    ki.symbolic_build(model, (x, y))
    assert model.optimizer.built and "mae" in [m.name for m in model.metrics[-1].metrics]
    kernel, bias = model.trainable_variables
    assert (ki.optimizer_variable_index(model.optimizer, kernel), ki.optimizer_variable_index(model.optimizer, bias)) == (0, 1)
    ki.skip_fit_metric_build(model)
    assert model._maybe_symbolic_build(iterator=None) is None
    model.fit(x, y, epochs=1, verbose=0)
    ki.restore_fit_metric_build(model)
    assert "_maybe_symbolic_build" not in vars(model)


def _assert_loud(call):
    with pytest.raises(ki.InternalAPIChanged) as info:
        call()
    message = str(info.value)
    assert f"Keras {keras.__version__}" in message and f"TensorFlow {tf.__version__}" in message
    assert "keras_internals.py" in message
    return message


def test_a_changed_internal_fails_loudly_naming_it_and_the_versions(monkeypatch):
    assert "_convert_input_args" in _assert_loud(lambda: ki.accept_raw_inputs(object()))
    assert "_flatten_layers" in _assert_loud(lambda: ki.flatten_layers(object()))
    assert "_symbolic_build" in _assert_loud(lambda: ki.symbolic_build(object(), None))
    assert "_maybe_symbolic_build" in _assert_loud(lambda: ki.skip_fit_metric_build(object()))
    assert "_iterators" in _assert_loud(lambda: ki.per_replica_iterators(iter([1]), 1))
    assert "_get_variable_index" in _assert_loud(lambda: ki.optimizer_variable_index(object(), None))

    class Extended:
        def _in_multi_worker_mode(self):
            return "no"

    class Strategy:
        extended = Extended()

    assert "_in_multi_worker_mode" in _assert_loud(lambda: ki.in_multi_worker_mode(Strategy()))
    from keras.src.losses import loss as loss_module
    from keras.src.saving import serialization_lib

    monkeypatch.delattr(loss_module, "scale_loss_for_distribution")
    monkeypatch.delattr(serialization_lib, "in_safe_mode")
    assert "scale_loss_for_distribution" in _assert_loud(lambda: ki.scale_loss_for_distribution(1.0))
    assert "in_safe_mode" in _assert_loud(ki.in_safe_mode)


def test_serving_and_int8_internals():
    assert ki.auto_trackable_class().__name__ == "AutoTrackable" and issubclass(tf.Module, ki.auto_trackable_class())
    owner = object()

    class Function:
        pass

    function = ki.keep_alive(Function(), owner)
    assert vars(function)["_loaded"] is owner
    dense = keras.layers.Dense(4)
    dense.build((None, 3))
    dense.quantize("int8")
    assert ki.dense_int8_kernel(dense).dtype == "int8"
    ki.replace_dense_int8_call(dense, lambda inputs, training=None: "ours")
    assert dense(np.ones((1, 3), "float32")) == "ours"
    assert "_int8_call" in _assert_loud(lambda: ki.replace_dense_int8_call(object(), None))
    assert "_kernel" in _assert_loud(lambda: ki.dense_int8_kernel(object()))
