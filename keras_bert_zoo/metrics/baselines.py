"""Trivial dev baselines, scored with the same metric function as the run's own score.

A dev score means little without what a model that learned nothing scores on the same rows:
on a skewed dev set the majority class reaches a high accuracy, and an all-`O` tagger or an
always-empty SQuAD v2.0 answerer scores what a model stuck at the class prior scores. Each
function returns `{"predicts": what the baseline answers, "dev": {metric: value}}`.
"""

import numpy as np

from keras_bert_zoo.metrics.glue import glue_metrics
from keras_bert_zoo.metrics.squad import squad_v1_metrics, squad_v2_metrics
from keras_bert_zoo.metrics.tagging import entity_scores
from keras_bert_zoo.tasks import task_facts

SQUAD_V2_KEYS = ("exact", "f1", "HasAns_f1", "NoAns_f1")


def glue_baseline(task, y, label_names=None):
    """The majority class of the dev labels for every row (a choice, SWAG: the first ending; a
    regression, STS-B: the dev mean score, whose correlations are undefined, NaN), scored with
    `glue_metrics`.

    Args:
        task: str. A GLUE task or "swag" (a task of `keras_bert_zoo.metrics.glue.TASK_METRICS`).
        y: array (N,). The dev label ids (a regression: scores).
        label_names: list of str or None. Names of the label ids, for `predicts`.
    """
    y = np.asarray(y)
    unit = task_facts(task).unit
    if unit == "score":
        mean = float(y.astype("float64").mean())
        return {"predicts": f"the dev mean score {mean:.4f} for every row (a constant has no correlation)",
                "dev": glue_metrics(task, y, np.full(y.shape, mean))}
    if unit == "choice":
        return {"predicts": "the first ending (choice 0) for every row",
                "dev": glue_metrics(task, y, np.zeros(y.shape, "int64"))}
    ids, counts = np.unique(y.astype("int64"), return_counts=True)
    majority = int(ids[counts.argmax()])
    name = label_names[majority] if label_names else str(majority)
    return {"predicts": f"the dev set's majority class {name!r} ({int(counts.max())} of {len(y)} rows) "
                        "for every row",
            "dev": glue_metrics(task, y, np.full(y.shape, majority))}


def all_o_baseline(tags):
    """`O` for every word (no entities), scored with `entity_scores` (conlleval's counting)."""
    scores = entity_scores(tags, [["O"] * len(sentence) for sentence in tags])
    return {"predicts": "'O' for every word (no entities)",
            "dev": {k: scores[k] for k in ("precision", "recall", "f1")}}


def empty_answer_baseline(gold_answers, version):
    """The empty answer ("no answer") for every question, scored with the official v1.1 or
    v2.0 rules (v1.1: 0; v2.0: the share of unanswerable questions)."""
    predictions = {qid: "" for qid in gold_answers}
    if version == "v1.1":
        return {"predicts": "the empty answer for every question", "dev": squad_v1_metrics(predictions, gold_answers)}
    metrics = squad_v2_metrics(predictions, gold_answers)
    return {"predicts": "no answer for every question",
            "dev": {key: metrics[key] for key in SQUAD_V2_KEYS if key in metrics}}


def prediction_counts(values):
    """`{value: count}` of the dev predictions, the most frequent first (ties in first-seen order)."""
    counts = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))
