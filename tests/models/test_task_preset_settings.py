"""`Task.save_to_preset` keeps every preprocessor setting; `from_preset` restores it, the caller's value winning."""

import pathlib

import keras
import numpy as np
import pytest

from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from keras_bert_zoo.presets.loading import read_task_config
from keras_bert_zoo.presets.task import preprocessor_settings
from tests.weights import weights_testlib as lib

HF = lib.fixture_dir("gelu")  # vocab w0..w58, hidden 16, 32 positions


def _contexts():
    """Contexts of 12 to 60 words: several windows of 32 tokens with a stride of 8."""
    contexts = [" ".join(f"w{(i * 7 + j) % 50}" for j in range(n)) for i, n in enumerate((12, 40, 60))]
    return ["w1 w2 ?", "w3 w4 w5", "w7 w8"], contexts


def test_span_extractor_preset_keeps_windows_and_decoding(tmp_path):
    task = BertSpanExtractor.from_preset(HF, sequence_length=32, doc_stride=8, max_query_length=6, n_best_size=5,
                                         max_answer_length=4, null_score_diff_threshold=0.25, dropout=0.0)
    assert preprocessor_settings(task.preprocessor) == {"doc_stride": 8, "max_query_length": 6,
                                                         "rules": "original", "sequence_length": 32}
    x = _contexts()
    expected = task.predict(x)
    task.save_to_preset(str(tmp_path / "qa"))
    keras.utils.clear_session()
    restored = BertSpanExtractor.from_preset(str(tmp_path / "qa"))
    assert restored.preprocessor.get_config() == task.preprocessor.get_config()
    assert restored.task_config() == task.task_config() == {
        "n_best_size": 5, "max_answer_length": 4, "null_score_diff_threshold": 0.25, "rules": "original"}
    answers = restored.predict(x)
    assert answers["answer_text"].tolist() == expected["answer_text"].tolist()
    np.testing.assert_allclose(answers["score_diff"], expected["score_diff"], rtol=1e-5)
    # A value given to from_preset wins over the saved one; the others stay saved.
    changed = BertSpanExtractor.from_preset(str(tmp_path / "qa"), doc_stride=10, max_answer_length=3,
                                            load_weights=False)
    assert (changed.preprocessor.doc_stride, changed.preprocessor.max_query_length) == (10, 6)
    assert (changed.max_answer_length, changed.n_best_size, changed.null_score_diff_threshold) == (3, 5, 0.25)


def test_classifier_and_token_classifier_presets_keep_their_preprocessor_settings(tmp_path):
    classifier = BertClassifier.from_preset(HF, num_classes=2, sequence_length=16, truncate="round_robin")
    assert preprocessor_settings(classifier.preprocessor) == {"sequence_length": 16, "truncate": "round_robin"}
    classifier.save_to_preset(str(tmp_path / "clf"))
    restored = BertClassifier.from_preset(str(tmp_path / "clf"), load_weights=False)
    assert (restored.preprocessor.sequence_length, restored.preprocessor.truncate) == (16, "round_robin")

    tagger = BertTokenClassifier.from_preset(HF, num_classes=3, sequence_length=16, window_stride=4)
    assert tagger.preprocessor.window_stride == 4
    tagger.save_to_preset(str(tmp_path / "ner"))
    restored = BertTokenClassifier.from_preset(str(tmp_path / "ner"), load_weights=False)
    assert (restored.preprocessor.sequence_length, restored.preprocessor.window_stride) == (16, 4)


def test_save_to_preset_keeps_the_tasks_settings(tmp_path):
    """`task.save_to_preset(d)` writes the task's settings (labels, sequence length, casing), which a
    task built from the folder reads back."""
    classifier = BertClassifier.from_preset(HF, num_classes=2, labels=["neg", "pos"], sequence_length=16)
    directory = classifier.save_to_preset(str(tmp_path / "method"))
    saved = read_task_config(directory)
    assert saved["task"]["class_name"] == "BertClassifier" and saved["task"]["config"]["labels"] == ["neg", "pos"]
    assert saved["preprocessor"]["sequence_length"] == 16 and isinstance(saved["lowercase"], bool)
    restored = BertClassifier.from_preset(directory, load_weights=False)
    assert restored.labels == ["neg", "pos"] and restored.preprocessor.sequence_length == 16


def test_a_task_writes_the_vocabulary_it_is_given(tmp_path):
    classifier = BertClassifier.from_preset(HF, num_classes=2, sequence_length=16)
    classifier.preprocessor = None
    directory = classifier.save_to_preset(str(tmp_path / "bare"), vocabulary=["[PAD]", "[UNK]"])
    assert (pathlib.Path(directory) / "vocab.txt").read_text() == "[PAD]\n[UNK]\n"
    assert "preprocessor" not in read_task_config(directory)
