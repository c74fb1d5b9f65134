"""The QA benchmark's pieces that need no model: HF's decoding rule reproduced on our windows,
and the answers' agreement after SQuAD normalisation."""

import numpy as np

from benchmarks import qa, qa_rules


def test_hf_rule_normalises_per_window_where_ours_adds_logits():
    # Two windows of one question; tokens 1-3 are context ("a", "bb", "ccc"), 0 is [CLS].
    context = "a bb ccc"
    starts = np.array([[-1, 0, 2, 5]] * 2)
    ends = np.array([[-1, 1, 4, 8]] * 2)
    # Window 0: one sharp peak at "a" (logits 4 vs 0, 0). Window 1: higher but flat logits at "bb"/"ccc".
    start = np.array([[0.0, 4.0, 0.0, 0.0], [0.0, -9.0, 6.0, 5.9]])
    end = start.copy()
    answers = qa_rules.hf_rule(start, end, starts, ends, np.array([0, 0]), [context], max_answer_length=30)
    # HF: window 0's probabilities (~0.96 each) beat window 1's (~0.5 each), though 6+6 > 4+4 in logits.
    assert answers == ["a"]
    # Too long an answer is not allowed: with max length 1 the best span is one token.
    end2 = np.array([[0.0, 0.0, 0.0, 9.0], [0.0, 0.0, 0.0, 9.0]])
    start2 = np.array([[0.0, 9.0, 0.0, 0.0], [0.0, 9.0, 0.0, 0.0]])
    assert qa_rules.hf_rule(start2, end2, starts, ends, np.array([0, 0]), [context], 1) in (["a"], ["ccc"])
    assert qa_rules.hf_rule(start2, end2, starts, ends, np.array([0, 0]), [context], 3) == ["a bb ccc"]


def test_agreement_uses_squad_normalisation():
    assert qa.agreement(["The Beatles.", "x", "an apple"], ["beatles", "y", "Apple"]) == (2, 3)


def test_causes_names_the_step_that_changes_each_disagreement():
    # Per question: ours, HF's rule on our logits, HF on our windows, HF default.
    ours = ["a", "a", "a", "a", "a"]
    rule = ["a", "b", "b", "c", "a"]
    matched = ["a", "b", "b", "d", "a"]
    default = ["a", "b", "e", "d", "f"]
    assert qa_rules.causes(ours, rule, matched, default) == {"windows": 1, "decoding": 1, "both": 1,
                                                               "unexplained": 1}
