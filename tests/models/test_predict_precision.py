"""`Task.predict(precision=...)`: a float32 model predicts as the same model built in bf16, for
that call only; its own policy, later predictions and training are untouched."""

import numpy as np
import pytest

from keras_bert_zoo.utils import precision as precision_lib
from tests.models.test_bert_classifier import SENTENCES, tiny_classifier


def _policies(model):
    return [layer.dtype_policy.name for layer in model._flatten_layers()]


def test_bf16_predict_equals_the_bf16_model_and_leaves_the_float32_model_as_it_was():
    task = tiny_classifier()
    before = _policies(task)
    float32 = task.predict(SENTENCES, verbose=0)
    built_bf16 = tiny_classifier(dtype="mixed_bfloat16")
    built_bf16.set_weights(task.get_weights())
    expected = built_bf16.predict(SENTENCES, verbose=0)

    switched = task.predict(SENTENCES, verbose=0, precision="mixed_bfloat16")
    np.testing.assert_array_equal(np.asarray(switched, "float32"), np.asarray(expected, "float32"))
    assert np.abs(np.asarray(switched, "float32") - float32).max() > 1e-6  # bf16 really ran
    # Packed ids take Keras' own predict path under the same switch.
    ids = {k: v.numpy() for k, v in task.preprocessor(SENTENCES[:2]).items()}
    np.testing.assert_array_equal(np.asarray(task.predict(ids, verbose=0, precision="mixed_bfloat16"), "float32"),
                                  np.asarray(built_bf16.predict(ids, verbose=0), "float32"))

    # Afterwards (training, evaluate, export) the model is the float32 one it was.
    assert _policies(task) == before
    np.testing.assert_array_equal(task.predict(SENTENCES, verbose=0), float32)


def test_a_bf16_model_predicts_in_float32_on_request():
    task = tiny_classifier(dtype="mixed_bfloat16")
    float32 = tiny_classifier()
    float32.set_weights(task.get_weights())
    np.testing.assert_allclose(task.predict(SENTENCES, verbose=0, precision="float32"),
                               float32.predict(SENTENCES, verbose=0), atol=1e-6)
    assert str(np.asarray(task.predict(SENTENCES, verbose=0)).dtype) == "bfloat16"


def test_auto_follows_auto_precision_and_bad_values_are_named(monkeypatch):
    task = tiny_classifier()
    float32 = task.predict(SENTENCES, verbose=0)
    monkeypatch.setenv(precision_lib.ENV, "float32")
    np.testing.assert_array_equal(task.predict(SENTENCES, verbose=0, precision="auto"), float32)
    with pytest.raises(ValueError, match="`precision`.*'bf16'"):
        task.predict(SENTENCES, verbose=0, precision="bf16")
