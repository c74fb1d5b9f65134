"""tools/serve.py serves every export type, several from one process (`--model NAME=DIR`): each
row's REST answer equals the export called on that row alone in process (which equals `predict`:
tests/serving/test_export.py, test_specs.py), whether the rows came alone, in one request, or in
concurrent requests batched together (padded outputs are cut to each row's own count); `GET`
answers TF Serving's model status; a TF Serving base path serves its highest version."""

import concurrent.futures
import functools
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

pytest.importorskip("kserve")

from keras_bert_zoo import BertBackbone, BertPreprocessor, BertPretrainer, BertTokenizer  # noqa: E402
from keras_bert_zoo.serving.export import export  # noqa: E402
from tests.models.test_bert_classifier import SECONDS, SENTENCES, tiny_classifier  # noqa: E402
from tests.models.test_bert_multiple_choice import CONTEXTS, ENDINGS, tiny_multiple_choice  # noqa: E402
from tests.models.test_bert_span_extractor import _data as span_data  # noqa: E402
from tests.models.test_bert_span_extractor import _preset as span_preset  # noqa: E402
from tests.models.test_bert_token_classifier import _tagger  # noqa: E402
from tests.pretraining.test_fill_mask import VOCAB  # noqa: E402
from tests.serving import test_server as server_test  # noqa: E402

QUESTIONS, QA_CONTEXTS, _ = span_data()
TAGGER_TEXTS = ["bob visited paris .", "", "the cafe in rome . bob met ann in paris . the german call ."]
MASKED = ["the cat [MASK] on the [MASK].", "a [MASK]", "no mask here"]


def _fill_mask_pretrainer():
    backbone = BertBackbone(len(VOCAB), 2, 2, 16, 32, max_sequence_length=16)
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    return BertPretrainer(backbone, nsp=False, preprocessor=BertPreprocessor(tokenizer, sequence_length=16))


def _rows():
    """Export name -> its rows (one {input: value} per instance)."""
    return {
        "pairs": [{"text_a": a, "text_b": b} for a, b in zip(SENTENCES, SECONDS)],
        "squad": [{"question": q, "context": c} for q, c in zip(QUESTIONS, QA_CONTEXTS)],
        "tagger": [{"text": t} for t in TAGGER_TEXTS],
        "swag": [{"context": c, "endings": list(e)} for c, e in zip(CONTEXTS, ENDINGS)],
        "fill_mask": [{"text": t} for t in MASKED],
    }


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    root = tmp_path_factory.mktemp("exports")
    from keras_bert_zoo import BertSpanExtractor

    tasks = {
        "pairs": (tiny_classifier(num_classes=3, labels=["a", "b", "c"]), {"text_inputs": ("text_a", "text_b")}),
        "squad": (BertSpanExtractor.from_preset(span_preset(root)), {}),
        "tagger": (_tagger(), {}),
        "swag": (tiny_multiple_choice(), {}),
        "fill_mask": (_fill_mask_pretrainer(), {}),
    }
    paths = {}
    for name, (task, kwargs) in tasks.items():
        paths[name] = export(task, str(root / name / "1"), signatures=("text",), **kwargs)
    # TF Serving's base path with two versions: the highest (a copy of the tagger) is served.
    os.makedirs(root / "versions")
    shutil.copytree(root / "pairs" / "1", root / "versions" / "2")
    shutil.copytree(root / "tagger" / "1", root / "versions" / "7")
    paths["versions"] = str(root / "versions")
    return paths


@pytest.fixture(scope="module")
def server(exports):
    flags = [f for name in ("pairs", "squad", "tagger", "swag", "fill_mask")
             for f in ("--model", f"{name}={os.path.dirname(exports[name])}")]
    process, url = server_test._start(exports["versions"], *flags, "--max-wait-ms", "200", name=None)
    try:
        server_test._wait_ready(process, url, name="versions")
        yield url
    finally:
        process.kill()
        process.wait()


@functools.lru_cache(maxsize=None)
def _signature(export_dir):
    return tf.saved_model.load(export_dir).signatures["serving_default"]


def _alone(export_dir, row):
    """The export called in process on one row: what the server must answer for it."""
    outputs = _signature(export_dir)(**{k: tf.constant([v]) for k, v in row.items()})
    answer = {}
    for key, value in outputs.items():
        value = value.numpy()[0]
        answer[key] = value.tolist() if hasattr(value, "tolist") else value
    return answer


def _assert_same(served, expected, where):
    assert sorted(served) == sorted(expected), where
    for key, want in expected.items():
        got = served[key]
        if isinstance(want, bytes):
            want = want.decode()
        elif isinstance(want, list) and want and isinstance(np.asarray(want).flat[0], bytes):
            want = np.vectorize(lambda b: b.decode())(np.asarray(want)).tolist() if np.asarray(want).size else []
        if isinstance(want, float) or (isinstance(want, list) and np.asarray(want).dtype.kind == "f"):
            np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), atol=1e-5, err_msg=where)
        else:
            assert got == want, (where, key, got, want)


def test_status_is_tf_servings_and_the_highest_version_is_served(server, exports):
    status = server_test.get(f"{server}/v1/models/versions")
    assert status["model_version_status"] == [
        {"version": "7", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]
    assert status["ready"] is True
    code, _, body = server_test.post(server, {"instances": TAGGER_TEXTS}, name="versions")
    assert code == 200 and "num_entities" in body["predictions"][0]  # the tagger (version 7), not the pairs
    assert server_test.get(f"{server}/v1/models/squad")["model_version_status"][0]["version"] == "1"


@pytest.mark.parametrize("name", ["pairs", "squad", "tagger", "swag", "fill_mask"])
def test_each_export_type_answers_as_alone_in_process(server, exports, name):
    rows = _rows()[name]
    expected = [_alone(exports[name], row) for row in rows]
    # All rows in one request, then each row in its own concurrent request (batched together).
    code, _, body = server_test.post(server, {"instances": rows}, name=name)
    assert code == 200, body
    for i, answer in enumerate(body["predictions"]):
        _assert_same(answer, expected[i], f"{name} row {i} in one request")
    with concurrent.futures.ThreadPoolExecutor(len(rows)) as pool:
        answers = list(pool.map(lambda row: server_test.post(server, {"instances": [row]}, name=name), rows))
    for i, (code, _, body) in enumerate(answers):
        assert code == 200, body
        _assert_same(body["predictions"][0], expected[i], f"{name} row {i} alone")


def test_a_row_of_the_wrong_shape_is_refused_before_the_batch(server):
    bad = {"context": CONTEXTS[0], "endings": list(ENDINGS[0])[:-1]}
    code, _, body = server_test.post(server, {"instances": [bad]}, name="swag")
    assert code == 400 and "endings" in body["error"] and "list of" in body["error"]
    code, _, body = server_test.post(server, {"instances": [{"context": CONTEXTS[0], "endings": ENDINGS[0][0]}]},
                                     name="swag")
    assert code == 400 and "endings" in body["error"]
