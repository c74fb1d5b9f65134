"""tools/export.py and tools/predict.py: a task preset -> SavedModel -> JSON Lines answers equal to
`task.predict`, in input order, in TF Serving's REST shapes; the same answers from the preset."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from tests.models.test_bert_classifier import SENTENCES, tiny_classifier
from tools import export as export_tool
from tools import predict as predict_tool

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABELS = ["neg", "pos"]


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    """A tiny classifier saved as a task preset, for the tools to load."""
    path = str(tmp_path_factory.mktemp("tools") / "preset")
    tiny_classifier(labels=LABELS).save_to_preset(path)
    return path


@pytest.mark.parametrize("tool", ["export", "predict"])
def test_help_does_not_import_tensorflow(tool):
    proc = subprocess.run([sys.executable, "-X", "importtime", f"tools/{tool}.py", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("usage:"), proc.stderr[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "tensorflow" not in imported and "keras_bert_zoo" not in imported


def test_preset_to_saved_model_to_json_lines(tmp_path):
    task = tiny_classifier(labels=LABELS)
    preset, served = str(tmp_path / "preset"), str(tmp_path / "served" / "1")
    task.save_to_preset(preset)
    export_tool.main(["--model", preset, "--output", served, "--signatures", "text"])
    probabilities = np.asarray(task.postprocess(task.predict(SENTENCES, verbose=0))["probabilities"])

    # Instances one per line (objects and a bare string), then a row-format and a columnar request.
    lines = [{"text": s} for s in SENTENCES[:4]] + [SENTENCES[4]]
    lines += [{"instances": [{"text": SENTENCES[5]}, SENTENCES[0]]}, {"inputs": {"text": SENTENCES[1:3]}}]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in lines))
    answers = {}
    for model in (served, preset):
        out = tmp_path / "out.jsonl"
        predict_tool.main(["--model", model, "--input", str(source), "--output", str(out), "--batch-size", "2",
                           "--no-progress", "--overwrite"])
        answers[model] = [json.loads(line) for line in out.read_text().splitlines()]
    got = answers[served]
    assert len(got) == 7 and sorted(got[0]) == ["input_truncated", "label", "label_id", "probabilities"]
    for row, i in zip(got[:5], range(5)):  # batched by length (batch 2), written in input order
        np.testing.assert_allclose(row["probabilities"], probabilities[i], atol=1e-5, rtol=0)
        assert row["label"] == LABELS[int(np.argmax(probabilities[i]))] and row["label_id"] == int(
            np.argmax(probabilities[i]))
        assert row["input_truncated"] is False  # a short sentence: read whole
    predictions = got[5]["predictions"]
    np.testing.assert_allclose([p["probabilities"] for p in predictions], probabilities[[5, 0]], atol=1e-5, rtol=0)
    outputs = got[6]["outputs"]
    assert sorted(outputs) == ["input_truncated", "label", "label_id", "probabilities"]
    np.testing.assert_allclose(outputs["probabilities"], probabilities[1:3], atol=1e-5, rtol=0)
    # The preset runs the function `export` saves: the same answers.
    from_preset = answers[preset]
    assert [a["label"] for a in from_preset[:5]] == [b["label"] for b in got[:5]]
    np.testing.assert_allclose([a["probabilities"] for a in from_preset[:5]], [b["probabilities"] for b in got[:5]],
                               atol=1e-6, rtol=0)
    assert from_preset[6]["outputs"]["label"] == outputs["label"]


def test_bad_lines_and_instances_are_named(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text('not json\n{"text": \n')  # no line is JSON: refused before the model loads
    with pytest.raises(ValueError, match="no line of .*in.jsonl is UTF-8 JSON; the first: .*in.jsonl:1 is not JSON"):
        predict_tool.main(["--model", str(tmp_path), "--input", str(source), "--output", "-"])
    with pytest.raises(ValueError, match="--batch-size"):
        predict_tool.main(["--model", str(tmp_path), "--input", str(source), "--output", "-", "--batch-size", "0"])
    with pytest.raises(ValueError, match="does not exist"):
        export_tool.main(["--model", str(tmp_path / "nothing"), "--output", str(tmp_path / "x")])


def test_feature_extractor_preset_serves_as_the_task():
    """A tagger's preset (here a feature extractor's, with its BiLSTM) loads for tools/export.py and
    tools/predict.py and answers as the task it was saved from."""
    import tempfile

    import tensorflow as tf

    from keras_bert_zoo.serving import client as export_client
    from keras_bert_zoo.serving.export import serving_functions
    from keras_bert_zoo.serving.specs import serving_spec
    from tests.models.test_bert_feature_extractor import _extractor

    task = _extractor()
    dense = task.output_dense
    dense.kernel.assign(np.random.default_rng(1).normal(size=dense.kernel.shape).astype("float32") * 5)
    texts = tf.constant(["bob visited paris .", "u.s. bob germans paris the cafe eu ann"])
    expected = serving_functions(task, serving_spec(task), ("text",))["serving_default"][0](text=texts)
    with tempfile.TemporaryDirectory() as preset:
        task.save_to_preset(preset)
        function = export_client.serving_function(preset)
    assert export_client.input_names(function) == ["text"]
    served = function(text=texts)
    assert sorted(served) == sorted(expected)
    assert sum(served["num_entities"].numpy()) > 0
    for key in ("entity_text", "entity_type", "start_char", "num_entities", "num_tokens"):
        assert served[key].numpy().tolist() == expected[key].numpy().tolist(), key
    np.testing.assert_allclose(served["pooled_output"].numpy(), expected["pooled_output"].numpy(), atol=1e-6)


def test_export_tool_writes_only_its_own_version_folder(preset, tmp_path, monkeypatch):
    """R?: --output DIR with TF Serving's version folders or a user's files: a new version is
    added, the rest left alone; a folder that is not ours is refused, naming it and --version;
    an earlier export is replaced only with --overwrite."""
    import importlib

    export_lib = importlib.import_module("keras_bert_zoo.serving.export")

    def fake_save(module, directory, signatures=None):
        with open(os.path.join(directory, "saved_model.pb"), "wb") as f:
            f.write(b"new")

    monkeypatch.setattr(export_lib.tf.saved_model, "save", fake_save)
    served = tmp_path / "served"
    (served / "1").mkdir(parents=True)
    (served / "1" / "saved_model.pb").write_bytes(b"theirs")
    args = ["--model", preset, "--signatures", "ids", "--precision", "float32"]
    assert export_tool.main(args + ["--output", str(served)]) == str(served / "2")
    assert (served / "1" / "saved_model.pb").read_bytes() == b"theirs"
    with pytest.raises(ValueError, match=rf"--output: {served / '2'} holds an earlier export. Pass --overwrite"):
        export_tool.main(args + ["--output", str(served / "2")])
    assert export_tool.main(args + ["--output", str(served / "2"), "--overwrite"]) == str(served / "2")
    (served / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=rf"{served} holds files that are not an export .*--version N or --version next"):
        export_tool.main(args + ["--output", str(served)])
    assert export_tool.main(args + ["--output", str(served), "--version", "next"]) == str(served / "3")
    assert export_tool.main(args + ["--output", str(served), "--version", "7"]) == str(served / "7")
    assert sorted(os.listdir(served)) == ["1", "2", "3", "7", "notes.txt"]
    assert (served / "notes.txt").read_text() == "mine"
    with pytest.raises(SystemExit):
        export_tool.main(args + ["--output", str(served), "--version", "-1"])


def test_predict_keeps_one_line_per_input_line_and_names_bad_ones(preset, tmp_path):
    """R?: blank lines were dropped (5 lines in, 3 out), `5` / `null` / a list gave "mixed types"
    without the line, invalid UTF-8 a traceback, and --output equal to --input overwrote it."""
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text('"w1 w2"\n\n{"text": "w3"}\n   \n"w4"\n')
    written, failed = predict_tool.main(["--model", preset, "--input", str(source), "--output", str(out),
                                         "--no-progress"])
    lines = out.read_text().splitlines()
    assert written == len(lines) == 5 and failed == 0 and lines[1] == lines[3] == "null"
    assert [json.loads(line)["label"] in LABELS for line in (lines[0], lines[2], lines[4])] == [True] * 3
    source.write_text('{"text": "w1"}\n5\nnull\n["w1"]\n')  # issue 57: the bad lines get error objects, w1 its answer
    assert predict_tool.main(["--model", preset, "--input", str(source), "--output", str(out), "--no-progress",
                              "--overwrite"]) == (4, 3)
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines[0]["label"] in LABELS and lines[1] == {"error": lines[1]["error"]}
    assert lines[1]["error"].endswith("in.jsonl:2: the instance `text` must be a string. Received: 5.")
    from keras_bert_zoo.serving import client

    specs = {"text": __import__("tensorflow").TensorSpec([None], "string", name="text")}
    assert "must be a string. Received: None" in client.row_problem({"text": None}, specs)
    assert "must be a string. Received: ['w1']" in client.row_problem({"text": ["w1"]}, specs)
    source.write_bytes(b'"w1"\n"caf\xe9"\n')
    assert predict_tool.main(["--model", preset, "--input", str(source), "--output", str(out), "--overwrite"]) == (2, 1)
    assert re.search(r"in.jsonl:2 is not valid UTF-8 \(byte 5 of the line", out.read_text().splitlines()[1])
    source.write_text('"w1"\n')
    for output in (str(source), str(tmp_path / "." / "in.jsonl")):
        with pytest.raises(ValueError, match="--output .* is the --input file"):
            predict_tool.main(["--model", preset, "--input", str(source), "--output", output])
    assert source.read_text() == '"w1"\n'


def test_predict_streams_in_chunks_and_replaces_an_existing_output_only_when_asked(preset, tmp_path, monkeypatch,
                                                                                   capsys):
    """R101: an existing --output was overwritten without a word, a failed run left it half written,
    and the whole input (and every answer) was held in memory at once."""
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    texts = [" ".join(["w1"] * (1 + i % 5)) for i in range(11)]
    lines = [json.dumps(t) for t in texts[:4]] + [""] + [json.dumps({"instances": texts[4:6]})]
    lines += [json.dumps({"text": t}) for t in texts[6:]]
    source.write_text("\n".join(lines) + "\n")
    whole = tmp_path / "whole.jsonl"
    predict_tool.main(["--model", preset, "--input", str(source), "--output", str(whole), "--no-progress"])
    monkeypatch.setattr(predict_tool, "CHUNK_LINES", 3)  # 11 lines in 4 chunks: the same answers, in order
    out.write_text("mine\n")
    with pytest.raises(ValueError, match=r"--output .*out.jsonl' exists. Pass --overwrite to replace it"):
        predict_tool.main(["--model", preset, "--input", str(source), "--output", str(out), "--no-progress"])
    assert out.read_text() == "mine\n"
    from keras_bert_zoo.serving import client

    answered, predict_rows = [], client.predict_rows
    monkeypatch.setattr(client, "predict_rows", lambda f, rows, *a: answered.append(len(rows)) or predict_rows(
        f, rows, *a))
    assert predict_tool.main(["--model", preset, "--input", str(source), "--output", str(out), "--no-progress",
                              "--overwrite"]) == (11, 0)
    assert answered == [3, 1, 2, 3, 2]  # chunk by chunk (the request's 2 rows apart), never the whole input
    monkeypatch.setattr(client, "predict_rows", predict_rows)
    assert out.read_text() == whole.read_text() and out.read_text().splitlines()[4] == "null"
    monkeypatch.setattr("sys.stdin", type("In", (), {"buffer": __import__("io").BytesIO(source.read_bytes())})())
    predict_tool.main(["--model", preset, "--input", "-", "--output", "-", "--no-progress"])
    assert capsys.readouterr().out == whole.read_text()
    monkeypatch.setattr("sys.stdin", type("In", (), {"buffer": __import__("io").BytesIO(b'"w1"\nnot json\n')})())
    predict_tool.main(["--model", preset, "--input", "-", "--output", "-", "--no-progress"])
    assert json.loads(capsys.readouterr().out.splitlines()[1])["error"].startswith("-:2 is not JSON")  # not the spool
    # A run that fails while answering (the model, in chunk 2) leaves the existing output as it was, and no
    # partial file.
    monkeypatch.setattr(client, "predict_rows", lambda f, rows, *a: (_ for _ in ()).throw(RuntimeError("the model")))
    with pytest.raises(RuntimeError, match="the model"):
        predict_tool.main(["--model", preset, "--input", str(source), "--output", str(out), "--no-progress",
                           "--overwrite"])
    monkeypatch.setattr(client, "predict_rows", predict_rows)
    assert out.read_text() == whole.read_text() and sorted(os.listdir(tmp_path)) == [
        "in.jsonl", "out.jsonl", "whole.jsonl"]
    with pytest.raises(ValueError, match="the folder .* does not exist"):
        predict_tool.main(["--model", preset, "--input", str(source), "--output", str(tmp_path / "no" / "o.jsonl")])
