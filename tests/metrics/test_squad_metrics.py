"""The official SQuAD v1.1/v2.0 rules on cases computed by hand."""

import pytest

from keras_bert_zoo.metrics.squad import (
    exact_match,
    normalize_answer,
    squad_v1_metrics,
    squad_v2_metrics,
    token_f1,
)


def test_normalisation():
    assert normalize_answer("The  Quick, brown fox!") == "quick brown fox"
    assert normalize_answer("An apple a day") == "apple day"
    assert normalize_answer("theater\tAnthem") == "theater anthem"  # articles only as whole words
    assert normalize_answer("A.B.C. (1895-1943)") == "abc 18951943"
    assert normalize_answer("«burnt» Café") == "«burnt» café"  # only ASCII punctuation goes
    assert normalize_answer("the") == ""


def test_exact_and_f1():
    assert exact_match("the Denver Broncos", "Denver Broncos!") == 1
    assert token_f1("the cat sat", "cat sat on mat") == pytest.approx(2 / 3)  # P 1, R 1/2
    assert token_f1("cat cat dog", "cat dog dog") == pytest.approx(2 / 3)  # counts clip: 1 cat + 1 dog
    assert token_f1("dog", "cat") == 0.0
    # Empty answers: v1.1 gives 0 F1, v2.0 gives 1 when both are empty, 0 otherwise.
    assert token_f1("", "", "v1.1") == 0.0 and exact_match("", "") == 1
    assert token_f1("", "", "v2.0") == 1.0 and token_f1("a", "", "v2.0") == 1.0  # "a" normalises to ""
    assert token_f1("x", "", "v2.0") == 0.0
    with pytest.raises(ValueError, match="version"):
        token_f1("a", "b", "v3")


def test_v1_max_over_gold_answers_and_missing_predictions():
    gold = {"q1": ["Denver Broncos", "The Denver Broncos"], "q2": ["Carolina Panthers"], "q3": ["x"]}
    predictions = {"q1": "Denver Broncos", "q2": "the Panthers"}
    result = squad_v1_metrics(predictions, gold)
    assert result["exact_match"] == pytest.approx(100 / 3)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)  # q3 unanswered counts 0
    with pytest.raises(ValueError, match="'q4' has no gold answer"):
        squad_v1_metrics(predictions, dict(gold, q4=[]))


def test_v2_splits_threshold_and_best_thresholds():
    gold = {"q1": ["Denver Broncos"], "q2": ["Carolina Panthers"], "q3": [], "q4": []}
    predictions = {"q1": "Denver Broncos", "q2": "Panthers", "q3": "", "q4": "Santa Clara"}
    na_probs = {"q1": 0.5, "q2": -1.0, "q3": 2.0, "q4": 0.2}
    result = squad_v2_metrics(predictions, gold, na_probs)
    assert result["exact"] == pytest.approx(50.0)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 + 0) / 4)
    assert (result["HasAns_exact"], result["HasAns_f1"]) == pytest.approx((50.0, 100 * (1 + 2 / 3) / 2))
    assert (result["NoAns_exact"], result["NoAns_f1"], result["NoAns_total"]) == (50.0, 50.0, 2)
    # Start at 2 (both unanswerable right); answer q2 (+2/3, best), q4 (-1), q1 (+1), q3 (0).
    assert result["best_f1"] == pytest.approx(100 * (2 + 2 / 3) / 4)
    assert result["best_f1_thresh"] == -1.0
    # Answering nothing is best for exact: a threshold below every score (the official script's 0.0
    # would answer q2, which it did not count).
    assert (result["best_exact"], result["best_exact_thresh"]) == (50.0, -2.0)
    # A threshold below q4's score turns its wrong answer into a right "no answer".
    low = squad_v2_metrics(predictions, gold, na_probs, na_prob_thresh=0.1)
    assert low["NoAns_exact"] == 100.0 and low["HasAns_exact"] == 0.0  # q1 (0.5) is dropped too
    # Without na_probs: no threshold, no best_* keys.
    plain = squad_v2_metrics(predictions, gold)
    assert plain["exact"] == 50.0 and "best_f1" not in plain


def test_v2_missing_prediction_is_named():
    with pytest.raises(ValueError, match="q2"):
        squad_v2_metrics({"q1": "a"}, {"q1": ["a"], "q2": ["b"]})


def test_best_threshold_reproduces_its_score_when_scores_tie():
    from keras_bert_zoo.metrics.squad import best_threshold

    # q1 (answerable, right) and q2 (unanswerable, answered) share a score: a threshold answers both
    # or neither. Counting after q1 alone would report 3/3 with a threshold that also answers q2.
    predictions = {"q1": "a", "q2": "b", "q3": ""}
    f1 = {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    na_probs = {"q1": 0.5, "q2": 0.5, "q3": 0.9}
    has_answer = {"q1": True, "q2": False, "q3": False}
    best, threshold = best_threshold(predictions, f1, na_probs, has_answer)
    assert threshold < 0.5 and best == pytest.approx(100 * 2 / 3)  # nothing answered: q2, q3 right
    applied = sum(f1[q] if has_answer[q] else float(not predictions[q]) for q in f1 if na_probs[q] <= threshold)
    applied += sum(float(not has_answer[q]) for q in f1 if na_probs[q] > threshold)
    assert 100 * applied / 3 == pytest.approx(best)
