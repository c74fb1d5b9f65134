"""MLMMasker: the original count rule, 80/10/10, whole words, statelessness."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text.mlm_masker import MLMMasker
from tests.helpers import assert_config_round_trip

PAD, CLS, SEP, MASK, V = 0, 2, 3, 4, 60
CONT = list(range(50, 60))  # "##" pieces


def _batch(rows=400, seq=48, seed=0):
    """[CLS] words [SEP] words [SEP] + padding, ~25% continuation pieces."""
    rng = np.random.default_rng(seed)
    ids = np.zeros((rows, seq), "int32")
    mask = np.zeros((rows, seq), "int32")
    for r in range(rows):
        n = int(rng.integers(5, seq + 1))
        body = rng.integers(5, 50, n)
        cont = rng.random(n) < 0.25
        body[cont] = rng.integers(50, 60, cont.sum())
        body[0] = CLS
        body[n // 2] = SEP
        body[n - 1] = SEP
        ids[r, :n], mask[r, :n] = body, 1
    return ids, mask


def _masker(**kw):
    kw.setdefault("max_predictions", 8)
    return MLMMasker(V, MASK, unselectable_token_ids=[PAD, CLS, SEP], continuation_token_ids=CONT, **kw)


def _rule(length, rate=0.15, cap=8):
    return min(cap, max(1, int(round(length * rate))))  # Python's round-half-even, as the original


def _groups(row, length, whole_word):
    """Reference grouping: the original's cand_indexes."""
    groups = []
    for i in range(length):
        if row[i] in (CLS, SEP):
            continue
        if whole_word and groups and row[i] in CONT:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def test_config_round_trip_and_validation():
    assert_config_round_trip(_masker(whole_word=True))
    with pytest.raises(ValueError, match="mask_token_id"):
        MLMMasker(10, 12)
    with pytest.raises(ValueError, match="continuation_token_ids"):
        MLMMasker(10, 4, whole_word=True)
    with pytest.raises(ValueError, match="mask_token_rate"):
        MLMMasker(10, 4, mask_token_rate=0.95, random_token_rate=0.1)
    with pytest.raises(ValueError, match="lacks the special tokens"):
        MLMMasker.from_vocabulary(["[PAD]", "a"])


@pytest.mark.parametrize("whole_word", [False, True])
def test_selection_equals_reference_greedy(whole_word):
    """Same random scores → the same positions as the original's greedy group walk."""
    ids, mask = _batch(rows=60)
    seed = tf.constant([7, 11])
    out = _masker(whole_word=whole_word)(ids, padding_mask=mask, seed=seed)
    score = tf.random.stateless_uniform(ids.shape, tf.random.experimental.stateless_split(seed, 4)[0]).numpy()
    for r in range(len(ids)):
        length = int(mask[r].sum())
        groups = _groups(ids[r], length, whole_word)
        # Groups are visited in the order of their random score (the group's index column).
        order = sorted(range(len(groups)), key=lambda g: score[r, g]) if whole_word else None
        if not whole_word:
            order = sorted(range(len(groups)), key=lambda g: -score[r, groups[g][0]])
        chosen, need = [], _rule(length)
        for g in order:
            if len(chosen) >= need:
                break
            if len(chosen) + len(groups[g]) <= need:
                chosen.extend(groups[g])
        weights = out["mlm_weights"][r].numpy()
        got = out["mask_positions"][r].numpy()[weights > 0]
        np.testing.assert_array_equal(got, sorted(chosen))
        np.testing.assert_array_equal(out["mlm_ids"][r].numpy()[weights > 0], ids[r][sorted(chosen)])


def test_count_rule_specials_and_padding():
    ids, mask = _batch(rows=300)
    out = _masker(max_predictions=5)(ids, padding_mask=mask, seed=tf.constant([1, 2]))
    w = out["mlm_weights"].numpy()
    pos = out["mask_positions"].numpy()
    for r in range(len(ids)):
        n = int(w[r].sum())
        assert n == _rule(int(mask[r].sum()), cap=5)
        assert list(pos[r, :n]) == sorted(pos[r, :n]) and (pos[r, n:] == 0).all()
        assert not np.isin(ids[r, pos[r, :n]], [PAD, CLS, SEP]).any()
        unmasked = np.setdiff1d(np.arange(ids.shape[1]), pos[r, :n])
        np.testing.assert_array_equal(out["token_ids"][r].numpy()[unmasked], ids[r, unmasked])
    assert (out["mlm_ids"].numpy()[w == 0] == 0).all()


@pytest.mark.parametrize("per_word", [False, True])
def test_80_10_10_and_whole_words(per_word):
    ids, mask = _batch(rows=2500, seed=1)
    out = _masker(whole_word=True, per_word_replacement=per_word, max_predictions=20)(
        ids, padding_mask=mask, seed=tf.constant([3, 4])
    )
    w = out["mlm_weights"].numpy() > 0
    pos, labels, new = out["mask_positions"].numpy(), out["mlm_ids"].numpy(), out["token_ids"].numpy()
    got = np.take_along_axis(new, pos, axis=1)[w]
    is_mask, kept = got == MASK, got == labels[w]
    assert abs(is_mask.mean() - 0.8) < 0.02 and abs(kept.mean() - 0.1 - 0.1 / V) < 0.02
    assert abs((~is_mask & ~kept).mean() - 0.1) < 0.02
    for r in range(300):  # whole-word groups intact (and one draw per word with per_word)
        chosen = set(pos[r][w[r]].tolist())
        for group in _groups(ids[r], int(mask[r].sum()), True):
            hit = [i in chosen for i in group]
            assert all(hit) or not any(hit), (r, group)
            if per_word and all(hit) and len(group) > 1:
                assert len({new[r, i] == MASK for i in group}) == 1


def test_stateless_and_seeded(tmp_path):
    ids, mask = _batch(rows=20)
    m = _masker()
    a = m(ids, padding_mask=mask, seed=tf.constant([5, 6]))
    b = m(ids, padding_mask=mask, seed=tf.constant([5, 6]))
    c = m(ids, padding_mask=mask, seed=tf.constant([5, 7]))
    np.testing.assert_array_equal(a["token_ids"], b["token_ids"])
    assert not np.array_equal(a["mask_positions"], c["mask_positions"])
    single = m(ids[0], padding_mask=mask[0], seed=tf.constant([5, 6]))  # 1-D input
    assert single["mask_positions"].shape == (8,)
    ds = tf.data.Dataset.from_tensor_slices((ids, mask)).enumerate().map(
        lambda i, x: m(x[0], padding_mask=x[1], seed=tf.stack([tf.cast(i, tf.int32), 0]))
    )
    it = iter(ds)
    ckpt = tf.train.Checkpoint(iterator=it)
    next(it)
    path = ckpt.write(str(tmp_path / "ckpt"))
    first = [next(it)["token_ids"].numpy() for _ in range(3)]
    ckpt.read(path)
    again = [next(it)["token_ids"].numpy() for _ in range(3)]
    np.testing.assert_array_equal(first, again)
