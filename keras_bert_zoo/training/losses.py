"""The pretraining losses of the original BERT (`run_pretraining.py`), in float32."""

from keras import ops


def weighted_cross_entropy(labels, logits, weights):
    """Cross-entropy summed with `weights` and divided by `Σ weights + 1e-5`.

    This is the original's masked-LM loss: padding predictions (weight 0) count
    neither in the numerator nor in the denominator.

    Args:
        labels: int tensor `(batch, predictions)`.
        logits: float tensor `(batch, predictions, vocabulary_size)`.
        weights: float tensor `(batch, predictions)`, 1.0 for real predictions.

    Returns:
        A float32 scalar.
    """
    logits = ops.cast(logits, "float32")
    weights = ops.cast(weights, "float32")
    per_prediction = ops.sparse_categorical_crossentropy(
        ops.cast(labels, "int32"), logits, from_logits=True
    )  # (batch, predictions)
    numerator = ops.sum(per_prediction * weights)
    return numerator / (ops.sum(weights) + 1e-5)


def mean_cross_entropy(labels, logits):
    """Mean cross-entropy over the batch (the original's next-sentence loss).

    Args:
        labels: int tensor `(batch,)`.
        logits: float tensor `(batch, classes)`.

    Returns:
        A float32 scalar.
    """
    logits = ops.cast(logits, "float32")
    labels = ops.reshape(ops.cast(labels, "int32"), (-1,))  # (batch,)
    return ops.mean(ops.sparse_categorical_crossentropy(labels, logits, from_logits=True))
