"""metrics/'s dev scoring with stand-in tasks: SQuAD's null threshold and official metrics
(`squad_dev`, behind `BertSpanExtractor`'s methods) and the tagger's per-epoch callback."""

import numpy as np
import pytest

from keras_bert_zoo.data.squad import SquadData
from keras_bert_zoo.metrics import squad_dev
from keras_bert_zoo.metrics.tagging_dev_metrics import TaggingDevMetrics


class SpanTask:
    """Best spans fixed per question; `predict` applies the threshold as the decoder does."""

    def __init__(self, texts, score_diff, threshold=None):
        self.best = {"answer_text": np.array(texts, dtype=object), "answer_start": np.arange(len(texts)),
                     "answer_end": np.arange(len(texts)) + 1, "score_diff": np.array(score_diff, "float32")}
        self.null_score_diff_threshold = threshold

    def predict_best_spans(self, x, batch_size=None):
        return dict(self.best)

    def predict(self, x, batch_size=None):
        return squad_dev.with_null_threshold(self, self.predict_best_spans(x))


def _dev():
    return SquadData(["a", "b", "c"], ["q"] * 3, ["ctx"] * 3, [["x"], [], ["z"]], [[0], [], [0]], 0)


def test_with_null_threshold_blanks_answers_above_it():
    task = SpanTask(["x", "y", "z"], [-1.0, 2.0, 0.5])
    assert squad_dev.with_null_threshold(task, task.best) is task.best  # no threshold: always answers
    task.null_score_diff_threshold = 1.0
    answers = squad_dev.with_null_threshold(task, task.best)
    assert answers["answer_text"].tolist() == ["x", "", "z"]
    assert answers["answer_start"].tolist() == [0, -1, 2] and answers["answer_end"].tolist() == [1, -1, 3]


def test_tuned_threshold_is_set_and_scores_as_the_task_answers():
    task, dev = SpanTask(["x", "y", "z"], [-1.0, 2.0, 0.5]), _dev()
    tuned = squad_dev.tune_null_threshold(task, dev)
    assert task.null_score_diff_threshold == tuned["best_f1_thresh"] and tuned["best_f1"] == pytest.approx(100.0)
    predicted, _ = squad_dev.squad_metrics(task, dev, "v2.0")
    reused, predictions = squad_dev.squad_metrics(task, dev, "v2.0", answers=task.predict_best_spans(dev.x))
    assert predicted == reused and predictions == {"a": "x", "b": "", "c": "z"}
    assert reused["f1"] == pytest.approx(100.0)
    answerable = SquadData(["a", "c"], ["q"] * 2, ["ctx"] * 2, [["x"], ["z"]], [[0], [0]], 0)
    v1, _ = squad_dev.squad_metrics(SpanTask(["x", "y"], [0, 0]), answerable)
    assert v1 == {"exact_match": 50.0, "f1": 50.0}
    with pytest.raises(ValueError, match="`version` must be"):
        squad_dev.squad_metrics(task, dev, "v3")


def test_tagging_dev_metrics_scores_every_epoch():
    class Tagger:
        def predict_tags(self, x, batch_size=None):
            return [["B-PER", "O"], ["O", "O"]]

    lines = []
    callback = TaggingDevMetrics(Tagger(), ["Ann runs", "it rains"], [["B-PER", "O"], ["B-LOC", "O"]], 2,
                                 report=lines.append)
    logs = {}
    for epoch in range(2):
        callback.on_epoch_end(epoch, logs)
    assert [h["epoch"] for h in callback.history] == [1, 2] and len(lines) == 2
    assert callback.scores["precision"] == 1.0 and callback.scores["recall"] == 0.5
    assert logs["dev_f1"] == pytest.approx(2 / 3) and callback.seconds >= callback.predict_seconds
