"""The training attention that recomputes its probabilities and the GELU that keeps only its input:
the values and gradients of the composites autodiff would differentiate, and the dropout mask
Keras' Dropout would draw."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.layers import attention_training
from keras_bert_zoo.layers.bert_attention import BertAttention
from keras_bert_zoo.layers.transformer_encoder import exact_gelu, exact_gelu_reference

pytestmark = pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.custom_gradient")


def values_and_gradients(function, inputs, weights):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        out = function(*inputs)
        loss = tf.reduce_sum(out * weights)
    return out, tape.gradient(loss, inputs)


@pytest.mark.parametrize("rate", [0.0, 0.3])
@pytest.mark.parametrize("causal", [False, True])
def test_attention_context_has_the_composites_values_and_gradients(rate, causal):
    rng = np.random.default_rng(0)
    b, h, s, d = 3, 2, 7, 4
    q, k, v = (tf.constant(rng.normal(size=(b, h, s, d)), tf.float32) for _ in range(3))
    lengths = np.array([7, 4, 1])
    allowed = tf.constant(np.arange(s)[None, :] < lengths[:, None])[:, None, None, :]
    if causal:
        allowed = tf.logical_and(allowed, tf.constant(np.tril(np.ones((s, s), bool)))[None, None])
    keep = tf.constant(rng.random((b, h, s, s)) >= rate) if rate else None
    weights = tf.constant(rng.normal(size=(b, h, s, d)), tf.float32)

    def fused(q, k, v):
        return attention_training.attention_context(q, k, v, allowed, keep, rate)

    def composite(q, k, v):
        return attention_training.attention_context_reference(q, k, v, allowed, keep, rate)

    for run in (lambda f: f, tf.function):  # eager and in a graph, as fit runs it
        out, grads = values_and_gradients(run(fused), [q, k, v], weights)
        want, want_grads = values_and_gradients(run(composite), [q, k, v], weights)
        np.testing.assert_allclose(out.numpy(), want.numpy(), atol=1e-6)
        for got, expected in zip(grads, want_grads):
            assert np.abs(expected.numpy()).max() > 1e-3  # a gradient that is there
            np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=1e-5)


def test_the_training_attention_draws_the_mask_keras_dropout_draws():
    layer = BertAttention(num_heads=2, dropout=0.4)
    shape = (2, 2, 5, 5)
    generator = layer.dropout_layer.seed_generator
    start = generator.state.numpy()
    dropped = layer.dropout_layer(tf.ones(shape), training=True)
    generator.state.assign(start)
    keep = attention_training.keep_mask(shape, 0.4, generator, "float32")
    np.testing.assert_array_equal(keep.numpy(), dropped.numpy() != 0)
    assert 0 < keep.numpy().mean() < 1


def test_a_layer_trains_through_the_recomputing_attention_with_its_inference_values_without_dropout():
    layer = BertAttention(num_heads=2, dropout=0.0)
    rng = np.random.default_rng(1)
    x = tf.constant(rng.normal(size=(2, 6, 8)), tf.float32)
    mask = tf.constant([[1] * 6, [1] * 3 + [0] * 3])
    layer(x, padding_mask=mask)
    weights = tf.constant(rng.normal(size=(2, 6, 8)), tf.float32)
    grads = {}
    for training in (True, False):  # True: attention_context; False: the composite
        with tf.GradientTape() as tape:
            out = layer(x, padding_mask=mask, training=training)
            loss = tf.reduce_sum(out * weights)
        grads[training] = (out.numpy(), tape.gradient(loss, layer.trainable_weights))
    np.testing.assert_allclose(grads[True][0], grads[False][0], atol=1e-6)
    for got, want in zip(grads[True][1], grads[False][1]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)


def test_exact_gelu_has_the_composites_values_and_gradient():
    x = tf.constant(np.linspace(-6, 6, 241), tf.float32)
    weights = tf.constant(np.cos(np.arange(241)), tf.float32)
    out, (grad,) = values_and_gradients(exact_gelu, [x], weights)
    want, (want_grad,) = values_and_gradients(exact_gelu_reference, [x], weights)
    np.testing.assert_allclose(out.numpy(), want.numpy(), atol=1e-6)
    np.testing.assert_allclose(grad.numpy(), want_grad.numpy(), atol=1e-6)
