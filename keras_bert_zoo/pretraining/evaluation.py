"""Held-out masked-LM and NSP accuracy during pretraining, against simple baselines."""

import collections

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
        `nsp_accuracy` (None for a model without an NSP head), `predictions` and, with `unigram_id`, `unigram_accuracy`
        and `nsp_majority_accuracy` (the better of always-0 and always-1).
    """
    correct = weight = nsp_correct = nsp_total = 0.0
    has_nsp = True
    for x, y in batches:
        out = model.predict_on_batch(x)
        # Batches may hold numpy arrays or tensors.
        w = np.asarray(y["mlm_weights"], "float64")
        ids, labels = np.asarray(y["mlm_ids"]), np.asarray(y["nsp_labels"]).reshape(-1)
        correct += float((w * (np.asarray(out["mlm_logits"]).argmax(-1) == ids)).sum())
        weight += float(w.sum())
        has_nsp = has_nsp and "nsp_logits" in out
        if has_nsp:
            nsp_correct += float((np.asarray(out["nsp_logits"]).argmax(-1) == labels).sum())
        nsp_total += len(labels)
    result = {
        "mlm_accuracy": correct / max(weight, 1.0),
        "nsp_accuracy": nsp_correct / max(nsp_total, 1.0) if has_nsp else None,
        "predictions": int(weight),
    }
    if unigram_id is not None:
        result.update(baseline_accuracies(batches, unigram_id))
    return result


def baseline_accuracies(batches, unigram_id):
    """What guessing scores on `batches`: always `unigram_id` for every masked position
    (`unigram_accuracy`) and always the more frequent NSP label (`nsp_majority_accuracy`)."""
    weight = unigram = nsp_ones = nsp_total = 0.0
    for _, y in batches:
        w = np.asarray(y["mlm_weights"], "float64")
        labels = np.asarray(y["nsp_labels"]).reshape(-1)
        unigram += float((w * (np.asarray(y["mlm_ids"]) == unigram_id)).sum())
        weight += float(w.sum())
        nsp_ones += float(labels.sum())
        nsp_total += len(labels)
    return {"unigram_accuracy": unigram / max(weight, 1.0),
            "nsp_majority_accuracy": max(nsp_ones, nsp_total - nsp_ones) / max(nsp_total, 1.0)}
