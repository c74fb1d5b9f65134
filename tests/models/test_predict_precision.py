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
    assert task.predict(SENTENCES, verbose=0).dtype == np.float32  # bf16 logits, given as float32


def test_auto_follows_auto_precision_and_bad_values_are_named(monkeypatch):
    task = tiny_classifier()
    float32 = task.predict(SENTENCES, verbose=0)
    monkeypatch.setenv(precision_lib.ENV, "float32")
    np.testing.assert_array_equal(task.predict(SENTENCES, verbose=0, precision="auto"), float32)
    with pytest.raises(ValueError, match="`precision`.*'bf16'"):
        task.predict(SENTENCES, verbose=0, precision="bf16")


def _bf16_cpu(monkeypatch, native):
    """`auto_precision()` as on a CPU with (Zen 4) or without (Zen 3) native bf16, no accelerator."""
    monkeypatch.delenv(precision_lib.ENV, raising=False)
    monkeypatch.setattr(precision_lib, "has_accelerator", lambda: False)
    flags = {"avx2", "avx512f", "avx512_bf16"} if native else {"avx2"}
    monkeypatch.setattr(precision_lib, "cpu_flags", lambda path=None: frozenset(flags))


def test_a_global_policy_other_than_float32_is_the_users_choice(monkeypatch):
    import keras

    _bf16_cpu(monkeypatch, native=True)
    keras.config.set_dtype_policy("mixed_float16")  # the fixture resets it
    assert tiny_classifier().backbone.dtype_policy.name == "mixed_float16"
    with pytest.raises(ValueError, match="`dtype` must be a float dtype policy.*'int8'"):
        tiny_classifier(dtype="int8")


def test_export_loads_presets_and_keras_files_in_the_policy_asked(monkeypatch, tmp_path):
    import importlib
    import os

    import keras

    from keras_bert_zoo.serving.client import load_task
    from tools import export as export_tool

    assert export_tool.PRECISION_CHOICES == (precision_lib.AUTO,) + precision_lib.PRECISIONS
    _bf16_cpu(monkeypatch, native=True)
    task = tiny_classifier()  # float32 even here, saved as "the global policy"
    task.save_to_preset(str(tmp_path / "preset"))
    task.save(tmp_path / "task.keras")
    pinned = tiny_classifier(dtype="mixed_bfloat16")
    pinned.save(tmp_path / "pinned.keras")

    def policy(model, dtype=None):
        return load_task(str(model), dtype=dtype).backbone.dtype_policy.name

    for model in (tmp_path / "preset", tmp_path / "task.keras"):
        assert policy(model) == "float32"
        assert policy(model, "auto") == policy(model, "mixed_bfloat16") == "mixed_bfloat16"
    assert precision_lib.ENV not in os.environ and keras.config.dtype_policy().name == "float32"  # for loading only
    assert policy(tmp_path / "pinned.keras") == policy(tmp_path / "pinned.keras", "mixed_bfloat16") == "mixed_bfloat16"
    with pytest.raises(ValueError, match=r"pinned.keras was saved computing in 'mixed_bfloat16'.*cannot take effect"):
        policy(tmp_path / "pinned.keras", "float32")  # a setting takes effect or is refused

    # tools/export.py writes float32 graphs unless asked, as every command (a bf16 graph is slow on a CPU
    # without bf16).
    exported = []
    export_module = importlib.import_module("keras_bert_zoo.serving.export")  # the package's `export` is the function
    monkeypatch.setattr(export_module, "export", lambda task, path, **kw: exported.append(task) or path)
    export_tool.main(["--model", str(tmp_path / "preset"), "--output", str(tmp_path / "out")])
    export_tool.main(["--model", str(tmp_path / "preset"), "--output", str(tmp_path / "out"), "--precision", "auto"])
    assert [t.backbone.dtype_policy.name for t in exported] == ["float32", "mixed_bfloat16"]
    keras.utils.clear_session()
