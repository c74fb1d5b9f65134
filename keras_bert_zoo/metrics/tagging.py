"""Entity-level precision, recall and F1 as the CoNLL `conlleval` script counts them.

A predicted entity is correct when a gold entity has the same type, start and end.
Chunks are read with conlleval's rules (`text/tag_schemes.tag_chunks`): IOB1, IOB2 and
IOBES tags are all accepted, and an `I-` after `O` opens an entity. This is what
`seqeval.metrics.classification_report` reports in its default mode; the tests check the
two agree case by case.
"""

from keras_bert_zoo.text.tag_schemes import tag_chunks


def _prf(correct, predicted, gold):
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold if gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "support": gold}


def _check(y_true, y_pred):
    if len(y_true) != len(y_pred):
        raise ValueError(
            "`y_true` and `y_pred` must hold the same number of sentences. "
            f"Received: {len(y_true)} and {len(y_pred)}."
        )
    for i, (t, p) in enumerate(zip(y_true, y_pred)):
        if isinstance(t, str) or isinstance(p, str):
            raise TypeError(
                "`y_true` and `y_pred` must be lists of tag lists (one list per sentence). "
                f"Received a string for sentence {i}."
            )
        if len(t) != len(p):
            raise ValueError(
                f"Sentence {i} has {len(t)} gold tags but {len(p)} predicted tags; they must match."
            )


def entity_scores(y_true, y_pred):
    """Entity-level scores, micro over all types and per type.

    Args:
        y_true: list of lists of str. Gold tags, one list per sentence.
        y_pred: list of lists of str. Predicted tags, the same lengths.

    Returns:
        dict: "precision", "recall", "f1" (micro, floats in [0, 1]), "support" (gold
        entities), and "per_type": {type: {"precision", "recall", "f1", "support"}}.

    Examples:
    >>> keras_bert_zoo.metrics.entity_scores([["B-PER", "I-PER", "O"]], [["B-PER", "I-PER", "O"]])["f1"]
    1.0
    """
    _check(y_true, y_pred)
    counts = {}  # type -> [correct, predicted, gold]
    for t, p in zip(y_true, y_pred):
        gold = set(tag_chunks(t))
        pred = set(tag_chunks(p))
        for chunks, slot in ((pred & gold, 0), (pred, 1), (gold, 2)):
            for kind, _, _ in chunks:
                counts.setdefault(kind, [0, 0, 0])[slot] += 1
    totals = [sum(c[i] for c in counts.values()) for i in range(3)]
    scores = _prf(*totals)
    scores["per_type"] = {kind: _prf(*counts[kind]) for kind in sorted(counts)}
    return scores


def tagging_metrics(y_true, y_pred):
    """The flat dict a results file records: precision/recall/f1 micro, plus `<type>_f1` etc."""
    scores = entity_scores(y_true, y_pred)
    flat = {name: scores[name] for name in ("precision", "recall", "f1")}
    for kind, values in scores["per_type"].items():
        for name in ("precision", "recall", "f1"):
            flat[f"{kind}_{name}"] = values[name]
    return flat
