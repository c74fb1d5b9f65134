"""`task.quantize("int8")`: Keras' int8 numbers on oneDNN's kernel, close to float, and the
quantised task saves, reloads (`.keras`, preset) and exports unchanged."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_bert_zoo as kbz
from keras_bert_zoo.utils import quantization
from tests.models.test_bert_classifier import SENTENCES, tiny_classifier

LABELS = ["neg", "neutral", "pos"]


@pytest.mark.skipif(not quantization.cpu_has_vnni(), reason="oneDNN's uint8 x int8 kernel needs VNNI")
def test_vnni_call_equals_keras_int8_call():
    # The int32 accumulator is exact in both; only the float rescaling may round differently.
    rng = np.random.default_rng(0)
    dense = keras.layers.Dense(40, activation="gelu")
    dense.build((None, 48))
    dense.set_weights([rng.normal(size=(48, 40)).astype("float32"), rng.normal(size=40).astype("float32")])
    dense.quantize("int8")
    x = rng.normal(size=(3, 5, 48)).astype("float32") * 3
    keras_out = keras.ops.convert_to_numpy(dense._int8_call(x))
    ours = keras.ops.convert_to_numpy(quantization._vnni_int8_call(dense, x))
    np.testing.assert_allclose(ours, keras_out, rtol=1e-5, atol=1e-5)
    float_out = keras.ops.convert_to_numpy(keras.activations.gelu(
        x @ (keras.ops.convert_to_numpy(dense._kernel) / keras.ops.convert_to_numpy(dense.kernel_scale))
        + keras.ops.convert_to_numpy(dense.bias)))
    assert np.abs(ours - float_out).max() > 1e-4  # activations really are rounded to int8


def test_quantized_task_predicts_close_to_float():
    task = tiny_classifier(num_classes=3, labels=LABELS)
    expected = task.predict(SENTENCES, verbose=0)
    task.quantize("int8")
    assert quantization.quantization_mode(task) == "int8"
    kernels = [v for v in task.weights if v.path.endswith("/kernel")]
    assert len(kernels) == 2 * 6 + 2 and all(v.dtype == "int8" for v in kernels)  # every Dense
    got = task.predict(SENTENCES, verbose=0)
    # Per-channel int8 weights and per-token int8 activations: each Dense is off by <~1%
    # of its output range; through 2 layers and a softmax the tiny model's probabilities
    # move by at most 0.01 (measured 0.002-0.004).
    np.testing.assert_allclose(got, expected, atol=1e-2, rtol=0)
    assert np.abs(got - expected).max() > 0  # really quantised
    assert (got.argmax(-1) == expected.argmax(-1)).all()


def test_quantized_task_round_trips_keras_file_and_preset(tmp_path):
    task = tiny_classifier(num_classes=3, labels=LABELS)
    task.quantize("int8")
    expected = task.predict(SENTENCES, verbose=0)
    path = str(tmp_path / "task.keras")
    task.save(path)
    loaded = keras.saving.load_model(path)
    assert quantization.quantization_mode(loaded) == "int8"
    np.testing.assert_allclose(loaded.predict(SENTENCES, verbose=0), expected, atol=1e-6, rtol=0)
    task.save_to_preset(str(tmp_path / "preset"))
    again = kbz.BertClassifier.from_preset(str(tmp_path / "preset"))
    assert quantization.quantization_mode(again) == "int8" and again.labels == LABELS
    # Quantising the stored dequantised floats gives back the same int8 kernels (and the
    # scales to float rounding: re-derived as 127 / (max + 2 eps), relative 1e-7 / max).
    for a, b in zip(task.weights, again.weights):
        a, b = keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b)
        if a.dtype == np.int8:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=0)
    np.testing.assert_allclose(again.predict(SENTENCES, verbose=0), expected, atol=1e-6, rtol=0)


_CLIENT = r"""
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
loaded = tf.saved_model.load(sys.argv[1])
out = loaded.signatures["serving_default"](text=tf.constant(json.loads(sys.argv[2])))
from tensorflow.core.protobuf import saved_model_pb2
proto = saved_model_pb2.SavedModel()
proto.ParseFromString(open(sys.argv[1] + "/saved_model.pb", "rb").read())
graph = proto.meta_graphs[0].graph_def
ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
print(json.dumps({"probabilities": out["probabilities"].numpy().tolist(), "ops": sorted(ops),
                  "modules": sorted(m for m in sys.modules if m.startswith("keras_bert_zoo"))}))
"""


def test_quantized_export_answers_like_the_task(tmp_path):
    # tools/export.py --quantize int8 on the float preset == the task quantised in process.
    from tools import export as export_tool

    assert export_tool.QUANTIZE_MODES == quantization.MODES
    task = tiny_classifier(num_classes=3, labels=LABELS)
    task.save_to_preset(str(tmp_path / "preset"))
    task.quantize("int8")
    expected = np.asarray(task.postprocess(task.predict(SENTENCES, verbose=0))["probabilities"])
    path = str(tmp_path / "export")
    export_tool.main(["--model", str(tmp_path / "preset"), "--output", path, "--quantize", "int8"])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="")
    run = subprocess.run([sys.executable, "-c", _CLIENT, path, json.dumps(SENTENCES)], capture_output=True,
                         text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    served = json.loads(run.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(served["probabilities"], expected, atol=1e-5, rtol=0)
    # The int8 kernel, not a dequantised float matmul; without VNNI, Keras' own int8 call.
    assert ("QuantizedMatMulWithBias" in served["ops"]) == quantization.cpu_has_vnni()
    assert served["modules"] == []


def test_bad_modes_are_clear_errors():
    task = tiny_classifier()
    with pytest.raises(ValueError, match=r"mode='int4'"):
        task.quantize("int4")
    with pytest.raises(ValueError, match=r"mode=foo"):  # Keras' own check of the mode comes first
        task.quantize("foo")
    assert quantization.quantization_mode(task) is None
    task.quantize("int8")
    with pytest.raises(ValueError, match="already quantised"):
        task.quantize("int8")
