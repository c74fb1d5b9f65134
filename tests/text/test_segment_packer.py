"""SegmentPacker against pure-Python versions of the truncation rules."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import SegmentPacker
from tests.helpers import assert_config_round_trip

CLS, SEP, PAD = 101, 102, 0


def pop_longest(segments, budget):
    """The original `_truncate_seq_pair`, for N segments: pop the end of the longest
    (the later one on ties) until the total fits."""
    segments = [list(s) for s in segments]
    while sum(map(len, segments)) > budget:
        longest = max(range(len(segments)), key=lambda i: (len(segments[i]), i))
        segments[longest].pop()
    return segments


def round_robin(segments, budget):
    """One token per segment in turn, first segment first."""
    kept, i = [0] * len(segments), 0
    while sum(kept) < budget and any(k < len(s) for k, s in zip(kept, segments)):
        if kept[i] < len(segments[i]):
            kept[i] += 1
        i = (i + 1) % len(segments)
    return [s[:k] for s, k in zip(segments, kept)]


def waterfall(segments, budget):
    out = []
    for s in segments:
        out.append(s[: max(0, budget)])
        budget -= len(out[-1])
    return out


def pack(segments, length):
    ids, seg = [CLS], [0]
    for i, s in enumerate(segments):
        ids += list(s) + [SEP]
        seg += [i] * (len(s) + 1)
    mask = [1] * len(ids) + [0] * (length - len(ids))
    return ids + [PAD] * (length - len(ids)), seg + [0] * (length - len(seg)), mask


@pytest.mark.parametrize(
    "truncate,rule", [("longest_first", pop_longest), ("round_robin", round_robin), ("waterfall", waterfall)]
)
@pytest.mark.parametrize("num_segments", [1, 2, 3])
def test_truncation_matches_python_rules(truncate, rule, num_segments):
    rng = np.random.default_rng(num_segments)
    length = 12
    batch = [
        [rng.integers(1, 50, rng.integers(0, 14)).tolist() for _ in range(num_segments)]
        for _ in range(40)
    ]
    batch.append([[1] * 5] * num_segments)  # exact ties
    batch.append([list(range(1, 9))] + [[7]] * (num_segments - 1))
    packer = SegmentPacker(length, CLS, SEP, truncate=truncate)
    columns = tuple(tf.ragged.constant([row[i] for row in batch], dtype=tf.int32) for i in range(num_segments))
    out = packer(columns)
    for r, row in enumerate(batch):
        expected = pack(rule(row, length - 1 - num_segments), length)
        got = [out[k][r].numpy().tolist() for k in ("token_ids", "segment_ids", "padding_mask")]
        assert got == list(expected), (row, got)


def test_longest_first_pair_pops_from_the_longer():
    packer = SegmentPacker(8, CLS, SEP)
    out = packer(([1, 2, 3, 4, 5, 6], [7, 8, 9, 10]))
    assert out["token_ids"].numpy().tolist() == [CLS, 1, 2, 3, SEP, 7, 8, SEP]
    assert out["segment_ids"].numpy().tolist() == [0, 0, 0, 0, 0, 1, 1, 1]


def test_dynamic_length_pads_to_longest():
    packer = SegmentPacker(None, CLS, SEP, pad_value=9)
    out = packer(tf.ragged.constant([[1, 2, 3], [4]]))
    assert out["token_ids"].numpy().tolist() == [[CLS, 1, 2, 3, SEP], [CLS, 4, SEP, 9, 9]]
    assert out["padding_mask"].numpy().tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert all(v.dtype == tf.int32 for v in out.values())


def test_dense_input_and_dataset_map():
    packer = SegmentPacker(6, CLS, SEP)
    out = packer((tf.constant([[1, 2], [3, 4]]), tf.constant([[5], [6]])))
    assert out["token_ids"].numpy().tolist() == [[CLS, 1, 2, SEP, 5, SEP], [CLS, 3, 4, SEP, 6, SEP]]
    ds = tf.data.Dataset.from_tensor_slices(tf.ragged.constant([[1, 2, 3, 4, 5, 6], [7]]))
    rows = list(ds.map(lambda x: packer((x, x))).as_numpy_iterator())
    assert rows[0]["token_ids"].tolist() == [CLS, 1, 2, SEP, 1, SEP]
    assert rows[1]["token_ids"].tolist() == [CLS, 7, SEP, 7, SEP, PAD]


def test_config_and_bad_arguments():
    clone = assert_config_round_trip(SegmentPacker(16, CLS, SEP, pad_value=3, truncate="waterfall"))
    assert clone.truncate == "waterfall" and clone.pad_value == 3
    with pytest.raises(ValueError, match="truncate"):
        SegmentPacker(16, CLS, SEP, truncate="longest")
    with pytest.raises(ValueError, match="sequence_length"):
        SegmentPacker(1, CLS, SEP)
    with pytest.raises(ValueError, match="start_value"):
        SegmentPacker(8, "[CLS]", SEP)
    with pytest.raises(ValueError, match="no room"):
        SegmentPacker(3, CLS, SEP)(([1], [2], [3]))


@pytest.mark.parametrize("length", [None, 9])
def test_pairs_and_triples_against_the_python_rule_in_a_graph(length):
    """The dense packing (positions, not ragged masks) inside a tf.function: any pad id,
    dynamic or fixed length, empty rows and an empty batch."""
    rng = np.random.default_rng(7)
    for num_segments in (2, 3):
        batch = [[rng.integers(1, 50, rng.integers(0, 7)).tolist() for _ in range(num_segments)] for _ in range(12)]
        packer = SegmentPacker(length, CLS, SEP, pad_value=PAD + 3)
        columns = tuple(tf.ragged.constant([row[i] for row in batch], dtype=tf.int32, ragged_rank=1)
                        for i in range(num_segments))
        out = tf.function(lambda *c: packer(c))(*columns)
        width = out["token_ids"].shape[1]
        assert width == (length or max(1 + sum(len(s) + 1 for s in row) for row in batch))
        for r, row in enumerate(batch):
            kept = row if length is None else pop_longest(row, length - 1 - num_segments)
            ids, seg, mask = pack(kept, width)
            ids = [i if m else PAD + 3 for i, m in zip(ids, mask)]
            got = [out[k][r].numpy().tolist() for k in ("token_ids", "segment_ids", "padding_mask")]
            assert got == [ids, seg, mask], (row, got)
        empty = tuple(tf.RaggedTensor.from_row_splits(tf.zeros([0], tf.int32), [0]) for _ in range(num_segments))
        assert packer(empty)["token_ids"].shape == (0, length or 0)
