"""SQuAD dev scoring of a span extractor: the null threshold tuned on dev, the official metrics.

The implementation of `BertSpanExtractor.with_null_threshold`, `.tune_null_threshold` and
`.squad_metrics` (which delegate here). `task` is any span extractor with `predict(x,
batch_size=...)`, `predict_best_spans(x, batch_size=...)` and a `null_score_diff_threshold`
attribute (metrics/ sits below models/, so the task comes in as an argument).
"""

import numpy as np

from keras_bert_zoo.metrics.squad import best_threshold, raw_scores, squad_v1_metrics, squad_v2_metrics


def with_null_threshold(task, answers):
    """`predict_best_spans` answers -> `task`'s answers: "" (span -1) where the score
    difference exceeds `task.null_score_diff_threshold`, as `SpanDecoder` decides."""
    if task.null_score_diff_threshold is None:
        return answers
    dropped = np.asarray(answers["score_diff"]) > task.null_score_diff_threshold
    answers = dict(answers)
    answers["answer_text"] = np.where(dropped, "", answers["answer_text"]).astype(object)
    for key in ("answer_start", "answer_end"):
        answers[key] = np.where(dropped, -1, answers[key]).astype("int32")
    return answers


def tune_null_threshold(task, dev, batch_size=None, answers=None):
    """Sets `task.null_score_diff_threshold` to the value that maximises dev F1 (SQuAD v2.0).

    As the official v2.0 script's `best_f1_thresh`: every question gets its best
    non-null span; questions are answered in increasing `score_diff` order and the
    running F1 total picks the threshold.

    Args:
        task: the span extractor (`BertSpanExtractor`).
        dev: `keras_bert_zoo.data.squad.SquadData` (questions, contexts, gold answers).
        batch_size: int. Questions per step. Defaults to 32.
        answers: optional `task.predict_best_spans(dev.x)` (then nothing is predicted).

    Returns:
        dict with `best_f1` (percent) and `best_f1_thresh` (the value set).
    """
    if answers is None:
        answers = task.predict_best_spans(dev.x, batch_size=batch_size)
    predictions = dict(zip(dev.ids, answers["answer_text"]))
    gold = dev.gold_answers()
    _, f1 = raw_scores(predictions, gold)
    na_probs = {qid: float(v) for qid, v in zip(dev.ids, answers["score_diff"])}
    best_f1, threshold = best_threshold(predictions, f1, na_probs, {q: bool(a) for q, a in gold.items()})
    task.null_score_diff_threshold = float(threshold)
    return {"best_f1": best_f1, "best_f1_thresh": float(threshold)}


def squad_metrics(task, dev, version="v1.1", batch_size=None, answers=None):
    """The official evaluation of `task`'s answers on `dev`.

    Args:
        task: the span extractor (`BertSpanExtractor`).
        dev: `keras_bert_zoo.data.squad.SquadData` with gold answers.
        version: "v1.1" (`exact_match`, `f1`) or "v2.0" (`exact`, `f1`, the
            `HasAns_`/`NoAns_` splits, and `best_f1`/`best_f1_thresh` etc. with the
            score differences as the no-answer scores). v2.0's `exact`/`f1` are
            those of the returned predictions: the no-answer cut of the official
            script is the task's `null_score_diff_threshold` (no cut when None),
            not its fixed 1.0, which suits probabilities, not logit differences.
            Defaults to "v1.1".
        batch_size: int. Questions per step. Defaults to 32.
        answers: optional `task.predict_best_spans(dev.x)` (then nothing is predicted).

    Returns:
        `(metrics, predictions)`: the metrics dict and `{question id: answer text}`,
        the official `predictions.json`.
    """
    if version not in ("v1.1", "v2.0"):
        raise ValueError(f"`version` must be 'v1.1' or 'v2.0'. Received: version={version!r}.")
    if answers is None:
        answers = task.predict(dev.x, batch_size=batch_size)
    else:
        answers = with_null_threshold(task, answers)
    predictions = {qid: str(text) for qid, text in zip(dev.ids, answers["answer_text"])}
    if version == "v1.1":
        return squad_v1_metrics(predictions, dev.gold_answers()), predictions
    na_probs = {qid: float(v) for qid, v in zip(dev.ids, answers["score_diff"])}
    cut = float("inf") if task.null_score_diff_threshold is None else task.null_score_diff_threshold
    return squad_v2_metrics(predictions, dev.gold_answers(), na_probs, na_prob_thresh=cut), predictions
