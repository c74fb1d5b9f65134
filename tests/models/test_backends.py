"""The model code (keras.ops only) on the JAX and PyTorch backends gives TensorFlow's numbers.

Each model of `CASES` (the pretrainer and every task's model part, fed packed ids with
`preprocessor=None`) is built tiny here on TensorFlow and its weights saved; one
subprocess per backend (`KERAS_BACKEND=jax` or `torch`) loads them for every model, runs
the forward pass and one SGD training step (the task's own loss, sample weights where the
task has them) and saves its results, which must equal this process's within 1e-5.
`make test` installs the CPU builds of both (JAX in `.venv/jax_backend`, outside site-packages, so
that TensorFlow's import does not load it in every process; torch by the Makefile's torch step);
a test is skipped only where its backend's package is missing.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

# Where `make test` installs JAX (outside site-packages; see the Makefile).
JAX_DIR = os.path.join(sys.prefix, "jax_backend")

_SCRIPT = r"""
import os, sys
os.environ["KERAS_BACKEND"] = sys.argv[3]
import numpy as np
import keras
sys.path.insert(0, sys.argv[2])
from tests.models.test_backends import CASES, run_case
assert keras.backend.backend() == sys.argv[3]
for name in CASES:
    np.savez(os.path.join(sys.argv[1], f"{name}.{sys.argv[3]}.npz"), **run_case(name, sys.argv[1]))
"""

SEQ = 16


def _backbone():
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    return BertBackbone(50, 2, 2, 16, 32, max_sequence_length=SEQ, dropout=0.0)


def _packed(rng, rows, lengths):
    """Packed ids of `rows` rows, row i padded from `lengths[i]` (pairs: segment 1 from 6)."""
    mask = (np.arange(SEQ)[None] < np.asarray(lengths)[:, None]).astype("int32")
    return {"token_ids": rng.integers(5, 50, (rows, SEQ)).astype("int32") * mask,
            "segment_ids": (np.arange(SEQ)[None] >= 6).astype("int32") * mask, "padding_mask": mask}


def _pretrainer(rng):
    from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

    x = dict(_packed(rng, 2, [16, 11]), mask_positions=np.array([[1, 2, 7], [4, 5, 0]], "int32"))
    y = {"mlm_ids": np.array([[6, 7, 8], [9, 10, 0]], "int32"),
         "mlm_weights": np.array([[1, 1, 1], [1, 1, 0]], "float32"), "nsp_labels": np.array([0, 1], "int32")}
    return BertPretrainer(_backbone()), x, y, None


def _classifier(rng):
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    return BertClassifier(_backbone(), 3, dropout=0.0), _packed(rng, 2, [16, 9]), np.array([2, 0]), None


def _multiple_choice(rng):
    from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice

    x = {k: v.reshape(2, 3, SEQ) for k, v in _packed(rng, 6, [16, 12, 9, 14, 7, 16]).items()}
    return BertMultipleChoice(_backbone(), 3, dropout=0.0), x, np.array([1, 2]), None


def _span_extractor(rng):
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    return BertSpanExtractor(_backbone()), _packed(rng, 2, [16, 12]), [np.array([7, 0]), np.array([9, 0])], None


def _token_labels(rng, num_classes):
    x = _packed(rng, 2, [16, 10])
    y = rng.integers(0, num_classes, (2, SEQ)).astype("int32")
    first_pieces = (rng.random((2, SEQ)) < 0.6) * x["padding_mask"]  # the scored positions
    return x, y, first_pieces.astype("float32")


def _token_classifier(rng):
    from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier

    return (BertTokenClassifier(_backbone(), 5, dropout=0.0),) + _token_labels(rng, 5)


def _feature_extractor(rng):
    from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor

    model = BertFeatureExtractor(_backbone(), 5, feature="weighted_sum_last_four", lstm_units=4, dropout=0.0)
    return (model,) + _token_labels(rng, 5)


# name -> rng -> (model, x, y, sample_weight)
CASES = {
    "pretrainer": _pretrainer,
    "classifier": _classifier,
    "multiple_choice": _multiple_choice,
    "span_extractor": _span_extractor,
    "token_classifier": _token_classifier,
    "feature_extractor": _feature_extractor,
}


def _jitted_forward(model, x):
    """The forward pass as one compiled program, as JAX runs `predict` (op by op, JAX compiled
    each primitive apart: 3.8 s against ~1 s for the pretrainer)."""
    import jax

    call = jax.jit(lambda trainable, other, x: model.stateless_call(trainable, other, x, training=False)[0])
    return call([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables], x)


def run_case(name, directory):
    """Forward pass and one SGD step of `CASES[name]` on this process's backend.

    TensorFlow writes the starting weights to `directory`; the other backends load them.

    Returns:
        dict of arrays: `out<i>` the outputs (flattened), `s<i>` and `w<i>` the weights
        before and after the step, `t<i>` whether weight i is trainable, `loss` and `paths`.
    """
    import keras

    keras.utils.set_random_seed(0)
    model, x, y, sample_weight = CASES[name](np.random.default_rng(0))
    # SGD: the gradients are what is compared. (Adam's m / sqrt(v) would turn float
    # rounding in a near-zero gradient into a full-size step.) JAX compiles the step, as it
    # does by default: op by op it compiled every primitive apart (70 s against 50 s for the
    # six cases on one core).
    # TensorFlow (the reference) runs the step eagerly: tracing it cost more than running it.
    backend = keras.backend.backend()
    model.compile(optimizer=keras.optimizers.SGD(0.5), jit_compile=backend == "jax",
                  run_eagerly=backend == "tensorflow")
    assert model.built  # functional: the weights exist before any call
    weights = os.path.join(directory, f"{name}.weights.h5")
    if backend == "tensorflow":
        model.save_weights(weights)
    else:
        model.load_weights(weights)
    outputs = keras.tree.flatten(_jitted_forward(model, x) if backend == "jax" else model(x))
    start = [keras.ops.convert_to_numpy(w) for w in model.weights]
    logs = model.train_on_batch(x, y, sample_weight=sample_weight, return_dict=True)
    trainable = {id(w) for w in model.trainable_weights}
    arrays = {f"out{i}": keras.ops.convert_to_numpy(t) for i, t in enumerate(outputs)}
    arrays.update({f"w{i}": keras.ops.convert_to_numpy(w) for i, w in enumerate(model.weights)})
    arrays.update({f"s{i}": value for i, value in enumerate(start)})
    arrays.update({f"t{i}": np.array(id(w) in trainable) for i, w in enumerate(model.weights)})
    arrays["loss"] = np.array(float(logs["loss"]))
    arrays["paths"] = np.array([w.path for w in model.weights])
    return arrays


@pytest.fixture(scope="module")
def tensorflow_results(tmp_path_factory):
    """Every case on TensorFlow (this process), and the directory with its starting weights."""
    import keras

    directory = str(tmp_path_factory.mktemp("backends"))
    results = {}
    for name in CASES:
        keras.utils.clear_session()
        results[name] = run_case(name, directory)
    return directory, results


@pytest.mark.early(50)
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_backend_matches_tensorflow_forward_and_a_training_step(backend, tensorflow_results):
    directory, expected = tensorflow_results
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, KERAS_BACKEND=backend, TF_CPP_MIN_LOG_LEVEL="3")
    if backend != "jax":
        pytest.importorskip(backend)
    else:
        if not os.path.isdir(os.path.join(JAX_DIR, "jax")):
            pytest.importorskip("jax", reason=f"JAX is neither in {JAX_DIR} (`make test` puts it there) nor importable")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [JAX_DIR, env.get("PYTHONPATH")]))
        # Compiling is most of the JAX side's time; at XLA's lowest code-generation level it
        # takes ~20% less. The model code and the compared numbers are the same.
        env["XLA_FLAGS"] = " ".join(filter(None, [env.get("XLA_FLAGS"), "--xla_backend_optimization_level=0"]))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, directory, root, backend],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name, want in expected.items():
        got = np.load(os.path.join(directory, f"{name}.{backend}.npz"))
        assert sorted(got.files) == sorted(want), name
        assert list(got["paths"]) == list(want["paths"]), name
        outputs = [k for k in want if k.startswith("out")]
        assert outputs, name
        for key in outputs:
            np.testing.assert_allclose(got[key], want[key], atol=1e-5, err_msg=f"{name} {key}")
        np.testing.assert_allclose(float(got["loss"]), float(want["loss"]), rtol=1e-5, err_msg=name)
        paths = want["paths"]
        for i, path in enumerate(paths):  # after one SGD step on each backend
            np.testing.assert_allclose(got[f"w{i}"], want[f"w{i}"], atol=1e-5, err_msg=f"{name} {path}")


def test_the_training_step_moves_the_trainable_weights(tensorflow_results):
    """The compared step is a real one: most trainable weights move, frozen ones stay."""
    for name, result in tensorflow_results[1].items():
        trainable = [i for i in range(len(result["paths"])) if bool(result[f"t{i}"])]
        frozen = [i for i in range(len(result["paths"])) if not bool(result[f"t{i}"])]
        moved = sum(not np.array_equal(result[f"s{i}"], result[f"w{i}"]) for i in trainable)
        assert trainable and moved > len(trainable) // 2, (name, moved, len(trainable))
        assert all(np.array_equal(result[f"s{i}"], result[f"w{i}"]) for i in frozen), name
