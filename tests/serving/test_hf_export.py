"""`save_hf_checkpoint`: each task written as its transformers class (`BertForQuestionAnswering`,
`…SequenceClassification` with id2label and problem_type, `…TokenClassification`, `…MultipleChoice`,
`BertModel`) gives HF's logits equal to ours (1e-4) through `AutoModelFor…`, and loads back into ours
unchanged with its names; a model with no HF class is refused."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.serving.hf_checkpoint import save_hf_checkpoint
from tests.models.test_bert_span_extractor import _data, _preset
from tests.presets.conftest import _isolated_cache  # noqa: F401  (autouse: an empty cache, as in tests/presets/)

QUESTIONS, CONTEXTS, _ = _data()


def _task(tmp_path):
    """The tiny HF fixture with a random SQuAD head, through our preset (pooler kept there)."""
    task = BertSpanExtractor.from_preset(_preset(tmp_path), sequence_length=32, dropout=0.0)
    task.save_to_preset(str(tmp_path / "ours"))
    return task


def _logits(task, windows):
    start, end = task._window_logits(windows)
    return np.asarray(start), np.asarray(end)


@pytest.mark.parametrize("source", ["task", "preset"])
def test_hf_question_answering_matches_ours_and_round_trips(tmp_path, source):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    task = _task(tmp_path)
    out = str(tmp_path / "hf_qa")
    dropped = save_hf_checkpoint(task if source == "task" else str(tmp_path / "ours"), out)
    assert dropped == ["bert/pooler/dense/bias", "bert/pooler/dense/kernel"]
    config = json.load(open(os.path.join(out, "config.json")))
    assert config["architectures"] == ["BertForQuestionAnswering"]
    assert json.load(open(os.path.join(out, "tokenizer_config.json")))["do_lower_case"] is True

    windows = {k: np.asarray(v) for k, v in task.preprocessor.windows(QUESTIONS, CONTEXTS).items()}
    start, end = _logits(task, windows)
    hf, info = transformers.BertForQuestionAnswering.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        got = hf.eval()(input_ids=torch.tensor(windows["token_ids"], dtype=torch.long),
                        token_type_ids=torch.tensor(windows["segment_ids"], dtype=torch.long),
                        attention_mask=torch.tensor(windows["padding_mask"], dtype=torch.long))
    np.testing.assert_allclose(got.start_logits.numpy(), start, atol=1e-4)
    np.testing.assert_allclose(got.end_logits.numpy(), end, atol=1e-4)
    # HF's vocabulary and casing: its tokenizer gives our token ids on the first window.
    tokenizer = transformers.BertTokenizer.from_pretrained(out)
    ids = tokenizer(QUESTIONS[0], CONTEXTS[0], truncation="only_second", max_length=32)["input_ids"]
    np.testing.assert_array_equal(ids, windows["token_ids"][0][: len(ids)])

    back = BertSpanExtractor.from_preset(out, sequence_length=32, dropout=0.0)
    for a, b in (zip(_logits(back, windows), (start, end))):
        np.testing.assert_allclose(a, b, atol=1e-5)
    np.testing.assert_array_equal(back.span_dense.kernel.numpy(), task.span_dense.kernel.numpy())
    assert list(back.predict((QUESTIONS, CONTEXTS))["answer_text"]) == list(task.predict((QUESTIONS, CONTEXTS))["answer_text"])


def test_a_model_without_an_hf_class_is_refused(tmp_path):
    from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor

    from tests.weights import weights_testlib as lib

    task = BertFeatureExtractor.from_preset(lib.fixture_dir("gelu"), labels=["O", "B-X", "I-X"], sequence_length=16)
    with pytest.raises(ValueError, match=r"BertFeatureExtractor has no HF transformers class: save_hf_checkpoint "
                                         r"writes BertBackbone \(BertModel\)"):
        save_hf_checkpoint(task, str(tmp_path / "hf"))
    assert not os.path.exists(tmp_path / "hf" / "model.safetensors")


def _hf_run(model, ids):
    torch = pytest.importorskip("torch")
    with torch.no_grad():
        return model.eval()(**{hf: torch.tensor(np.asarray(ids[ours]), dtype=torch.long) for ours, hf in (
            ("token_ids", "input_ids"), ("segment_ids", "token_type_ids"), ("padding_mask", "attention_mask"))})


@pytest.mark.parametrize("kind", ["classifier", "regression", "tokens", "choice", "backbone"])
def test_each_task_is_written_as_its_transformers_class(tmp_path, kind):
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from keras_bert_zoo import BertBackbone, BertClassifier, BertMultipleChoice, BertTokenClassifier

    from tests.weights import weights_testlib as lib

    fixture, out = lib.fixture_dir("gelu"), str(tmp_path / "hf")
    sentences = ["w1 w2 w3 w4", "w5 w6", "w7 w8 w9 w10 w11 w12"]
    if kind in ("classifier", "regression"):
        labels = ["neg", "pos", "mixed"] if kind == "classifier" else None
        task = BertClassifier.from_preset(fixture, num_classes=3 if labels else 1, labels=labels, dropout=0.0,
                                          sequence_length=16)
        ids, auto = task.preprocessor(sentences), transformers.AutoModelForSequenceClassification
    elif kind == "tokens":
        labels = ["O", "B-PER", "I-PER"]
        task = BertTokenClassifier.from_preset(fixture, labels=labels, dropout=0.0, sequence_length=16)
        ids, auto = task.preprocessor.windows(sentences), transformers.AutoModelForTokenClassification
    elif kind == "choice":
        task = BertMultipleChoice.from_preset(fixture, num_choices=2, dropout=0.0, sequence_length=16)
        pairs = (sentences[:2], [["w20 w21", "w22"], ["w23", "w24 w25"]])
        ids, auto = task.preprocessor(pairs), transformers.AutoModelForMultipleChoice
    else:
        task = BertBackbone.from_preset(fixture, dropout=0.0)
        ids, auto = lib.inputs_of(lib.expected("gelu")), transformers.AutoModel
    # A head that says something: bigger than its 0.02 initialisation.
    head = getattr(task, "output_dense", None)
    if head is not None:
        head.kernel.assign(np.random.default_rng(0).normal(0, 0.5, head.kernel.shape))
        head.bias.assign(np.linspace(-1, 1, head.bias.shape[0]))
    ids = {k: np.asarray(ids[k]) for k in ("token_ids", "segment_ids", "padding_mask")}
    ours = task(ids)
    dropped = save_hf_checkpoint(task, out, vocabulary=os.path.join(fixture, "vocab.txt") if kind == "backbone" else None)
    hf, info = auto.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    got = _hf_run(hf, ids)
    if kind == "backbone":
        assert dropped == []
        np.testing.assert_allclose(got.last_hidden_state.numpy(), ours["sequence_output"], atol=1e-4)
        np.testing.assert_allclose(got.pooler_output.numpy(), ours["pooled_output"], atol=1e-4)
        return
    mask = ids["padding_mask"].astype(bool) if kind == "tokens" else slice(None)
    np.testing.assert_allclose(got.logits.numpy()[mask], np.asarray(ours)[mask], atol=1e-4)
    assert dropped == (["bert/pooler/dense/bias", "bert/pooler/dense/kernel"] if kind == "tokens" else [])
    config = json.load(open(os.path.join(out, "config.json")))
    if kind in ("classifier", "tokens"):
        assert hf.config.id2label == dict(enumerate(labels)) and config["label2id"] == {l: i for i, l in enumerate(labels)}
    if kind == "regression":
        assert hf.config.problem_type == "regression" and hf.config.num_labels == 1
    # And back: the same task, names and logits.
    back = type(task).from_preset(out, dropout=0.0, sequence_length=16, **({"num_choices": 2} if kind == "choice" else {}))
    np.testing.assert_allclose(np.asarray(back(ids))[mask], np.asarray(ours)[mask], atol=1e-5)
    if kind in ("classifier", "tokens"):
        assert back.labels == labels
