"""Held-out masked-LM and NSP accuracy during pretraining, against simple baselines."""

import collections
import time

import keras
import numpy as np


def collect_batches(dataset, num_batches):
    """Materializes `num_batches` `(x, y)` batches of a dataset as numpy (a fixed eval set).

    Raises:
        ValueError: `num_batches` < 1 or the dataset yields no batch.
    """
    if num_batches < 1:
        raise ValueError(f"`num_batches` must be >= 1. Received: num_batches={num_batches}.")
    batches = [keras.tree.map_structure(np.asarray, b) for b in dataset.take(num_batches)]
    if not batches:
        raise ValueError("The dataset yielded no batch: is the held-out text empty or too short?")
    return batches


def unigram_counts(batches):
    """Counts the masked-LM targets (weighted by `mlm_weights`) of `(x, y)` batches."""
    counts = collections.Counter()
    for _, y in batches:
        ids = y["mlm_ids"][y["mlm_weights"] > 0]
        counts.update(ids.tolist())
    return counts


def evaluate_pretraining(model, batches, unigram_id=None):
    """MLM and NSP accuracy of a pretrainer on fixed `(x, y)` batches.

    Args:
        model: a model whose outputs are a dict with `mlm_logits` (b, P, V) and
            `nsp_logits` (b, 2), e.g. `BertPretrainer`.
        batches: list of numpy `(x, y)` batches in the pretraining batch contract.
        unigram_id: int or None. If given, also the accuracy of always predicting it
            (the unigram baseline, with the most frequent training target).

    Returns:
        dict with `mlm_accuracy` (over real predictions, Σ mlm_weights),
        `nsp_accuracy`, `predictions` and, with `unigram_id`, `unigram_accuracy`
        and `nsp_majority_accuracy` (the better of always-0 and always-1).
    """
    correct = weight = nsp_correct = nsp_total = unigram = nsp_ones = 0.0
    for x, y in batches:
        out = model.predict_on_batch(x)
        # Batches may hold numpy arrays or tensors.
        w = np.asarray(y["mlm_weights"], "float64")
        ids, labels = np.asarray(y["mlm_ids"]), np.asarray(y["nsp_labels"]).reshape(-1)
        correct += float((w * (np.asarray(out["mlm_logits"]).argmax(-1) == ids)).sum())
        unigram += float((w * (ids == unigram_id)).sum())
        weight += float(w.sum())
        if "nsp_logits" in out:
            nsp_correct += float((np.asarray(out["nsp_logits"]).argmax(-1) == labels).sum())
        nsp_total += len(labels)
        nsp_ones += float(labels.sum())
    result = {
        "mlm_accuracy": correct / max(weight, 1.0),
        "nsp_accuracy": nsp_correct / max(nsp_total, 1.0),
        "predictions": int(weight),
    }
    if unigram_id is not None:
        result["unigram_accuracy"] = unigram / max(weight, 1.0)
        result["nsp_majority_accuracy"] = max(nsp_ones, nsp_total - nsp_ones) / max(nsp_total, 1.0)
    return result


class HeldoutEvaluation(keras.callbacks.Callback):
    """Every N steps: held-out MLM/NSP accuracy and the mean training loss of the
    interval, logged to TensorBoard; stops training once a time budget is spent.

    Args:
        batches: numpy `(x, y)` held-out batches (see `collect_batches`).
        every_n_steps: int. Steps between evaluations; the last step is always evaluated.
        log_dir: str or None. TensorBoard directory for `train/loss` and `heldout/*`.
        time_budget: float or None. Seconds of training after which training stops
            (at the next evaluation, so the last point is always measured).
        progress: optional callable(dict) called with each record.
        first_step: int or None. Global step at which this `fit` starts; None reads the
            optimizer's `iterations` when training begins (right after a resume).

    Attributes:
        history: list of dicts `step`, `loss`, `mlm_accuracy`, `nsp_accuracy`, `seconds`.
    """

    def __init__(self, batches, every_n_steps, log_dir=None, time_budget=None, progress=None,
                 first_step=None):
        super().__init__()
        if every_n_steps < 1:
            raise ValueError(f"`every_n_steps` must be >= 1. Received: every_n_steps={every_n_steps}.")
        self.batches, self.every_n_steps, self.first_step = batches, every_n_steps, first_step
        self.time_budget, self.progress, self.history = time_budget, progress, []
        import tensorflow as tf

        self._writer = tf.summary.create_file_writer(log_dir) if log_dir else None

    def on_train_begin(self, logs=None):
        if self.first_step is None:
            self.first_step = int(self.model.optimizer.iterations.numpy())
        self._start, self._count = time.perf_counter(), 0
        self._loss_sum, self._last = 0.0, (0, 0.0)

    def on_train_batch_end(self, batch, logs=None):
        self._count += 1
        # Keras reports the running mean of the epoch; keep the sum to get interval means.
        self._loss_sum = float((logs or {}).get("loss", float("nan"))) * self._count
        over_budget = (self.time_budget is not None
                       and time.perf_counter() - self._start >= self.time_budget)
        if self._count % self.every_n_steps == 0 or over_budget:
            self._evaluate()
            if over_budget:
                self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self._count and (not self.history or self.history[-1]["step"] != self._step()):
            self._evaluate()

    def _step(self):
        return self.first_step + self._count

    def _evaluate(self):
        count, total = self._last
        record = {"step": self._step(),
                  "loss": (self._loss_sum - total) / max(self._count - count, 1)}
        self._last = (self._count, self._loss_sum)
        record.update(evaluate_pretraining(self.model, self.batches))
        record["seconds"] = time.perf_counter() - self._start
        self.history.append(record)
        self._log(record)
        if self.progress:
            self.progress(record)

    def _log(self, record):
        if self._writer is None:
            return
        with self._writer.as_default(step=record["step"]):
            write_scalar("train/loss", record["loss"], record["step"])
            write_scalar("heldout/mlm_accuracy", record["mlm_accuracy"], record["step"])
            write_scalar("heldout/nsp_accuracy", record["nsp_accuracy"], record["step"])
        self._writer.flush()


def write_scalar(tag, value, step):
    """A TensorBoard scalar through core TF only (`tf.summary.scalar` needs the
    `tensorboard` package installed just to write; viewing the logs still needs it)."""
    import tensorflow as tf
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))
    return tf.summary.write(tag, tf.constant(value, tf.float32), step=step, metadata=metadata)
