"""The official SQuAD v1.1 and v2.0 evaluation rules (`evaluate-v1.1.py`, `evaluate-v2.0.py`).

Answers are normalised (lower case, punctuation removed, the articles a/an/the
removed, whitespace collapsed); exact match and token F1 take the maximum over the
gold answers. v1.1 and v2.0 differ on empty answers: v1.1's F1 of two empty token
lists is 0, v2.0 scores "no answer" 1 when both are empty and 0 otherwise. v2.0 adds the
`HasAns_`/`NoAns_` splits, the no-answer threshold applied to a per-question score
(`na_probs`, for BERT the null score minus the best span score) and the best threshold
for exact match and F1. Scores are percentages, as the official scripts print them.
"""

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text):
    """Lower case, drop ASCII punctuation, drop articles, collapse whitespace."""
    text = "".join(c for c in text.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
    """1 if the normalised strings are equal, else 0."""
    return int(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction, gold, version="v2.0"):
    """Token F1 of the normalised answers.

    Args:
        prediction: str.
        gold: str.
        version: "v1.1" (empty answers score 0) or "v2.0" (an empty answer scores 1
            against an empty gold, else 0). Defaults to "v2.0".
    """
    _check_version(version)
    predicted = normalize_answer(prediction).split()
    expected = normalize_answer(gold).split()
    if version == "v2.0" and (not predicted or not expected):
        return float(predicted == expected)
    common = sum((collections.Counter(predicted) & collections.Counter(expected)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(predicted), common / len(expected)
    return 2 * precision * recall / (precision + recall)


def _check_version(version):
    if version not in ("v1.1", "v2.0"):
        raise ValueError(f"`version` must be 'v1.1' or 'v2.0'. Received: version={version!r}.")


def squad_v1_metrics(predictions, gold_answers):
    """`evaluate-v1.1.py`: exact match and F1 in percent over every gold question.

    Args:
        predictions: dict question id -> predicted answer text. A missing question
            scores 0 (the official script's "Unanswered question will receive score 0").
        gold_answers: dict question id -> list of gold answer texts.

    Returns:
        dict with "exact_match" and "f1".
    """
    if not gold_answers:
        raise ValueError("`gold_answers` is empty: there is nothing to evaluate.")
    exact = f1 = 0.0
    for qid, golds in gold_answers.items():
        if not golds:
            raise ValueError(f"Question {qid!r} has no gold answer: v1.1 scores answerable questions only. "
                             "Evaluate unanswerable questions with squad_v2_metrics.")
        if qid not in predictions:
            continue
        prediction = predictions[qid]
        exact += max(exact_match(prediction, g) for g in golds)
        f1 += max(token_f1(prediction, g, "v1.1") for g in golds)
    total = len(gold_answers)
    return {"exact_match": 100.0 * exact / total, "f1": 100.0 * f1 / total}


def raw_scores(predictions, gold_answers):
    """v2.0 per-question exact and F1 (before any threshold), for predicted questions.

    Gold answers that normalise to nothing are dropped; a question left without any
    is unanswerable and only "" matches it.
    """
    exact, f1 = {}, {}
    for qid, golds in gold_answers.items():
        if qid not in predictions:
            continue
        golds = [g for g in golds if normalize_answer(g)] or [""]
        exact[qid] = max(exact_match(predictions[qid], g) for g in golds)
        f1[qid] = max(token_f1(predictions[qid], g, "v2.0") for g in golds)
    return exact, f1


def best_threshold(predictions, scores, na_probs, has_answer):
    """`find_best_thresh`: the no-answer threshold that maximises the total score.

    Starting from "no answer everywhere", questions are answered in increasing
    `na_probs` order; the best running total gives the threshold (answer when
    `na_probs <= threshold`). Unlike the official script, a total is considered only
    after the last of equal `na_probs` (a threshold answers all of them or none), and
    when answering nothing is best the threshold is below every `na_probs`: applying the
    threshold then gives exactly the best score it reports.

    Returns:
        (best score in percent, threshold).
    """
    current = best = sum(1 for qid in has_answer if not has_answer[qid])
    ordered = [qid for qid in sorted(na_probs, key=lambda k: na_probs[k]) if qid in scores]
    threshold = na_probs[ordered[0]] - 1.0 if ordered else 0.0
    for i, qid in enumerate(ordered):
        if has_answer[qid]:
            current += scores[qid]
        elif predictions[qid]:
            current -= 1
        tie_continues = i + 1 < len(ordered) and na_probs[ordered[i + 1]] == na_probs[qid]
        if current > best and not tie_continues:
            best, threshold = current, na_probs[qid]
    return 100.0 * best / len(scores), threshold


def squad_v2_metrics(predictions, gold_answers, na_probs=None, na_prob_thresh=1.0):
    """`evaluate-v2.0.py`: exact/F1, the HasAns/NoAns splits and the best thresholds.

    Args:
        predictions: dict question id -> predicted text ("" for no answer).
        gold_answers: dict question id -> list of gold texts ([] when unanswerable).
        na_probs: optional dict question id -> no-answer score (for BERT the null
            score minus the best span score). With it, a question whose score exceeds
            `na_prob_thresh` counts as answered "no answer", and the best thresholds
            are reported.
        na_prob_thresh: float. Defaults to 1.0, as the official script.

    Returns:
        dict with "exact", "f1", "total", "HasAns_exact", "HasAns_f1", "HasAns_total",
        "NoAns_*" likewise (when such questions exist), and with `na_probs`
        "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh".
    """
    has_answer = {qid: bool(golds) for qid, golds in gold_answers.items()}
    exact_raw, f1_raw = raw_scores(predictions, gold_answers)
    if not exact_raw:
        raise ValueError("No gold question has a prediction: there is nothing to evaluate.")
    probs = na_probs if na_probs is not None else {qid: 0.0 for qid in predictions}

    def thresholded(scores):
        return {q: (float(not has_answer[q]) if probs[q] > na_prob_thresh else s) for q, s in scores.items()}

    exact, f1 = thresholded(exact_raw), thresholded(f1_raw)
    result = _summary(exact, f1, list(exact))
    for prefix, wanted in (("HasAns", True), ("NoAns", False)):
        qids = [q for q, v in has_answer.items() if v == wanted]
        if qids:
            missing = [q for q in qids if q not in exact]
            if missing:
                raise ValueError(f"Questions {missing[:5]} have no prediction; predict every question.")
            result.update({f"{prefix}_{k}": v for k, v in _summary(exact, f1, qids).items()})
    if na_probs is not None:
        result["best_exact"], result["best_exact_thresh"] = best_threshold(predictions, exact_raw, na_probs, has_answer)
        result["best_f1"], result["best_f1_thresh"] = best_threshold(predictions, f1_raw, na_probs, has_answer)
    return result


def _summary(exact, f1, qids):
    total = len(qids)
    return {
        "exact": 100.0 * sum(exact[q] for q in qids) / total,
        "f1": 100.0 * sum(f1[q] for q in qids) / total,
        "total": total,
    }
