import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.layers import BertEmbeddings
from tests.helpers import assert_config_round_trip, assert_mixed_precision
from references import numpy_bert
from tests.models.randomize import randomize_weights


def _inputs(seq=6):
    rng = np.random.default_rng(0)
    return rng.integers(0, 30, (2, seq)).astype("int32"), rng.integers(0, 2, (2, seq)).astype("int32")


def test_matches_numpy_reference():
    layer = BertEmbeddings(30, 16, max_sequence_length=10, dropout=0.0)
    ids, seg = _inputs()
    layer(ids, seg)
    randomize_weights(layer, seed=3)
    got = np.array(layer(ids, seg))
    want = numpy_bert.layer_norm(
        np.array(layer.token_embedding.embeddings, np.float64)[ids]
        + np.array(layer.segment_embedding.embeddings, np.float64)[seg]
        + np.array(layer.position_embeddings, np.float64)[:6][None],
        np.array(layer.layer_norm.gamma, np.float64),
        np.array(layer.layer_norm.beta, np.float64),
    )
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_truncated_normal_init_stddev():
    layer = BertEmbeddings(2000, 64, dropout=0.0)
    layer(*_inputs())
    table = np.array(layer.token_embedding.embeddings)
    assert abs(table.std() - 0.02 * 0.88) < 0.002  # truncated at 2σ: std ≈ 0.88σ
    assert np.abs(table).max() <= 0.04 + 1e-6


def test_too_long_sequence_is_refused_with_the_fix():
    layer = BertEmbeddings(30, 16, max_sequence_length=4)
    with pytest.raises(ValueError, match="max_sequence_length=4"):
        layer(*_inputs(seq=6))


def test_config_and_bad_arguments():
    assert_config_round_trip(BertEmbeddings(30, 16, max_sequence_length=10, num_segments=3, dropout=0.2))
    with pytest.raises(ValueError, match="vocabulary_size=0"):
        BertEmbeddings(0, 16)
    with pytest.raises(ValueError, match="dropout=1.5"):
        BertEmbeddings(10, 16, dropout=1.5)


def test_mixed_precision():
    ids, seg = _inputs()

    def build(policy):
        layer = BertEmbeddings(30, 16, dtype=policy)
        layer(ids, seg)
        return _Model(layer)

    class _Model:
        def __init__(self, layer):
            self.layer = layer
            self.weights = layer.weights

        def __call__(self, inputs, training=False):
            return self.layer(*inputs, training=training)

    assert_mixed_precision(build, (ids, seg))


BAD_IDS = [
    ([[5, 7, -1]], None, r"`token_ids` must be in \[0, vocabulary_size=30\)\. Received: token_ids\[0, 2\]=-1"),
    ([[30, 7, 1]], None, r"token_ids\[0, 0\]=30 \(1 of 3 ids"),
    (None, [[0, 0, 2]], r"`segment_ids` must be in \[0, num_segments=2\)\. Received: segment_ids\[0, 2\]=2"),
    (None, [[0, -1, 0]], r"segment_ids\[0, 1\]=-1"),
]


def test_ids_outside_their_table_are_refused_eagerly_and_in_graphs():
    # R51 (issue 21 item 7): -1 embedded the last word piece (Keras' take wraps negatives).
    layer = BertEmbeddings(30, 16, max_sequence_length=10)
    good = np.array([[0, 29, 3]], "int32"), np.array([[0, 1, 1]], "int32")
    spec = tf.TensorSpec([None, None], tf.int32)
    graph = tf.function(lambda a, b: layer(a, b), input_signature=[spec, spec])
    # The table's first and last ids are fine.
    np.testing.assert_allclose(np.array(graph(*good)), np.array(layer(*good)), atol=1e-6)
    for bad_ids, bad_segments, match in BAD_IDS:
        ids = good[0] if bad_ids is None else np.array(bad_ids, "int32")
        seg = good[1] if bad_segments is None else np.array(bad_segments, "int32")
        with pytest.raises(ValueError, match=match):
            layer(ids, seg)
        name = "token_ids" if bad_ids is not None else "segment_ids"
        with pytest.raises(tf.errors.InvalidArgumentError, match=f"`{name}` must be in"):
            graph(tf.constant(ids), tf.constant(seg))


def test_empty_sequences_are_named():
    layer = BertEmbeddings(30, 16)
    with pytest.raises(ValueError, match=r"sequences are empty.*shape \(2, 0\)"):
        layer(np.zeros((2, 0), "int32"), np.zeros((2, 0), "int32"))
