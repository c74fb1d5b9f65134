import keras
import numpy as np
import pytest

from keras_bert_zoo.layers import TransformerEncoder
from keras_bert_zoo.utils.keras_internals import flatten_layers
from tests.helpers import assert_config_round_trip, assert_mixed_precision
from references import numpy_bert
from tests.models.randomize import randomize_weights


def _layer(**kwargs):
    layer = TransformerEncoder(num_heads=2, intermediate_dim=24, dropout=0.0, **kwargs)
    layer.build((None, None, 16))
    randomize_weights(layer, seed=1)
    return layer


def _masked_batch(seed):
    """3 rows of 7 positions, width 16: one full, one with 4 real tokens, one with 1."""
    x = np.random.default_rng(seed).normal(size=(3, 7, 16)).astype("float32")
    mask = np.ones((3, 7), "int32")
    mask[1, 4:] = 0
    mask[2, 1:] = 0
    return x, mask


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate"])
@pytest.mark.parametrize("causal", [False, True])
def test_matches_numpy_reference(activation, causal):
    layer = _layer(activation=activation, causal=causal)
    x, mask = _masked_batch(seed=0)
    got = np.array(layer(x, padding_mask=mask))
    w = numpy_bert.layer_weights(layer, "l")
    want = numpy_bert.encoder_layer(
        x.astype(np.float64), mask, w, "l", 2, approximate=activation == "gelu_approximate", causal=causal
    )
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)


def test_gelu_variants_differ():
    # Guards against the activation argument being ignored.
    x = np.random.default_rng(0).normal(size=(1, 4, 16)).astype("float32")
    exact, approx = _layer(activation="gelu"), _layer(activation="gelu_approximate")
    assert not np.allclose(np.array(exact(x)), np.array(approx(x)), atol=1e-7)


def test_padding_does_not_change_real_positions():
    layer = _layer()
    x = np.random.default_rng(0).normal(size=(1, 5, 16)).astype("float32")
    short = np.array(layer(x, padding_mask=np.ones((1, 5), "int32")))
    padded_x = np.concatenate([x, np.full((1, 3, 16), 7.0, "float32")], axis=1)
    mask = np.array([[1] * 5 + [0] * 3], "int32")
    long = np.array(layer(padded_x, padding_mask=mask))
    np.testing.assert_allclose(long[:, :5], short, atol=1e-6)


def test_causal_ignores_future_tokens():
    layer = _layer(causal=True)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 6, 16)).astype("float32")
    y = x.copy()
    y[:, 4:] = rng.normal(size=(1, 2, 16))
    a, b = np.array(layer(x)), np.array(layer(y))
    np.testing.assert_allclose(a[:, :4], b[:, :4], atol=1e-6)
    assert not np.allclose(a[:, 4:], b[:, 4:])


def test_config_round_trip():
    layer = TransformerEncoder(num_heads=4, intermediate_dim=64, dropout=0.2, activation="gelu_approximate", causal=True)
    clone = assert_config_round_trip(layer)
    assert clone.causal and clone.activation == "gelu_approximate" and clone.attention_dropout == 0.2


def test_mixed_precision_keeps_layer_norm_and_softmax_in_float32():
    x = np.random.default_rng(0).normal(size=(2, 5, 16)).astype("float32")

    def build(policy):
        layer = TransformerEncoder(num_heads=2, intermediate_dim=24, dtype=policy)
        layer.build((None, None, 16))
        return layer

    assert_mixed_precision(build, x)
    layer = build("mixed_float16")
    assert layer.attention_layer_norm.compute_dtype == "float32"
    assert layer.output_layer_norm.compute_dtype == "float32"
    ref = build("float32")
    layer.set_weights(ref.get_weights())
    got = np.array(keras.ops.cast(layer(x), "float32"))
    np.testing.assert_allclose(got, np.array(ref(x)), atol=2e-2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_heads=2, intermediate_dim=8, activation="relu"), "activation"),
        (dict(num_heads=2, intermediate_dim=0), "intermediate_dim"),
        (dict(num_heads=0, intermediate_dim=8), "num_heads"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TransformerEncoder(**kwargs)


def test_heads_must_divide_width():
    layer = TransformerEncoder(num_heads=3, intermediate_dim=8)
    with pytest.raises(ValueError, match="hidden_dim=16, num_heads=3"):
        layer.build((None, None, 16))


def test_layers_create_their_dense_layers_at_full_width_in_build():
    # Issue 19 item 7: no Dense(1) whose `units` is patched later.
    layer = TransformerEncoder(num_heads=2, intermediate_dim=24)
    dense = [s for s in flatten_layers(layer) if isinstance(s, keras.layers.Dense)]
    assert [d.units for d in dense] == [24]  # only the intermediate width is known before build
    layer.build((None, None, 16))
    shapes = {
        "query": (16, 16), "key": (16, 16), "value": (16, 16),
        "attention_output": (16, 16), "intermediate": (16, 24), "output": (24, 16),
    }
    for name, shape in shapes.items():
        (found,) = [d for d in flatten_layers(layer) if d.name == name]
        assert tuple(found.kernel.shape) == shape and found.units == shape[1]
    # R50: Q, K and V shared one seeded initializer and started equal.
    attention = layer.attention
    q, k, v = (np.array(d.kernel) for d in (attention.query_dense, attention.key_dense, attention.value_dense))
    assert not np.array_equal(q, k) and not np.array_equal(k, v) and not np.array_equal(q, v)
    for kernel in (q, k, v):
        assert 0.015 < kernel.std() < 0.025  # each the original's truncated normal(0.02)


def _skipping(layer, skip_padding):
    """A layer built as `layer` but with `skip_padding`, with its weights: the A/B of the two paths."""
    twin = TransformerEncoder.from_config({**layer.get_config(), "skip_padding": skip_padding})
    twin.build((None, None, 16))
    twin.set_weights(layer.get_weights())
    return twin


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "mixed_bfloat16"])
def test_skip_padding_matches_the_padded_call_on_real_tokens(causal, dtype):
    # The inference path of a Task's layers: dense layers on the real tokens only.
    layer = _layer(causal=causal, dtype=dtype)
    x, mask = _masked_batch(seed=3)
    want = np.array(keras.ops.cast(layer(x, padding_mask=mask, training=False), "float32"))
    skipping = _skipping(layer, "inference")
    got = np.array(keras.ops.cast(skipping(x, padding_mask=mask, training=False), "float32"))
    real = mask.astype(bool)
    tolerance = 1e-5 if dtype == "float32" else 2e-2
    np.testing.assert_allclose(got[real], want[real], atol=tolerance, rtol=tolerance)
    assert not np.allclose(want[~real], 0.0) and np.all(got[~real] == 0.0)
    # Training, a call that does not say `training=False`, and a call without a mask keep
    # the padded computation.
    for training in (True, None):
        np.testing.assert_array_equal(
            np.array(keras.ops.cast(skipping(x, padding_mask=mask, training=training), "float32")), want)
    assert np.all(np.array(keras.ops.cast(skipping(x, training=False), "float32"))[~real] != 0.0)


@pytest.mark.parametrize("causal", [False, True])
def test_skip_padding_attends_each_row_alone_under_any_mask_in_a_graph(causal):
    # One trace with unknown batch and length (as `predict` traces). Masks with holes, a row
    # without any real token, rows longer and shorter than the others: the padded call's outputs
    # at the real positions.
    import tensorflow as tf

    layer = _layer(causal=causal)
    rng = np.random.default_rng(5)
    x = rng.normal(size=(4, 9, 16)).astype("float32")
    mask = np.ones((4, 9), "int32")
    mask[0, [1, 4, 5]] = 0  # holes
    mask[1, :] = 0  # no real token
    mask[2, 6:] = 0
    mask[3, 0] = 0  # padding first
    want = np.array(layer(x, padding_mask=mask, training=False))
    skipping = _skipping(layer, "inference")
    spec = (tf.TensorSpec([None, None, 16], tf.float32), tf.TensorSpec([None, None], tf.int32))
    forward = tf.function(lambda x, m: skipping(x, padding_mask=m, training=False), input_signature=spec)
    got = forward(x, mask).numpy()
    real = mask.astype(bool)
    np.testing.assert_allclose(got[real], want[real], atol=1e-5, rtol=1e-5)
    assert np.all(got[~real] == 0.0)
    # Another batch and length through the same trace; one row alone equals it in a batch.
    short = forward(x[2:3, :6], mask[2:3, :6]).numpy()
    np.testing.assert_allclose(short[0], got[2, :6], atol=1e-5, rtol=1e-5)
    assert forward.experimental_get_tracing_count() == 1


@pytest.mark.parametrize("causal", [False, True])
def test_skip_padding_in_training_has_the_padded_calls_gradients(causal):
    # `fit` on the real tokens (a classifier's): without dropout the same outputs at the real
    # positions and the same gradients, for the weights and for the input.
    import tensorflow as tf

    padded = _layer(causal=causal)
    x, mask = _masked_batch(seed=4)
    real = mask.astype(bool)
    weights = np.random.default_rng(5).normal(size=x.shape).astype("float32") * real[..., None]

    def outputs_and_gradients(layer):
        inputs = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            out = layer(inputs, padding_mask=mask, training=True)
            loss = tf.reduce_sum(out * weights)  # reads the real positions only
        grads = tape.gradient(loss, [inputs] + layer.trainable_variables)
        return np.array(out), [np.array(tf.convert_to_tensor(g)) for g in grads]

    padded_out, padded_grads = outputs_and_gradients(padded)
    real_out, real_grads = outputs_and_gradients(_skipping(padded, "always"))
    np.testing.assert_allclose(real_out[real], padded_out[real], atol=1e-5, rtol=1e-5)
    assert np.all(real_out[~real] == 0.0) and not np.allclose(padded_out[~real], 0.0)
    assert len(real_grads) == 1 + 16  # the input and every weight
    for got, want in zip(real_grads, padded_grads):
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-4)
    assert np.all(real_grads[0][~real] == 0.0)  # padded positions get no gradient


def test_skip_padding_in_training_draws_dropout_on_the_real_tokens():
    layer = TransformerEncoder(num_heads=2, intermediate_dim=24, dropout=0.5, attention_dropout=0.0,
                               skip_padding="always")
    layer.build((None, None, 16))
    randomize_weights(layer, seed=1)
    seen = []
    for dropout in (layer.attention_dropout_layer, layer.output_dropout_layer):
        call = dropout.call
        dropout.call = lambda inputs, training=None, call=call: seen.append(
            (tuple(inputs.shape), training)) or call(inputs, training=training)
    x, mask = _masked_batch(seed=6)
    real = mask.astype(bool)
    inference = np.array(layer(x, padding_mask=mask, training=False))
    first, second = (np.array(layer(x, padding_mask=mask, training=True)) for _ in range(2))
    tokens = int(mask.sum())
    assert seen[2:] == [((tokens, 16), True)] * 4  # both dropouts, on the (real tokens, hidden) matrix
    assert not np.allclose(first[real], inference[real]) and not np.allclose(first[real], second[real])
    assert np.all(first[~real] == 0.0)


def test_skip_padding_is_a_constructor_argument_in_the_config():
    assert TransformerEncoder(num_heads=2, intermediate_dim=8).skip_padding is None  # every position until chosen
    layer = TransformerEncoder(num_heads=2, intermediate_dim=8, skip_padding="inference")
    assert assert_config_round_trip(layer).skip_padding == "inference"
    with pytest.raises(ValueError, match="skip_padding"):
        TransformerEncoder(num_heads=2, intermediate_dim=8, skip_padding=True)


@pytest.mark.parametrize("skip_padding", ["inference", "always"])
def test_attention_one_sequence_at_a_time_gives_the_batched_outputs_in_a_graph(skip_padding):
    # `per_sequence_above`: on the real-token path, rows longer than it attend one at a time at inference
    # (packed rows); shorter ones in one batched call. One trace with unknown length takes both sides of
    # the length test (`ops.cond`); the outputs are the batched call's.
    import tensorflow as tf

    layer = _layer(causal=False)
    x, mask = _masked_batch(seed=6)
    batched = _skipping(layer, skip_padding)
    per_sequence = TransformerEncoder.from_config(
        {**layer.get_config(), "skip_padding": skip_padding, "per_sequence_above": 5})
    assert assert_config_round_trip(per_sequence).per_sequence_above == 5
    per_sequence.build((None, None, 16))
    per_sequence.set_weights(layer.get_weights())
    spec = (tf.TensorSpec([None, None, 16], tf.float32), tf.TensorSpec([None, None], tf.int32))
    forward = tf.function(lambda x, m: per_sequence(x, padding_mask=m, training=False), input_signature=spec)
    for length in (7, 4):  # above the threshold (one at a time), then at or below it (batched)
        want = np.array(batched(x[:, :length], padding_mask=mask[:, :length], training=False))
        got = forward(x[:, :length], mask[:, :length]).numpy()
        real = mask[:, :length].astype(bool)
        np.testing.assert_allclose(got[real], want[real], atol=1e-5, rtol=1e-5)
    assert forward.experimental_get_tracing_count() == 1
    with pytest.raises(ValueError, match="per_sequence_above"):
        TransformerEncoder(num_heads=2, intermediate_dim=8, per_sequence_above=-1)
    # The padded path attends the whole batch at once: a threshold there would do nothing, so it is refused.
    with pytest.raises(ValueError, match="real-token path only"):
        TransformerEncoder(num_heads=2, intermediate_dim=8, skip_padding="never", per_sequence_above=128)
