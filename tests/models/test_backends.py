"""The model code (keras.ops only) on the JAX and PyTorch backends gives TensorFlow's numbers.

A tiny `BertPretrainer` is built here (TensorFlow backend), its weights saved; a
subprocess with `KERAS_BACKEND=jax` or `torch` loads them, runs the forward pass and one
SGD training step (the original losses and their gradients) and saves its results, which must
equal this process's. `make test` installs the CPU builds of both (the `test` extra and the
Makefile's torch step); a test is skipped only where its backend's package is missing.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

_SCRIPT = r"""
import os, sys
os.environ["KERAS_BACKEND"] = sys.argv[4]
import numpy as np
import keras
sys.path.insert(0, sys.argv[3])
from tests.models.test_backends import build, batch
assert keras.backend.backend() == sys.argv[4]
model = build()
x, y = batch()
model(x)
model.load_weights(sys.argv[1])
out = model(x)
logs = model.train_on_batch(x, y, return_dict=True)
arrays = {k: keras.ops.convert_to_numpy(v) for k, v in out.items() if k in ("mlm_logits", "nsp_logits")}
arrays.update({f"w{i}": keras.ops.convert_to_numpy(w) for i, w in enumerate(model.weights)})
arrays["loss"] = np.array(float(logs["loss"]))
np.savez(sys.argv[2], **arrays)
"""


def build():
    import keras

    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

    keras.utils.set_random_seed(0)
    model = BertPretrainer(BertBackbone(50, 2, 2, 16, 32, max_sequence_length=16, dropout=0.0))
    # SGD: the gradients are what is compared. (Adam's m / sqrt(v) would turn float
    # rounding in a near-zero gradient into a full-size step.)
    model.compile(optimizer=keras.optimizers.SGD(0.5), jit_compile=False)
    return model


def batch():
    rng = np.random.default_rng(0)
    mask = (np.arange(16)[None] < np.array([[16], [11]])).astype("int32")
    x = {"token_ids": rng.integers(5, 50, (2, 16)).astype("int32") * mask,
         "segment_ids": (np.arange(16)[None] >= 6).astype("int32") * mask,
         "padding_mask": mask, "mask_positions": np.array([[1, 2, 7], [4, 5, 0]], "int32")}
    y = {"mlm_ids": np.array([[6, 7, 8], [9, 10, 0]], "int32"),
         "mlm_weights": np.array([[1, 1, 1], [1, 1, 0]], "float32"), "nsp_labels": np.array([0, 1], "int32")}
    return x, y


@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_backend_matches_tensorflow_forward_and_a_training_step(backend, tmp_path):
    pytest.importorskip(backend)
    import keras

    model = build()
    x, y = batch()
    model(x)
    weights = str(tmp_path / "start.weights.h5")
    model.save_weights(weights)
    out = model(x)
    before = [keras.ops.convert_to_numpy(w) for w in model.weights]
    loss = float(model.train_on_batch(x, y, return_dict=True)["loss"])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    result = str(tmp_path / f"{backend}.npz")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, weights, result, root, backend],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = np.load(result)
    for key in ("mlm_logits", "nsp_logits"):
        np.testing.assert_allclose(got[key], keras.ops.convert_to_numpy(out[key]), atol=1e-5, err_msg=key)
    np.testing.assert_allclose(float(got["loss"]), loss, rtol=1e-5)
    moved = 0
    for i, w in enumerate(model.weights):  # after one SGD step on each backend
        after = keras.ops.convert_to_numpy(w)
        np.testing.assert_allclose(got[f"w{i}"], after, atol=1e-5, err_msg=w.path)
        moved += not np.allclose(after, before[i], atol=1e-4)
    assert moved > len(model.weights) // 2  # the step really changed the weights
