"""Packing a padded batch's real tokens and putting them back by gathers: the values and gradients of
the take/scatter composites autodiff differentiates, exactly (both are copies of rows)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.layers import real_tokens

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.custom_gradient")


def gradient(function, x, weights):
    with tf.GradientTape() as tape:
        tape.watch(x)
        out = function(x)
        loss = tf.reduce_sum(out * weights)
    return out, tf.convert_to_tensor(tape.gradient(loss, x))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("lengths", [[5, 2, 0, 5], [1, 1, 1, 1]])
def test_pack_and_unpack_have_the_values_and_gradients_of_take_and_scatter(dtype, lengths):
    rng = np.random.default_rng(0)
    batch, seq, width = 4, 5, 3
    mask = tf.constant((np.arange(seq)[None] < np.array(lengths)[:, None]).astype("int32"))
    real, index = real_tokens.positions(mask)
    expected_real = np.flatnonzero(mask.numpy().reshape(-1))
    np.testing.assert_array_equal(real.numpy(), expected_real)
    cells = tf.cast(tf.constant(rng.normal(size=(batch * seq, width))), dtype)
    tokens = tf.cast(tf.constant(rng.normal(size=(len(expected_real), width))), dtype)

    packed, packed_grad = gradient(lambda x: real_tokens.pack(x, real, index), cells, tokens)
    reference, reference_grad = gradient(lambda x: tf.gather(x, expected_real), cells, tokens)
    np.testing.assert_array_equal(packed.numpy(), reference.numpy())
    np.testing.assert_array_equal(packed_grad.numpy(), reference_grad.numpy())  # zeros at padding

    unpacked, unpacked_grad = gradient(lambda x: real_tokens.unpack(x, real, index), tokens, cells)
    scattered, scattered_grad = gradient(
        lambda x: tf.scatter_nd(expected_real[:, None], x, (batch * seq, width)), tokens, cells)
    np.testing.assert_array_equal(unpacked.numpy(), scattered.numpy())  # zeros at padding
    np.testing.assert_array_equal(unpacked_grad.numpy(), scattered_grad.numpy())


def test_unpack_in_a_graph_with_an_unknown_token_count():
    @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), tf.TensorSpec([None, 2], tf.float32)])
    def round_trip(mask, tokens):
        real, index = real_tokens.positions(mask)
        return real_tokens.pack(real_tokens.unpack(tokens, real, index), real, index)

    tokens = tf.constant(np.arange(12, dtype="float32").reshape(6, 2))
    mask = tf.constant([[1, 1, 0], [1, 1, 1], [1, 0, 0]])
    np.testing.assert_array_equal(round_trip(mask, tokens).numpy(), tokens.numpy())
