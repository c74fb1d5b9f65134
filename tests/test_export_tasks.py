"""`export` for the other tasks: the functions a SavedModel holds, run in process, equal `predict`
(saving, loading in a plain-TensorFlow process and atomicity are tests/test_export.py's)."""

import importlib

import numpy as np
import tensorflow as tf

from tests.models.test_bert_multiple_choice import CONTEXTS, ENDINGS, tiny_multiple_choice

export_lib = importlib.import_module("keras_bert_zoo.export")


def _functions(task, signatures=("text", "ids", "examples")):
    spec = export_lib.export_tasks.serving_spec(task)
    return {key: fn for key, (fn, _) in export_lib.serving_functions(task, spec, signatures).items()}


def test_multiple_choice_context_and_endings():
    task = tiny_multiple_choice()
    functions = _functions(task)  # ids: traced here, run below
    scores = task.predict((CONTEXTS, ENDINGS), verbose=0)
    expected = {k: np.asarray(v) for k, v in task.postprocess(scores).items()}
    served = functions["serving_default"](context=tf.constant(CONTEXTS), endings=tf.constant(ENDINGS))
    assert sorted(served) == ["choice", "probabilities"]
    np.testing.assert_allclose(served["probabilities"].numpy(), expected["probabilities"], atol=1e-5, rtol=0)
    assert served["choice"].numpy().tolist() == expected["choice_ids"].tolist()
    ids = task.preprocessor((CONTEXTS, ENDINGS))
    by_ids = functions["ids"](**{k: tf.constant(v) for k, v in ids.items()})
    np.testing.assert_allclose(by_ids["probabilities"].numpy(), expected["probabilities"], atol=1e-5, rtol=0)
    examples = [tf.train.Example(features=tf.train.Features(feature={
        "context": tf.train.Feature(bytes_list=tf.train.BytesList(value=[c.encode()])),
        "endings": tf.train.Feature(bytes_list=tf.train.BytesList(value=[e.encode() for e in endings]))}))
        .SerializeToString() for c, endings in zip(CONTEXTS, ENDINGS)]
    by_examples = functions["examples"](inputs=tf.constant(examples))
    np.testing.assert_allclose(by_examples["probabilities"].numpy(), expected["probabilities"], atol=1e-5, rtol=0)
    # Bad rows: an empty context and an invalid UTF-8 ending are answered; other rows unchanged.
    bad = functions["serving_default"](context=tf.constant([b"", CONTEXTS[1].encode()]),
                                       endings=tf.constant([[b"\xff", b"", b"w1"], [e.encode() for e in ENDINGS[1]]]))
    np.testing.assert_allclose(bad["probabilities"].numpy()[1], expected["probabilities"][1], atol=1e-5, rtol=0)
    assert np.isfinite(bad["probabilities"].numpy()).all()
