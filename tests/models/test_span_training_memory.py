"""Span extraction trains on steps of `batch_size` windows: a step's memory is bounded by the batch size,
not by how many windows some questions' passages make (`keras_bert_zoo/models/window_batches.py`)."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from tests.models.test_bert_span_extractor import _data, _preset


class StepShapes(BertSpanExtractor):
    """Records the windows of every training step (run eagerly, so the shapes are the batches')."""

    def train_step(self, data):
        self.__dict__.setdefault("step_windows", []).append(int(data[0]["token_ids"].shape[0]))
        return super().train_step(data)


def _task(tmp_path):
    task = StepShapes.from_preset(_preset(tmp_path), sequence_length=32, doc_stride=8, max_query_length=6,
                                  dropout=0.0)
    task.compile(run_eagerly=True)
    return task


def test_fit_steps_hold_batch_size_windows_whatever_the_passages(tmp_path):
    questions, contexts, spans = _data()
    # Long passages: each question makes several windows (the 60-word one most).
    questions, contexts, spans = questions * 3, contexts * 3, np.concatenate([spans] * 3)
    task = _task(tmp_path)
    windows = task.preprocessor.windows(questions, contexts)["example_index"].shape[0]
    assert windows > 2 * len(questions)  # several windows per question
    keras.utils.set_random_seed(0)
    task.fit((questions, contexts), spans, batch_size=4, epochs=2, verbose=0)
    # Before: a step took every window of 4 questions (up to a dozen here, 112 on Quoref).
    assert max(task.step_windows) == 4
    assert len(task.step_windows) == 2 * -(-windows // 4)  # every window once per epoch
    assert sorted(task.step_windows)[: 2] == [windows % 4 or 4] * 2  # the epochs' last steps


def test_evaluate_batches_windows_and_length_buckets_are_refused(tmp_path):
    questions, contexts, spans = _data()
    task = _task(tmp_path)
    x, (starts, ends) = task.preprocessor((questions, contexts), spans)
    whole = task.evaluate(x, (starts, ends), batch_size=len(starts), verbose=0, return_dict=True)["loss"]
    raw = task.evaluate((questions, contexts), spans, batch_size=3, verbose=0, return_dict=True)["loss"]
    np.testing.assert_allclose(raw, whole, rtol=1e-5)  # the mean over windows, whatever the batches
    with pytest.raises(ValueError, match="length_buckets"):
        task.fit((questions, contexts), spans, batch_size=2, length_buckets=4, verbose=0)
