"""`export` of a `BertFeatureExtractor`: in a process with only tensorflow and tensorflow-text,
`serving_default` gives the backbone's `pooled_output` and `sequence_output` (first window,
padded, with `num_tokens`) and the tagger's entities, equal to the Python model's."""

import base64
import importlib
import json
import os
import subprocess
import sys

import numpy as np
import tensorflow as tf

from tests.models.test_bert_feature_extractor import _extractor

export_lib = importlib.import_module("keras_bert_zoo.serving.export")

# Runs in a fresh interpreter outside the repository: only tensorflow and tensorflow_text.
_CLIENT = r"""
import base64, json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401

path, request = sys.argv[1], json.load(open(sys.argv[2]))
loaded = tf.saved_model.load(path)
def listed(result):
    def plain(x):
        return [plain(v) for v in x] if isinstance(x, list) else x.decode() if isinstance(x, bytes) else x
    return {k: plain(v.numpy().tolist()) for k, v in result.items()}
texts = tf.constant([base64.b64decode(t) for t in request["texts"]])
out = {"text": listed(loaded.signatures["serving_default"](text=texts)),
       "ids": listed(loaded.signatures["ids"](**{k: tf.constant(v, tf.int32) for k, v in request["ids"].items()})),
       "modules": sorted(m for m in sys.modules if m.startswith("keras_bert_zoo"))}
print(json.dumps(out))
"""

TEXTS = ["bob visited paris .", "u.s. bob germans paris the cafe eu ann", "",
         "the cafe in rome . bob met ann in paris . the german call . bob visited rome ."]


def _served(task, tmp_path, texts, ids):
    path = export_lib.export(task, str(tmp_path / "features"), signatures=("text", "ids"))
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"texts": [base64.b64encode(t).decode() for t in texts],
                                   "ids": {k: np.asarray(v).tolist() for k, v in ids.items()}}))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="")
    run = subprocess.run([sys.executable, "-c", _CLIENT, path, str(request)], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_features_and_entities_in_a_plain_tensorflow_process(tmp_path):
    extractor = _extractor()
    dense = extractor.output_dense
    dense.kernel.assign(np.random.default_rng(1).normal(size=dense.kernel.shape).astype("float32") * 5)
    texts = [t.encode() for t in TEXTS] + [b"bob \xff\xfe visited \xc3"]  # invalid UTF-8 bytes are dropped
    cleaned = [t.decode("utf-8", "ignore") for t in texts]
    windows = {k: np.asarray(v) for k, v in extractor.preprocessor.windows(cleaned).items()}
    _, first = np.unique(windows["example"], return_index=True)  # each text's first window
    assert len(windows["example"]) > len(texts)  # the long text has more than one window
    packed = {k: windows[k][first] for k in ("token_ids", "segment_ids", "padding_mask")}
    backbone = {k: np.asarray(v) for k, v in extractor.backbone(packed, training=False).items()
                if k != "encoder_outputs"}
    served = _served(extractor, tmp_path, texts, {k: v[:2] for k, v in packed.items()})
    assert served["modules"] == []
    text = {k: np.asarray(v) for k, v in served["text"].items()}
    num_tokens = packed["padding_mask"].sum(-1)
    assert text["num_tokens"].tolist() == num_tokens.tolist()
    assert num_tokens.tolist()[2:4] == [2, 16]  # "" is [CLS] [SEP]; the long text is cut to one window
    tokenizer = extractor.preprocessor.tokenizer
    long_pieces = np.asarray(tokenizer.tokenize(TEXTS[3])).tolist()
    assert packed["token_ids"][3].tolist() == [tokenizer.cls_token_id] + long_pieces[:14] + [tokenizer.sep_token_id]
    width = num_tokens.max()
    assert text["sequence_output"].shape == (len(texts), width, 8)
    assert text["padding_mask"].tolist() == packed["padding_mask"][:, :width].tolist()
    np.testing.assert_allclose(text["pooled_output"], backbone["pooled_output"], atol=1e-5, rtol=0)
    keep = packed["padding_mask"][:, :width, None].astype(bool)
    np.testing.assert_allclose(text["sequence_output"], np.where(keep, backbone["sequence_output"][:, :width], 0),
                               atol=1e-5, rtol=0)
    # The entities over every window, as predict_entities.
    expected = extractor.predict_entities(cleaned)
    assert sum(map(len, expected)) > 3
    assert text["num_entities"].tolist() == [len(e) for e in expected]
    for i, entities in enumerate(expected):
        got = [{"type": text["entity_type"][i, j], "text": text["entity_text"][i, j],
                "start": int(text["start_char"][i, j]), "end": int(text["end_char"][i, j])}
               for j in range(len(entities))]
        assert got == entities
    # `ids`: per packed row, the features and the tagger's probabilities.
    ids = {k: np.asarray(v) for k, v in served["ids"].items()}
    np.testing.assert_allclose(ids["pooled_output"], backbone["pooled_output"][:2], atol=1e-5, rtol=0)
    probabilities = extractor.postprocess(extractor.predict({k: v[:2] for k, v in packed.items()}, verbose=0))
    np.testing.assert_allclose(ids["probabilities"], probabilities["probabilities"], atol=1e-5, rtol=0)
    assert ids["num_tokens"].tolist() == num_tokens[:2].tolist()


def test_served_features_cut_to_the_request(tmp_path):
    """A request of short texts pads to its own longest row, and the values do not change."""
    extractor = _extractor()
    spec = export_lib.export_tasks.serving_spec(extractor)
    serve, _ = export_lib.serving_functions(extractor, spec, ("text",))["serving_default"]
    both = serve(text=tf.constant(TEXTS[:2]))
    alone = serve(text=tf.constant(TEXTS[:1]))
    assert alone["sequence_output"].shape[1] == alone["num_tokens"].numpy()[0] == 6  # [CLS] 4 pieces [SEP]
    np.testing.assert_allclose(alone["sequence_output"].numpy()[0], both["sequence_output"].numpy()[0, :6],
                               atol=1e-6)
    np.testing.assert_allclose(alone["pooled_output"].numpy(), both["pooled_output"].numpy()[:1], atol=1e-6)
