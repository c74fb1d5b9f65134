"""What every export answers at the edges of its input (issue 45): a 1 MB string in bounded memory,
an empty batch with empty outputs, and rows or ids out of bounds with a message naming the input
and the limit. The functions `export` saves, run in one fresh process (its peak memory is the
requests', not the other tests'); saving and loading are tests/serving/test_export.py's."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BOUND_MB = 2048  # peak RSS growth while every task answers a 1 MB string

_SCRIPT = r"""
import importlib, json, os, resource, sys, tempfile, pathlib
import numpy as np
import tensorflow as tf

export_lib = importlib.import_module("keras_bert_zoo.serving.export")
from keras_bert_zoo import BertBackbone, BertPreprocessor, BertPretrainer, BertTokenizer
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from tests.models.test_bert_classifier import tiny_classifier
from tests.models.test_bert_feature_extractor import _extractor
from tests.models.test_bert_multiple_choice import tiny_multiple_choice
from tests.models.test_bert_span_extractor import _preset
from tests.models.test_bert_token_classifier import _tagger
from tests.pretraining.test_fill_mask import VOCAB

LONG = "w5 w6 " * 175_000  # ~1 MB


def fill_mask():
    backbone = BertBackbone(len(VOCAB), 2, 2, 16, 32, max_sequence_length=16)
    return BertPretrainer(backbone, nsp=False,
                          preprocessor=BertPreprocessor(BertTokenizer(VOCAB, lowercase=True), sequence_length=16))


TASKS = {
    "classifier": (lambda: tiny_classifier(num_classes=3, labels=["a", "b", "c"]), None),
    "pair_classifier": (lambda: tiny_classifier(num_classes=1), ("text_a", "text_b")),
    "multiple_choice": (tiny_multiple_choice, None),
    "span_extractor": (lambda: BertSpanExtractor.from_preset(_preset(pathlib.Path(tempfile.mkdtemp())),
                                                             sequence_length=32, doc_stride=8, max_query_length=6), None),
    "token_classifier": (_tagger, None),
    "feature_extractor": (_extractor, None),
    "fill_mask": (fill_mask, None),
}


def strings(spec, rows, text):
    return tf.fill([rows] + spec.shape.as_list()[1:], tf.constant(text))


def ids(spec, rows):
    shape = [rows] + [d or 4 for d in spec.shape.as_list()[1:]]
    if spec.name == "mask_positions":
        shape[-1] = 1
    return (tf.ones if spec.name == "padding_mask" else tf.zeros)(shape, spec.dtype)


def described(outputs):
    return {k: [v.dtype.name, v.shape.as_list()] for k, v in sorted(outputs.items())}


def rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


functions, specs = {}, {}
for name, (build, text_inputs) in TASKS.items():
    task = build()
    specs[name] = spec = export_lib.export_tasks.serving_spec(task, text_inputs)
    signatures = ("text", "ids", "examples") if name == "classifier" else ("text", "ids")
    functions[name] = {k: f for k, (f, _) in export_lib.serving_functions(task, spec, signatures).items()}
result = {"memory": {}, "empty": {}, "one": {}, "errors": {}, "truncated": {}, "short": {}}
before = rss_mb()
for name, fns in functions.items():  # first, while the process's peak is the built tasks'
    start = rss_mb()
    text = "[MASK] " + LONG if name == "fill_mask" else LONG
    out = fns["serving_default"](**{n: strings(s, 1, text) for n, s in specs[name].text_specs().items()})
    result["memory"][name] = [rss_mb() - start, {k: v.shape.as_list() for k, v in out.items()}]
    result["truncated"][name] = out["input_truncated"].numpy().tolist()
result["peak_growth_mb"] = rss_mb() - before
for name, fns in functions.items():
    text_specs, ids_specs = specs[name].text_specs(), specs[name].ids_specs()
    for rows, key in ((0, "empty"), (1, "one")):
        answers = {"text": fns["serving_default"](**{n: strings(s, rows, "w1 w2") for n, s in text_specs.items()}),
                   "ids": fns["ids"](**{n: ids(s, rows) for n, s in ids_specs.items()})}
        if "examples" in fns:
            answers["examples"] = fns["examples"](inputs=tf.constant([b""] * rows, tf.string))
        result[key][name] = {k: described(v) for k, v in answers.items()}
        result["short"].setdefault(name, []).extend(answers["text"]["input_truncated"].numpy().tolist())


def error(function, **inputs):
    try:
        function(**inputs)
    except tf.errors.InvalidArgumentError as e:
        return e.message
    return None


qa, pair, classifier = functions["span_extractor"], functions["pair_classifier"], functions["classifier"]
result["errors"]["qa_rows"] = error(qa["serving_default"], question=tf.constant(["w1", "w2"]), context=tf.constant(["w3"]))
result["errors"]["pair_rows"] = error(pair["serving_default"], text_a=tf.constant(["w1"]), text_b=tf.constant(["w2", "w3"]))
long_ids = {n: tf.ones([1, 600], tf.int32) for n in ("token_ids", "segment_ids", "padding_mask")}
result["errors"]["ids_length"] = error(classifier["ids"], **long_ids)
result["errors"]["ids_shapes"] = error(classifier["ids"], token_ids=tf.ones([1, 8], tf.int32),
                                       segment_ids=tf.zeros([1, 7], tf.int32), padding_mask=tf.ones([1, 8], tf.int32))
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def limits():
    env = dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="3")
    run = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=REPO, env=env, capture_output=True, text=True,
                         timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_every_export_answers_a_1mb_string_in_bounded_memory(limits):
    assert sorted(limits["memory"]) == ["classifier", "feature_extractor", "fill_mask", "multiple_choice",
                                        "pair_classifier", "span_extractor", "token_classifier"]
    for name, (_, shapes) in limits["memory"].items():
        assert all(shape[0] == 1 for shape in shapes.values()), (name, shapes)  # one answer per input row
    # Peak RSS over all seven requests, above what the built tasks held: each request's own peak is under it.
    assert limits["peak_growth_mb"] < BOUND_MB, limits["memory"]


def test_every_text_answer_says_which_rows_were_cut(limits):
    """The 1 MB string was read up to max_input_chars: each export's answer says so (issue #58)."""
    assert limits["truncated"] == {name: [True] for name in limits["memory"]}
    assert limits["short"] == {name: [False] for name in limits["memory"]}  # "w1 w2": nothing cut


def test_an_empty_batch_gets_empty_outputs_of_every_signature(limits):
    for name, signatures in limits["one"].items():
        for signature, outputs in signatures.items():
            empty = limits["empty"][name][signature]
            assert sorted(empty) == sorted(outputs), (name, signature)
            for key, (dtype, shape) in outputs.items():
                got_dtype, got_shape = empty[key]
                assert got_dtype == dtype and len(got_shape) == len(shape), (name, signature, key, empty[key])
                assert got_shape[0] == 0, (name, signature, key, got_shape)


def test_rows_and_ids_out_of_bounds_name_the_input_and_the_limit(limits):
    errors = limits["errors"]
    for key, first, second in (("qa_rows", "question", "context"), ("pair_rows", "text_b", "text_a")):
        assert errors[key] and "one row per example" in errors[key], errors[key]
        assert f"`{first}`" in errors[key] and f"`{second}`" in errors[key], errors[key]
    assert "`token_ids` has more positions than max_sequence_length=32, the most this model takes" in errors[
        "ids_length"]
    assert "`segment_ids` must have the shape of `token_ids`" in errors["ids_shapes"]
