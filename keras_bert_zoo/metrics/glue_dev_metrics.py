"""`GlueDevMetrics`: a task's official metrics over the whole dev set after every epoch."""

import logging
import time

import keras
import numpy as np

from keras_bert_zoo.metrics.glue import format_metrics, glue_metrics

logger = logging.getLogger("keras_bert_zoo.metrics")


class GlueDevMetrics(keras.callbacks.Callback):
    """Predicts the whole dev set at the end of each epoch and computes its exact metrics.

    Keras' streaming metrics average per batch, which F1, Matthews and the correlations
    are not; this callback scores all rows at once with `glue_metrics`. The values go
    into the epoch's `logs` (`dev_accuracy`, `dev_f1`, ... so `History`, checkpoints and
    early stopping see them), into `self.history`, and to the log.

    Args:
        task: str. A GLUE task or "swag" (see `keras_bert_zoo.metrics.glue.TASK_METRICS`).
        x: the dev inputs, in any form the model's `predict` takes (raw strings, pairs).
        y: array. The dev labels (STS-B: scores).
        batch_size: int. Batch size of the prediction. Defaults to 32.
        prefix: str. Prefix of the names in `logs` (e.g. "dev_mismatched_"). Defaults to "dev_".
        report: callable `(str) -> None` or None. Also receives the one-line summary
            (e.g. `print` for command-line tools). Defaults to None.

    Examples:
    >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])  # any model, e.g. a BertClassifier
    >>> model.compile(loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    >>> x, y = np.eye(3), np.array([1, 0, 1])
    >>> callback = keras_bert_zoo.metrics.GlueDevMetrics("mrpc", x, y)
    >>> history = model.fit(x, y, epochs=2, callbacks=[callback], verbose=0)
    >>> sorted(history.history), [entry["epoch"] for entry in callback.history]
    (['dev_accuracy', 'dev_f1', 'loss'], [1, 2])
    """

    def __init__(self, task, x, y, batch_size=32, prefix="dev_", report=None):
        super().__init__()
        glue_metrics(task, np.zeros(1), np.zeros(1))  # validates `task` now, not after an epoch
        if y is None:
            raise ValueError("`y` is None: the dev set needs labels (a test file has none).")
        self.task = task
        self.x = x
        self.y = np.asarray(y)
        self.batch_size = batch_size
        self.prefix = prefix
        self.report = report
        self.history = []
        self.predictions = None  # the last epoch's outputs for the dev rows, in their order
        self.seconds = 0.0  # time spent predicting and scoring (to tell training time apart)

    def on_epoch_end(self, epoch, logs=None):
        start = time.perf_counter()
        self.predictions = np.asarray(self.model.predict(self.x, batch_size=self.batch_size, verbose=0))
        metrics = glue_metrics(self.task, self.y, self.predictions)
        self.history.append({"epoch": epoch + 1, **metrics})
        if logs is not None:
            logs.update({self.prefix + name: value for name, value in metrics.items()})
        line = f"epoch {epoch + 1} {self.prefix.rstrip('_')}: {format_metrics(metrics)}"
        logger.info(line)
        if self.report is not None:
            self.report(line)
        self.seconds += time.perf_counter() - start
