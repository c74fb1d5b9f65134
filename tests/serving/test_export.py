"""`export(task, path)`: the SavedModel answers raw strings in a process with only TensorFlow and
tensorflow-text, equal to `task.predict` (R16); bad rows get defined answers; a failed export
leaves the previous one intact (R5)."""

import base64
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

# The module (the package's `keras_bert_zoo.serving.export` attribute is the function).
export_lib = importlib.import_module("keras_bert_zoo.serving.export")
from tests.models.test_bert_classifier import SECONDS, SENTENCES, tiny_classifier

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABELS = ["neg", "neutral", "pos"]
LONG = "w5 w6 " * 180_000  # ~1 MB
BAD_UTF8 = b"w1 \xff\xfe w2 \xc3"

# Runs in a fresh interpreter: only tensorflow and tensorflow_text (which registers its ops).
_CLIENT = r"""
import base64, json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401
from tensorflow.core.protobuf import saved_model_pb2

path, request = sys.argv[1], json.load(open(sys.argv[2]))
loaded = tf.saved_model.load(path)
texts = [base64.b64decode(t) for t in request["texts"]]
out = {"signatures": sorted(loaded.signatures)}
serve = loaded.signatures["serving_default"]
def plain(x):
    return [plain(v) for v in x] if isinstance(x, list) else x.decode() if isinstance(x, bytes) else x
def listed(result):
    return {k: plain(v.numpy().tolist()) for k, v in result.items()}
out["text"] = listed(serve(text=tf.constant(texts)))
out["good_only"] = listed(serve(text=tf.constant(texts[: request["good"]])))
ids = {k: tf.constant(v, tf.int32) for k, v in request["ids"].items()}
out["ids"] = listed(loaded.signatures["ids"](**ids))
examples = [tf.train.Example(features=tf.train.Features(feature={
    "text": tf.train.Feature(bytes_list=tf.train.BytesList(value=[t]))})).SerializeToString() for t in texts]
out["examples"] = listed(loaded.signatures["examples"](inputs=tf.constant(examples + [b""])))
proto = saved_model_pb2.SavedModel()
proto.ParseFromString(open(path + "/saved_model.pb", "rb").read())
graph = proto.meta_graphs[0].graph_def
ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
out["ops"] = sorted(ops)
out["methods"] = {k: v.method_name for k, v in proto.meta_graphs[0].signature_def.items()}
out["vocab"] = open(loaded.vocab_file.asset_path.numpy().decode(), encoding="utf-8").read().split("\n")[:3]
out["modules"] = sorted(m for m in sys.modules if m.startswith("keras_bert_zoo"))
print(json.dumps(out))
"""


_CLI_WITH_TEXT_OPS = (
    "import sys, tensorflow_text; from tensorflow.python.tools import saved_model_cli; "
    "sys.argv[0] = 'saved_model_cli'; saved_model_cli.main()"
)


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    task = tiny_classifier(num_classes=3, labels=LABELS)
    path = str(tmp_path_factory.mktemp("export") / "classifier")
    assert export_lib.export(task, path) == path
    return task, path


@pytest.fixture(scope="module")
def served(exported):
    """What a plain-TensorFlow process gets from every signature, and `saved_model_cli show --all`."""
    task, path = exported
    texts = [s.encode() for s in SENTENCES] + ["".encode(), LONG.encode(), BAD_UTF8]
    ids = {k: v.numpy().tolist() for k, v in task.preprocessor(SENTENCES[:2]).items()}
    request = os.path.join(os.path.dirname(path), "request.json")
    with open(request, "w") as f:
        json.dump({"texts": [base64.b64encode(t).decode() for t in texts], "good": len(SENTENCES), "ids": ids}, f)
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    # Both at once (each mostly imports TensorFlow); outside the repository, so that nothing
    # of keras_bert_zoo is importable by accident.
    runs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                             cwd=os.path.dirname(path))
            for command in ([sys.executable, "-c", _CLIENT, path, request], [cli, "show", "--all", "--dir", path],
                            # TF Serving's way of loading (a TF1 session: restore op, then the signature's
                            # tensors); the CLI registers no tensorflow-text ops, so they are imported first.
                            [sys.executable, "-c", _CLI_WITH_TEXT_OPS, "run", "--dir", path, "--tag_set", "serve",
                             "--signature_def", "serving_default", "--input_exprs", f"text=[{SENTENCES[0]!r}]"])]
    (client, client_err), (shown, shown_err), (ran, ran_err) = (run.communicate(timeout=300) for run in runs)
    for run, err in zip(runs, (client_err, shown_err, ran_err)):
        assert run.returncode == 0, err[-3000:]
    result = json.loads(client.strip().splitlines()[-1])
    result["saved_model_cli"], result["saved_model_cli_run"] = shown, ran
    return result


def _expected(task, texts):
    answers = task.postprocess(task.predict(texts, verbose=0))
    return {k: np.asarray(v) for k, v in answers.items()}


@pytest.fixture(scope="module")
def expected(exported):
    """`task.predict` on the served rows; bad rows as the tokenizer reads them: "" is [CLS] [SEP],
    the 1 MB row is cut to sequence_length, invalid bytes are dropped."""
    return _expected(exported[0], SENTENCES + ["", LONG, "w1  w2 "])


def test_serving_default_equals_predict_in_a_plain_tensorflow_process(served, expected):
    text = served["text"]
    np.testing.assert_allclose(text["probabilities"], expected["probabilities"], atol=1e-5, rtol=0)
    assert text["label_id"] == expected["label_id"].tolist()
    assert text["label"] == [LABELS[i] for i in expected["label_id"]]
    # The bad rows change nothing in the others.
    good = served["good_only"]
    assert good["label"] == text["label"][: len(SENTENCES)]
    np.testing.assert_allclose(good["probabilities"], text["probabilities"][: len(SENTENCES)], atol=1e-6, rtol=0)
    assert served["modules"] == []


def test_ids_and_examples_signatures(exported, served, expected):
    task, _ = exported
    np.testing.assert_allclose(served["ids"]["probabilities"], expected["probabilities"][:2], atol=1e-5, rtol=0)
    assert served["ids"]["label"] == [LABELS[i] for i in expected["label_id"][:2]]
    examples = served["examples"]  # TF Serving's classify: (batch, classes) names and scores
    assert examples["classes"] == [LABELS] * (len(served["text"]["label"]) + 1)
    np.testing.assert_allclose(examples["scores"][:-1], served["text"]["probabilities"], atol=1e-6, rtol=0)
    # An empty serialized Example reads its text as "".
    np.testing.assert_allclose(examples["scores"][-1], served["text"]["probabilities"][len(SENTENCES)], atol=1e-6)
    assert served["signatures"] == ["examples", "ids", "serving_default"]
    assert served["methods"]["examples"] == "tensorflow/serving/classify"
    assert served["methods"]["serving_default"] == "tensorflow/serving/predict"
    assert served["vocab"] == task.preprocessor.tokenizer.get_vocabulary()[:3]


def test_graph_holds_no_python_function(served):
    assert not {"PyFunc", "PyFuncStateless", "EagerPyFunc"} & set(served["ops"])
    assert "FastWordpieceTokenizeWithOffsets" in served["ops"]  # the tokenizer is in the graph


def test_saved_model_cli_lists_the_signatures(served):
    shown = served["saved_model_cli"]
    for line in ("signature_def['serving_default']", "inputs['text'] tensor_info", "outputs['label'] tensor_info",
                 "outputs['probabilities'] tensor_info", "signature_def['ids']", "inputs['token_ids'] tensor_info",
                 "signature_def['examples']", "Method name is: tensorflow/serving/classify"):
        assert line in shown, line
    # A ragged output would be listed as DT_INVALID; only the init op's entry is.
    assert shown.count("DT_INVALID") == 1


def test_saved_model_cli_runs_one_example(served):
    ran = served["saved_model_cli_run"]
    label = served["text"]["label"][0]
    assert "Result for output key label:" in ran and f"[b'{label}']" in ran, ran[-2000:]


def _model_ops(path):
    """Matrix products in the SavedModel's functions: one per dense layer and attention product
    of each copy of the model's graph (post-processing has none)."""
    from tensorflow.core.protobuf import saved_model_pb2

    proto = saved_model_pb2.SavedModel()
    with open(os.path.join(path, "saved_model.pb"), "rb") as f:
        proto.ParseFromString(f.read())
    library = proto.meta_graphs[0].graph_def.library.function
    return sum(node.op in ("MatMul", "BatchMatMulV2", "Einsum") for f in library for node in f.node_def)


def test_signatures_share_one_copy_of_the_model(exported, tmp_path):
    """Every signature calls one traced model function: three signatures hold no more of the
    model's graph than one, and the export traces the model once."""
    task, path = exported
    only_ids = export_lib.export(task, str(tmp_path / "ids"), signatures=["ids"])
    assert _model_ops(path) == _model_ops(only_ids) > 0


def test_pair_regression_has_score_and_regress():
    # The functions `export` saves, run in process (saving and loading are tested above).
    task = tiny_classifier(num_classes=1)
    spec = export_lib.export_tasks.serving_spec(task, ("text_a", "text_b"))
    functions = export_lib.serving_functions(task, spec, ("text", "examples"))
    assert sorted(functions) == ["examples", "serving_default"]
    serve, method = functions["serving_default"]
    assert method == "tensorflow/serving/predict"
    served = serve(text_a=tf.constant(SENTENCES), text_b=tf.constant(SECONDS))
    scores = _expected(task, (SENTENCES, SECONDS))["score"]
    np.testing.assert_allclose(served["score"].numpy(), scores, atol=1e-5, rtol=0)
    example = tf.train.Example(features=tf.train.Features(feature={
        name: tf.train.Feature(bytes_list=tf.train.BytesList(value=[text.encode()]))
        for name, text in (("text_a", SENTENCES[0]), ("text_b", SECONDS[0]))}))
    regress, method = functions["examples"]
    assert method == "tensorflow/serving/regress"
    np.testing.assert_allclose(regress(inputs=tf.constant([example.SerializeToString()]))["outputs"].numpy(),
                               scores[:1], atol=1e-5, rtol=0)


def test_failed_export_leaves_the_previous_one_intact(exported, monkeypatch):
    task, path = exported
    parent = os.path.dirname(path)

    def contents():
        return {os.path.relpath(os.path.join(d, n), path): open(os.path.join(d, n), "rb").read()
                for d, _, names in os.walk(path) for n in names}

    before = contents()

    def failing_save(module, directory, signatures=None):
        with open(os.path.join(directory, "saved_model.pb"), "wb") as f:
            f.write(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(export_lib.tf.saved_model, "save", failing_save)
    for target in (path, os.path.join(parent, "fresh")):
        with pytest.raises(ValueError, match=r"Could not write the SavedModel to .*: disk full\. Nothing was written"):
            export_lib.export(task, target, signatures=("ids",), overwrite=True)
    monkeypatch.undo()
    assert not os.path.exists(os.path.join(parent, "fresh"))
    assert [n for n in os.listdir(parent) if n.startswith((".tmp-", ".old-"))] == []
    # Byte for byte the export the other tests load and check.
    assert contents() == before


def test_bad_arguments_are_named(exported, tmp_path):
    task, _ = exported
    for kwargs, match in ((dict(signatures=("text", "grpc")), "signatures"), (dict(signatures=()), "signatures"),
                          (dict(text_inputs=("a", "b", "c")), "text_inputs")):
        with pytest.raises(ValueError, match=match):
            export_lib.export(task, str(tmp_path / "x"), **kwargs)
    preprocessor, task.preprocessor = task.preprocessor, None
    try:
        with pytest.raises(ValueError, match="preprocessor"):
            export_lib.export(task, str(tmp_path / "x"))
    finally:
        task.preprocessor = preprocessor
    assert not os.path.exists(tmp_path / "x")


def _fake_save(module, directory, signatures=None):
    """Stands in for `tf.saved_model.save`: where an export writes is the question, not what."""
    with open(os.path.join(directory, "saved_model.pb"), "wb") as f:
        f.write(b"new")


def _tree(path):
    return {os.path.relpath(os.path.join(d, n), path): open(os.path.join(d, n), "rb").read()
            for d, _, names in os.walk(path) for n in names}


def test_export_writes_only_its_own_target(exported, tmp_path, monkeypatch):
    """R?: an export into a folder with other content deleted it all; now it writes only its own
    SavedModel: a TF Serving model folder gets a new version, anything else is refused, and an
    earlier export is replaced only with overwrite=True."""
    task, path = exported
    assert export_lib.is_export(path)  # a real export carries its record
    monkeypatch.setattr(export_lib.tf.saved_model, "save", _fake_save)
    model = tmp_path / "model"  # TF Serving's layout: versions 1 and 2, neither ours
    for version in ("1", "2"):
        (model / version / "variables").mkdir(parents=True)
        (model / version / "saved_model.pb").write_bytes(b"v" + version.encode())
    before = _tree(model)
    written = export_lib.export(task, str(model), signatures=("ids",))
    assert written == str(model / "3") and export_lib.is_export(written)
    assert {k: v for k, v in _tree(model).items() if not k.startswith("3/")} == before
    with pytest.raises(ValueError, match=r"model/2 holds files that are not an export .*version=N"):
        export_lib.export(task, str(model), signatures=("ids",), version=2, overwrite=True)
    with pytest.raises(ValueError, match=r"model/3 holds an earlier export. Pass overwrite=True"):
        export_lib.export(task, str(model), signatures=("ids",), version=3)
    assert export_lib.export(task, written, signatures=("ids",), overwrite=True) == written
    assert export_lib.export(task, str(model), signatures=("ids",), version="next") == str(model / "4")
    with pytest.raises(ValueError, match=r"model/3 is itself a SavedModel"):
        export_lib.export(task, written, signatures=("ids",), version=1)
    with pytest.raises(ValueError, match="`version` must be an int >= 0 or 'next'"):
        export_lib.export(task, str(model), signatures=("ids",), version="latest")
    # A user's folder: refused, named, untouched; a version folder may go in it.
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.txt").write_text("mine")
    with pytest.raises(ValueError, match=rf"{notes} holds files that are not an export .*README.txt.*version="):
        export_lib.export(task, str(notes), signatures=("ids",))
    assert export_lib.export(task, str(notes), signatures=("ids",), version="next") == str(notes / "1")
    assert (notes / "README.txt").read_text() == "mine"
    assert sorted(os.listdir(model)) == ["1", "2", "3", "4"] and _tree(model)["1/saved_model.pb"] == b"v1"
