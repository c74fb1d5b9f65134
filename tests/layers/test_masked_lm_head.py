import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.layers import MaskedLMHead


def test_transform_is_as_wide_as_the_tied_embeddings_from_construction():
    embedding = keras.layers.Embedding(30, 16)
    embedding.build((None, None))
    head = MaskedLMHead(embedding)
    assert head.transform_dense.units == 16  # was Dense(1), patched in build
    logits = head(np.ones((2, 5, 16), "float32"), np.array([[0, 4], [1, 2]], "int32"))
    assert tuple(head.transform_dense.kernel.shape) == (16, 16) and logits.shape == (2, 2, 30)
    with pytest.raises(ValueError, match="width 8, token_embedding.output_dim=16"):
        MaskedLMHead(embedding)(np.ones((2, 5, 8), "float32"))


def test_mask_positions_outside_the_sequence_are_refused():
    # R56: mask position -1 silently predicted the last position.
    embedding = keras.layers.Embedding(30, 16)
    embedding.build((None, None))
    head = MaskedLMHead(embedding)
    x = np.random.default_rng(0).normal(size=(1, 4, 16)).astype("float32")
    np.testing.assert_allclose(np.array(head(x, np.array([[0, 3]], "int32"))[0, 1]),
                               np.array(head(x, np.array([[3]], "int32"))[0, 0]), atol=1e-6)
    with pytest.raises(ValueError, match=r"`mask_positions` must be in \[0, sequence length=4\)\. Received: mask_positions\[0, 1\]=-1"):
        head(x, np.array([[2, -1]], "int32"))
    graph = tf.function(lambda s, p: head(s, p))
    with pytest.raises(tf.errors.InvalidArgumentError, match="mask_positions"):
        graph(tf.constant(x), tf.constant([[-1]]))
