"""R54 (issue 21): an empty list is an empty batch; pairs of unequal batch sizes are named."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertPreprocessor, BertTokenizer, SegmentPacker

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "eats", "."]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(VOCAB)


def test_empty_list_is_an_empty_batch(tokenizer):
    # Before: "`inputs` must be strings. Received: dtype=float32."
    assert tokenizer([]).shape.as_list() == [0, None] and tokenizer([]).to_list() == []
    assert tokenizer(np.array([])).to_list() == []
    ids, begins, _ = tokenizer.tokenize_with_offsets([])
    assert ids.to_list() == begins.to_list() == []
    for sequence_length, width in ((8, 8), (None, 0)):
        preprocessor = BertPreprocessor(tokenizer, sequence_length=sequence_length)
        for x in ([], ([], [])):
            out = preprocessor(x)
            assert {k: tuple(v.shape) for k, v in out.items()} == {
                k: (0, width) for k in ("token_ids", "segment_ids", "padding_mask")
            }
    # The same preprocessor still packs a real batch.
    out = BertPreprocessor(tokenizer, sequence_length=6)((["a man eats ."], ["a man"]))
    np.testing.assert_array_equal(out["token_ids"], [[2, 5, 6, 3, 5, 3]])


def test_pairs_with_unequal_batch_sizes_are_named(tokenizer):
    # Before: TensorFlow's "Shapes of all inputs must match: values[0].shape = [2] != ...".
    preprocessor = BertPreprocessor(tokenizer, sequence_length=8)
    with pytest.raises(ValueError, match="same batch size. Received: 2 in segment 0, 1 in segment 1"):
        preprocessor((["a man", "eats ."], ["a"]))
    packer = SegmentPacker(8, start_value=2, end_value=3)
    with pytest.raises(ValueError, match="Received: 1 in segment 0, 2 in segment 1, 1 in segment 2"):
        packer(([[5]], [[6], [7]], [[8]]))
    spec = tf.RaggedTensorSpec([None, None], tf.int32)
    graph = tf.function(lambda a, b: packer((a, b)), input_signature=[spec, spec])
    with pytest.raises(tf.errors.InvalidArgumentError, match="segment 1 has a different batch size"):
        graph(tf.ragged.constant([[5], [6]]), tf.ragged.constant([[7]]))
    np.testing.assert_array_equal(
        graph(tf.ragged.constant([[5], [6, 7]]), tf.ragged.constant([[8], [5]]))["token_ids"],
        [[2, 5, 3, 8, 3, 0, 0, 0], [2, 6, 7, 3, 5, 3, 0, 0]],
    )
