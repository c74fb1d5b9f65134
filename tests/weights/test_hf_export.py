"""`save_hf_checkpoint`: a span extractor written as HF `BertForQuestionAnswering` gives HF's
logits equal to ours, and loads back into ours unchanged."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.serving.hf_checkpoint import save_hf_checkpoint
from tests.models.test_bert_span_extractor import _data, _preset

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


def test_without_squad_head_is_refused(tmp_path):
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    from tests.weights import weights_testlib as lib

    classifier = BertClassifier.from_preset(lib.fixture_dir("gelu"), num_classes=2, sequence_length=16)
    with pytest.raises(ValueError, match="no SQuAD head.*cls/squad/output_weights"):
        save_hf_checkpoint(classifier, str(tmp_path / "hf"))
    assert not os.path.exists(tmp_path / "hf" / "model.safetensors")
