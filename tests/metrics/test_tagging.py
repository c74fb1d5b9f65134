"""Entity-level tagging metrics: hand-counted cases and agreement with seqeval (conlleval mode)."""

import numpy as np
import pytest

from keras_bert_zoo.metrics.tagging import entity_scores, tagging_metrics

HAND_CASES = [
    # (gold, predicted): IOB2, IOB1 (I- opens after O), type switch inside a run, IOBES,
    # B-B of one type, an entity running to the sentence end, E- after O.
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "O", "O", "I-LOC"]),
    (["I-ORG", "I-ORG", "O", "I-PER"], ["B-ORG", "I-ORG", "O", "B-PER"]),
    (["B-ORG", "I-ORG", "I-LOC", "O"], ["B-ORG", "I-ORG", "I-ORG", "O"]),
    (["B-MISC", "B-MISC", "O"], ["B-MISC", "I-MISC", "O"]),
    (["O", "O", "B-LOC", "I-LOC"], ["O", "O", "B-LOC", "I-LOC"]),
    (["S-PER", "O", "B-LOC", "E-LOC"], ["S-PER", "O", "B-LOC", "I-LOC"]),
    (["O", "E-PER", "O", "O"], ["O", "B-PER", "O", "O"]),
    (["O", "O", "O"], ["B-PER", "O", "O"]),
]


def test_hand_counted_micro_and_per_type():
    gold = [["B-PER", "I-PER", "O", "B-LOC", "O", "B-ORG"], ["I-LOC", "O", "B-PER"]]
    pred = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"], ["B-LOC", "O", "B-ORG"]]
    scores = entity_scores(gold, pred)
    # Gold: PER(0,2) LOC(3,4) ORG(5,6) | LOC(0,1) PER(2,3) = 5. Predicted: PER(0,2) LOC(3,5)
    # | LOC(0,1) ORG(2,3) = 4. Correct: PER(0,2), LOC(0,1) = 2.
    assert scores["precision"] == pytest.approx(2 / 4)
    assert scores["recall"] == pytest.approx(2 / 5)
    assert scores["f1"] == pytest.approx(2 * 0.5 * 0.4 / 0.9)
    assert scores["support"] == 5
    assert scores["per_type"]["PER"] == {"precision": 1.0, "recall": 0.5, "f1": pytest.approx(2 / 3), "support": 2}
    assert scores["per_type"]["LOC"]["precision"] == 0.5 and scores["per_type"]["LOC"]["recall"] == 0.5
    assert scores["per_type"]["ORG"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    flat = tagging_metrics(gold, pred)
    assert flat["f1"] == scores["f1"] and flat["PER_recall"] == 0.5


def test_no_entities_anywhere_scores_zero_not_nan():
    assert entity_scores([["O"]], [["O"]]) == {
        "precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 0, "per_type": {}}


def test_bad_inputs_name_the_problem():
    with pytest.raises(ValueError, match="same number of sentences"):
        entity_scores([["O"]], [])
    with pytest.raises(ValueError, match="Sentence 0 has 1 gold tags but 2"):
        entity_scores([["O"]], [["O", "O"]])
    with pytest.raises(TypeError, match="lists of tag lists"):
        entity_scores(["O"], ["O"])
    with pytest.raises(ValueError, match="Received: 'X-PER'"):
        entity_scores([["X-PER"]], [["O"]])


def _seqeval_scores(gold, pred):
    seqeval = pytest.importorskip("seqeval.metrics", reason="pip install seqeval==1.2.2 (the test extra)")
    report = seqeval.classification_report(gold, pred, output_dict=True, zero_division=0)
    return (
        seqeval.precision_score(gold, pred, zero_division=0),
        seqeval.recall_score(gold, pred, zero_division=0),
        seqeval.f1_score(gold, pred, zero_division=0),
        {k: v for k, v in report.items() if not k.endswith(" avg")},
    )


def _assert_agrees(gold, pred):
    precision, recall, f1, per_type = _seqeval_scores(gold, pred)
    ours = entity_scores(gold, pred)
    assert (ours["precision"], ours["recall"], ours["f1"]) == pytest.approx((precision, recall, f1))
    for kind, values in per_type.items():
        if values["support"] == 0 and kind not in ours["per_type"]:
            continue
        mine = ours["per_type"][kind]
        assert (mine["precision"], mine["recall"], mine["f1"], mine["support"]) == pytest.approx(
            (values["precision"], values["recall"], values["f1-score"], values["support"])), kind


@pytest.mark.parametrize("gold,pred", HAND_CASES)
def test_agrees_with_seqeval_on_hand_cases(gold, pred):
    _assert_agrees([gold], [pred])


def test_agrees_with_seqeval_on_random_tag_soup():
    rng = np.random.default_rng(0)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "E-ORG", "S-MISC"]
    gold = [list(rng.choice(tags, size=rng.integers(1, 12))) for _ in range(300)]
    pred = [[t if rng.random() < 0.7 else str(rng.choice(tags)) for t in s] for s in gold]
    _assert_agrees(gold, pred)
