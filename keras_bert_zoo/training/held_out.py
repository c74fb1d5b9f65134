"""`HeldOutEvaluation`: a callback that scores a model every N global steps, logs the
record and writes it to TensorBoard; used by any long run (`fit_resumable`, phases)."""

import logging
import time

import keras
import tensorflow as tf
from tensorflow.core.framework import summary_pb2

logger = logging.getLogger("keras_bert_zoo.training")


def format_record(record):
    """One line for a `HeldOutEvaluation` record: step, interval loss, accuracies, seconds."""
    parts = [f"step {record['step']}: loss {record['loss']:.3f}"]
    parts += [f"held-out {key.replace('_accuracy', '').upper()} accuracy {record[key]:.4f}"
              for key in ("mlm_accuracy", "nsp_accuracy") if record.get(key) is not None]
    return ", ".join(parts) + f" ({record['seconds']:.0f}s)"


class HeldOutEvaluation(keras.callbacks.Callback):
    """Every N global steps: an evaluation (held-out MLM/NSP accuracy) and the mean
    training loss of the interval; logged and written to TensorBoard (`held_out/*`).
    Stops training once a time budget is spent; the last step is always evaluated.

    Args:
        evaluate: callable `model -> dict` (e.g. `functools.partial(evaluate_pretraining,
            batches=batches)`), or None: no evaluation, only the time budget.
        every_n_steps: int. Evaluates at global steps divisible by it (and at the end).
        time_budget: float or None. Seconds of training after which this callback stops
            training (after evaluating that step).
        baselines: dict or None. Constant accuracies to compare with (see
            `baseline_accuracies`), written to TensorBoard next to each evaluation.
        log_dir: str or None. TensorBoard directory (events written in it, tags `held_out/*`).
        step: `tf.Variable` (the global step, read live; `fit_resumable` sets it), int
            (the global step when training begins), or None (the optimizer's iterations
            when training begins).
        step_offset: int. Added to the step (steps of earlier training phases).
        progress: callable(record) or None. Called with each record (e.g. to print it).

    Attributes:
        history: list of dicts `step`, `loss`, the evaluation's results, `seconds`.
        stopped_by_budget: bool. Whether the time budget stopped training.
    """

    def __init__(self, evaluate, every_n_steps, time_budget=None, baselines=None, log_dir=None, step=None,
                 step_offset=0, progress=None):
        super().__init__()
        if not isinstance(every_n_steps, int) or every_n_steps < 1:
            raise ValueError(f"`every_n_steps` must be >= 1. Received: every_n_steps={every_n_steps}.")
        self.evaluate, self.every_n_steps, self.time_budget = evaluate, every_n_steps, time_budget
        self.baselines, self.step, self.step_offset, self.progress = dict(baselines or {}), step, step_offset, progress
        self.history, self.stopped_by_budget = [], False
        self._log_dir, self._writer = log_dir, None

    def on_train_begin(self, logs=None):
        self._first = self.step
        if self.step is None:
            self._first = int(self.model.optimizer.iterations.numpy())
        self._start, self._count, self._loss_sum, self._last = time.perf_counter(), 0, 0.0, (0, 0.0)

    def _step(self):
        if isinstance(self._first, int):
            return self._first + self._count + self.step_offset
        return int(self._first.numpy()) + self.step_offset  # a live global-step variable

    def on_train_batch_end(self, batch, logs=None):
        self._count += 1
        # Keras reports the running mean of the epoch; keep the sum to get interval means.
        self._loss_sum = float((logs or {}).get("loss", float("nan"))) * self._count
        over_budget = (self.time_budget is not None
                       and time.perf_counter() - self._start >= self.time_budget)
        if self._step() % self.every_n_steps == 0 or over_budget:
            self._record()
        if over_budget:
            self.stopped_by_budget = self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self._count and (not self.history or self.history[-1]["step"] != self._step()):
            self._record()

    def _record(self):
        if self.evaluate is None:
            return
        count, total = self._last
        record = {"step": self._step(), "loss": (self._loss_sum - total) / max(self._count - count, 1)}
        self._last = (self._count, self._loss_sum)
        record.update(self.evaluate(self.model))
        record["seconds"] = time.perf_counter() - self._start
        self.history.append(record)
        logger.info("held-out %s", format_record(record))
        if self.progress:
            self.progress(record)
        self._write(record)

    def _write(self, record):
        if self._log_dir is None:
            return
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self._log_dir)
        with self._writer.as_default():
            for key, value in {**record, **self.baselines}.items():
                if isinstance(value, float) and key not in ("loss", "seconds"):
                    write_scalar(f"held_out/{key}", value, record["step"])
        self._writer.flush()


def write_scalar(tag, value, step):
    """A TensorBoard scalar through core TF only (`tf.summary.scalar` needs the
    `tensorboard` package installed just to write; viewing the logs still needs it)."""
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    return tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=metadata)
