"""`TaggingDevMetrics`: a tagger's entity-level dev scores (conlleval's counting) after every epoch."""

import logging
import time

import keras

from keras_bert_zoo.metrics.tagging import entity_scores

logger = logging.getLogger("keras_bert_zoo.training")


class TaggingDevMetrics(keras.callbacks.Callback):
    """Tags the whole dev set after each epoch and scores entities as conlleval does.

    Args:
        task: the `BertTokenClassifier` (or `BertFeatureExtractor`) being trained; read
            directly, as the feature-based path fits its inner tagger. Anything with
            `predict_tags(x, batch_size=...)`.
        x: dev sentences (words joined by spaces).
        tags: gold IOB2 tags, one list per sentence.
        batch_size: int. Prediction batch size.
        report: callable `(str) -> None` or None, also given the one-line summary.
    """

    def __init__(self, task, x, tags, batch_size, report=None):
        super().__init__()
        self.task, self.x, self.tags, self.batch_size, self.report = task, x, tags, batch_size, report
        self.history, self.predictions, self.scores = [], None, None
        self.seconds = self.predict_seconds = 0.0

    def on_epoch_end(self, epoch, logs=None):
        start = time.perf_counter()
        self.predictions = self.task.predict_tags(self.x, batch_size=self.batch_size)
        self.predict_seconds = time.perf_counter() - start
        self.scores = entity_scores(self.tags, self.predictions)
        entry = {"epoch": epoch + 1, **{k: self.scores[k] for k in ("precision", "recall", "f1")}}
        self.history.append(entry)
        if logs is not None:
            logs.update({f"dev_{k}": v for k, v in entry.items() if k != "epoch"})
        line = (f"epoch {epoch + 1}: dev entity precision {entry['precision']:.4f} recall {entry['recall']:.4f} "
                f"F1 {entry['f1']:.4f}")
        logger.info(line)
        if self.report is not None:
            self.report(line)
        self.seconds += time.perf_counter() - start
