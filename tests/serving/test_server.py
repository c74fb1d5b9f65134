"""tools/serve.py: a KServe model server answering TF Serving's REST API for our exports, with
dynamic batching; bad requests get 4xx and hurt nobody; overload gets 503; SIGTERM drains.

One tiny classifier export, and two server subprocesses started together: `fast` for answers
and bad requests, `slow` (--max-queue 1, each batch delayed 2.5 s) for overload and SIGTERM."""

import asyncio
import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

pytest.importorskip("kserve")

from keras_bert_zoo.serving.export import export  # noqa: E402
from keras_bert_zoo.serving.server import ExportModel  # noqa: E402  (needs kserve)
from tests.helpers import serve_strings  # noqa: E402
from tests.models.test_bert_classifier import SENTENCES, tiny_classifier  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABELS = ["neg", "neutral", "pos"]
NAME = "tiny"


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(export_dir, *flags, name=NAME):
    port = _free_port()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    process = subprocess.Popen(
        [sys.executable, os.path.join(REPO, "tools", "serve.py"), "--model", export_dir,
         *(["--name", name] if name else []), "--port", str(port), *flags],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    return process, f"http://127.0.0.1:{port}"


def get(url, timeout=10):
    """The JSON body of a GET."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def _wait_ready(process, url, timeout=120, name=NAME):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited {process.returncode}: {process.stderr.read().decode()[-3000:]}")
        try:
            return get(f"{url}/v1/models/{name}", timeout=2)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(0.3)
    raise TimeoutError(url)


def post(url, body, timeout=60, name=NAME):
    """(status, headers (case-insensitive), JSON body) of a predict request; `body` is an object or raw bytes."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"{url}/v1/models/{name}:predict", data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.headers, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.loads(error.read() or b"null")


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("serve") / "classifier")
    export(tiny_classifier(num_classes=3, labels=LABELS), path)
    return path


@pytest.fixture(scope="module")
def servers(export_dir):
    fast = _start(export_dir, "--max-wait-ms", "50", "--max-instances", "4096")
    slow = _start(export_dir, "--max-queue", "1", "--max-wait-ms", "0", "--batch-delay-ms", "2500")
    try:
        status = _wait_ready(*fast)
        _wait_ready(*slow)
        yield {"fast": fast[1], "slow": slow, "status": status}
    finally:
        for process, _ in (fast, slow):
            if process.poll() is None:
                process.kill()
            process.wait()


def _expected(export_dir, texts):
    outputs = serve_strings(export_dir, text=texts)
    return {key: value.numpy().tolist() for key, value in outputs.items()}


def _assert_rows_equal(predictions, expected):
    for index, row in enumerate(predictions):
        for key, values in expected.items():
            want = values[index]
            want = want.decode() if isinstance(want, bytes) else want
            if isinstance(want, (float, list)):
                np.testing.assert_allclose(row[key], want, atol=1e-5)
            else:
                assert row[key] == want, (key, index)


def test_status_and_answers_equal_the_export(servers, export_dir):
    assert servers["status"] == {"name": NAME, "ready": True, "model_version_status": [
        {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
    url = servers["fast"]
    expected = _expected(export_dir, SENTENCES)
    status, _, rows = post(url, {"instances": SENTENCES})
    assert status == 200 and list(rows) == ["predictions"] and len(rows["predictions"]) == len(SENTENCES)
    _assert_rows_equal(rows["predictions"], expected)
    status, _, same = post(url, {"instances": [{"text": t} for t in SENTENCES]})
    assert status == 200 and same == rows
    status, _, columns = post(url, {"inputs": {"text": SENTENCES}})
    assert status == 200 and sorted(columns["outputs"]) == sorted(expected)
    assert columns["outputs"] == {k: [r[k] for r in rows["predictions"]] for k in expected}
    status, _, b64 = post(url, {"instances": [{"b64": "dzEgdzI="}]})  # "w1 w2"
    assert status == 200 and b64 == post(url, {"instances": ["w1 w2"]})[2]


def test_concurrent_requests_batch_and_answer_as_alone(servers):
    url = servers["fast"]
    alone = [post(url, {"instances": [text]})[2]["predictions"][0] for text in SENTENCES]
    with concurrent.futures.ThreadPoolExecutor(len(SENTENCES) * 2) as pool:
        answers = list(pool.map(lambda t: post(url, {"instances": [t]}), SENTENCES * 2))
    for (status, _, body), single in zip(answers, alone * 2):
        assert status == 200
        _assert_rows_equal(body["predictions"], {k: [v] for k, v in single.items()})


def test_concurrent_requests_share_one_call_of_the_signature(export_dir):
    model = ExportModel(NAME, export_dir, max_batch_size=32, max_wait_ms=300)
    model.load()

    async def concurrently():
        return await asyncio.gather(*(model.predict({"instances": [t]}) for t in SENTENCES))

    answers = asyncio.run(concurrently())
    assert model.batches == 1
    alone = [model.run_rows([{"text": t.encode()}])[0] for t in SENTENCES]
    for answer, single in zip(answers, alone):
        _assert_rows_equal(answer["predictions"], {k: [v] for k, v in single.items()})


BAD = {
    "malformed JSON": (b'{"instances": [', 400, "Unrecognized request format"),
    "wrong key": ({"instancez": ["w1"]}, 400, "instances"),
    "both keys": ({"instances": ["w1"], "inputs": ["w1"]}, 400, "exactly one"),
    "number instance": ({"instances": [1, 2]}, 400, "string"),
    "wrong input name": ({"instances": [{"txt": "w1"}]}, 400, "inputs ['text']"),
    "empty instances": ({"instances": []}, 400, "non-empty"),
    "instances not a list": ({"instances": "w1"}, 400, "list"),
    "empty column": ({"inputs": {"text": []}}, 400, "non-empty"),
    "bad base64": ({"instances": [{"b64": "***"}]}, 400, "base64"),
    "invalid UTF-8": (b'{"instances": ["w1 \xff\xfe"]}', 400, ""),
    "10,000 instances": ({"instances": ["w1 w2"] * 10_000}, 413, "at most 4096"),
    "unknown signature": ({"signature_name": "ids", "instances": ["w1"]}, 400, "signature_name"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_request_gets_4xx_and_the_server_still_answers(servers, case):
    url = servers["fast"]
    body, code, words = BAD[case]
    status, _, answer = post(url, body)
    assert status == code, (status, answer)
    message = json.dumps(answer)
    assert words in message, message
    status, _, good = post(url, {"instances": ["w1 w2"]})
    assert status == 200 and len(good["predictions"]) == 1


def test_a_1mb_string_is_answered(servers):
    status, _, answer = post(servers["fast"], {"instances": ["w5 w6 " * 180_000, "w1"]})
    assert status == 200 and [p["label"] in LABELS for p in answer["predictions"]] == [True, True]


def test_overload_gets_503_and_sigterm_drains(servers):
    process, url = servers["slow"]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        running = pool.submit(post, url, {"instances": ["w1"]})  # taken by the worker, slow
        time.sleep(0.8)
        queued = pool.submit(post, url, {"instances": ["w2"]})  # waits in the queue (max 1)
        time.sleep(0.5)
        status, headers, body = post(url, {"instances": ["w3"]})
        assert status == 503 and headers.get("Retry-After") == "1", (status, body)
        assert "overloaded" in json.dumps(body)
        time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        assert running.result()[0] == 200 and queued.result()[0] == 200
    assert process.wait(timeout=60) == 0
