import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone
from tests.conftest import random_inputs
from tests.helpers import (
    assert_config_round_trip,
    assert_fit_one_step,
    assert_mixed_precision,
    assert_saved_model_equal,
)
from references import numpy_bert
from tests.models.randomize import randomize_weights


def _backbone(tiny_config, **kwargs):
    config = dict(tiny_config, dropout=0.0)
    config.update(kwargs)
    return BertBackbone(**config)


@pytest.mark.parametrize("activation", ["gelu", "gelu_approximate"])
def test_matches_numpy_reference(tiny_config, activation):
    model = _backbone(tiny_config, activation=activation)
    randomize_weights(model, seed=2, scale=0.3)
    x = random_inputs(batch=3, seq=9, pad_from=[9, 5, 1])
    out = model(x)
    seq, pooled, layers = numpy_bert.bert(
        x, numpy_bert.backbone_weights(model), 2, 2, approximate=activation == "gelu_approximate"
    )
    np.testing.assert_allclose(np.array(out["sequence_output"]), seq, atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(np.array(out["pooled_output"]), pooled, atol=1e-5, rtol=1e-5)
    assert len(out["encoder_outputs"]) == 3
    for got, want in zip(out["encoder_outputs"], layers):
        np.testing.assert_allclose(np.array(got), want, atol=1e-5, rtol=1e-5)


def test_causal_backbone_matches_numpy_reference(tiny_config):
    model = _backbone(tiny_config, causal=True)
    randomize_weights(model, seed=4, scale=0.3)
    x = random_inputs(seq=7)
    seq, _, _ = numpy_bert.bert(x, numpy_bert.backbone_weights(model), 2, 2, causal=True)
    np.testing.assert_allclose(np.array(model(x)["sequence_output"]), seq, atol=1e-5, rtol=1e-5)


def test_padding_leaves_real_positions_unchanged(tiny_config):
    model = _backbone(tiny_config)
    randomize_weights(model, seed=5, scale=0.3)
    short = random_inputs(batch=1, seq=6)
    long = {k: np.pad(v, ((0, 0), (0, 10))) for k, v in short.items()}
    long["token_ids"][:, 6:] = 3  # padding ids that are not [PAD] must not leak either
    a, b = model(short), model(long)
    np.testing.assert_allclose(np.array(b["sequence_output"])[:, :6], np.array(a["sequence_output"]), atol=1e-6)
    np.testing.assert_allclose(np.array(b["pooled_output"]), np.array(a["pooled_output"]), atol=1e-6)


def test_variable_sequence_length_and_limit(tiny_config):
    model = _backbone(tiny_config)
    for seq in (1, 5, 24):
        assert model(random_inputs(seq=seq))["sequence_output"].shape == (2, seq, 16)
    with pytest.raises(ValueError, match="max_sequence_length=24"):
        model(random_inputs(seq=25))


def test_config_round_trip(tiny_config):
    model = BertBackbone(**tiny_config, activation="gelu_approximate", causal=True, dropout=0.2)
    clone = assert_config_round_trip(model)
    assert clone.count_params() == model.count_params()


def test_mixed_policy_survives_config_and_saving(tiny_config, tmp_path):
    model = BertBackbone(**tiny_config, dtype="mixed_bfloat16")
    clone = BertBackbone.from_config(model.get_config())
    assert clone.dtype_policy.name == "mixed_bfloat16"
    assert clone.transformer_layers[0].dtype_policy.name == "mixed_bfloat16"
    model.save(str(tmp_path / "m.keras"))
    restored = keras.saving.load_model(str(tmp_path / "m.keras"))
    assert restored.dtype_policy.name == "mixed_bfloat16"
    assert restored(random_inputs())["sequence_output"].dtype == "bfloat16"


def test_save_and_load_in_safe_mode(tiny_config, tmp_path):
    model = _backbone(tiny_config)
    randomize_weights(model, seed=6, scale=0.3)
    assert_saved_model_equal(model, random_inputs(pad_from=[8, 3]), tmp_path)


def test_fit_one_step(tiny_config):
    backbone = BertBackbone(**tiny_config)
    x = random_inputs(batch=4, seq=8)
    pooled = backbone(backbone.input)["pooled_output"]
    logits = keras.layers.Dense(2)(pooled)
    model = keras.Model(backbone.input, logits)
    assert_fit_one_step(model, x, np.array([0, 1, 1, 0]), loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


def test_dropout_is_active_only_in_training(tiny_config):
    model = BertBackbone(**dict(tiny_config, dropout=0.5))
    x = random_inputs()
    a = np.array(model(x, training=False)["sequence_output"])
    np.testing.assert_array_equal(a, np.array(model(x, training=False)["sequence_output"]))
    assert not np.allclose(a, np.array(model(x, training=True)["sequence_output"]))


def test_mixed_precision(tiny_config):
    x = random_inputs(pad_from=[8, 4])
    assert_mixed_precision(lambda policy: BertBackbone(**tiny_config, dtype=policy), x)
    ref = _backbone(tiny_config)
    bf16 = _backbone(tiny_config, dtype="mixed_bfloat16")
    bf16.set_weights(ref.get_weights())
    got = np.array(keras.ops.cast(bf16(x)["sequence_output"], "float32"))
    np.testing.assert_allclose(got, np.array(ref(x)["sequence_output"]), atol=0.1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_heads=3), "hidden_dim=16, num_heads=3"),
        (dict(num_layers=0), "num_layers=0"),
        (dict(activation="relu"), "activation='relu'"),
        (dict(vocabulary_size=-1), "vocabulary_size=-1"),
    ],
)
def test_bad_arguments_are_named(tiny_config, kwargs, match):
    with pytest.raises(ValueError, match=match):
        BertBackbone(**dict(tiny_config, **kwargs))


def test_minus_one_padding_is_refused_in_calls_and_predict(tiny_config):
    # R51 (issue 21 item 7): -1 used to embed the last word piece as if it were a word.
    model = _backbone(tiny_config)
    x = random_inputs(pad_from=[8, 5])
    expected = np.array(model(x)["pooled_output"])
    np.testing.assert_allclose(model.predict(x, verbose=0)["pooled_output"], expected, atol=1e-5)
    x["token_ids"][1, 5:] = -1
    with pytest.raises(ValueError, match=r"token_ids\[1, 5\]=-1 \(3 of 16 ids out of range\)"):
        model(x)
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"vocabulary_size=50\)"):
        model.predict(x, verbose=0)
