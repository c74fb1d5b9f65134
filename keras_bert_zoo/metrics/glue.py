"""GLUE's official metrics (and SWAG's accuracy) over a whole dev set.

Computed with scikit-learn and scipy, as GLUE's own evaluation does: accuracy; F1 of
the positive class (MRPC, QQP); Matthews correlation (CoLA); Pearson and Spearman
correlation (STS-B). MNLI's matched and mismatched dev sets are two calls (two files).
"""

import math

import numpy as np

from keras_bert_zoo.tasks import TASKS, task_facts

METRIC_NAMES = ("accuracy", "f1", "matthews_corrcoef", "pearson", "spearman")
# The tasks scored here: every row of the task table whose metrics are all among these.
TASK_METRICS = {task.name: task.metrics for task in TASKS if set(task.metrics) <= set(METRIC_NAMES)}


def glue_metrics(task, y_true, y_pred):
    """The official metrics of a task, computed over all rows at once.

    Args:
        task: str. A GLUE task (`"cola"`, ..., `"wnli"`) or `"swag"`.
        y_true: array of shape (N,). Label ids (a regression, STS-B: gold scores).
        y_pred: array. Predicted label ids (N,), or scores/logits (N, num_classes) whose
            argmax is taken; a regression: predicted scores (N,) or (N, 1).

    Returns:
        dict: metric name (see `TASK_METRICS`; names among `METRIC_NAMES`) -> float.
        A correlation of a constant prediction is undefined: NaN.

    Examples:
    >>> keras_bert_zoo.metrics.glue_metrics("mrpc", [1, 0, 1, 1], [1, 0, 0, 1])
    {'accuracy': 0.75, 'f1': 0.8}
    """
    if task not in TASK_METRICS:
        raise ValueError(f"Unknown task. Received: task={task!r}. Use one of {tuple(TASK_METRICS)}.")
    y_true = np.asarray(y_true)
    y_pred = np.asarray(y_pred)
    if task_facts(task).unit == "score":
        y_true, y_pred = y_true.astype("float64").reshape(-1), y_pred.astype("float64").reshape(-1)
    else:
        y_true = y_true.reshape(-1)
        y_pred = y_pred.argmax(-1) if y_pred.ndim == 2 else y_pred.reshape(-1)
    if y_true.shape != y_pred.shape or y_true.size == 0:
        raise ValueError(
            f"`y_true` and `y_pred` must hold the same non-zero number of rows. Received: "
            f"y_true of shape {y_true.shape}, y_pred of shape {np.asarray(y_pred).shape} (after argmax)."
        )
    return {name: _METRICS[name](y_true, y_pred) for name in TASK_METRICS[task]}


def format_metrics(metrics):
    """`"accuracy=0.8123 f1=0.8671"`: one line for logs and progress output."""
    return " ".join(f"{name}={value:.4f}" for name, value in metrics.items())


def _accuracy(y_true, y_pred):
    return float(np.mean(y_true == y_pred))


def _f1(y_true, y_pred):
    from sklearn.metrics import f1_score  # lazy: scikit-learn only when a metric is computed (start-up time)

    return float(f1_score(y_true, y_pred, pos_label=1, average="binary", zero_division=0.0))


def _matthews(y_true, y_pred):
    from sklearn.metrics import matthews_corrcoef  # lazy: scikit-learn only when scored (start-up time)

    return float(matthews_corrcoef(y_true, y_pred))


def _correlation(name):
    def compute(y_true, y_pred):
        # scipy returns NaN (with a warning) for a constant input; say so without the warning.
        if np.all(y_true == y_true[0]) or np.all(y_pred == y_pred[0]):
            return math.nan
        from scipy import stats  # lazy: scipy only when a correlation is scored (start-up time)

        return float(getattr(stats, name)(y_true, y_pred)[0])

    return compute


_METRICS = {
    "accuracy": _accuracy,
    "f1": _f1,
    "matthews_corrcoef": _matthews,
    "pearson": _correlation("pearsonr"),
    "spearman": _correlation("spearmanr"),
}
