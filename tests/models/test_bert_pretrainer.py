"""BertPretrainer: losses and metrics against NumPy, ablations, saving, precision, phases."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo.training.optimizer import BertAdamW
from tests import helpers
from tests.conftest import TINY_BACKBONE, random_inputs

BATCH, SEQ, PREDICTIONS, VOCAB = 4, 10, 3, TINY_BACKBONE["vocabulary_size"]


def make_batch(seq=SEQ, seed=0):
    """(x, y) in the shared pretraining format; the last prediction of rows 0-1 is padding."""
    rng = np.random.default_rng(seed)
    x = random_inputs(BATCH, seq, VOCAB, seed=seed, pad_from=[seq - 2, seq, seq - 1, seq])
    x["mask_positions"] = rng.integers(1, seq - 2, (BATCH, PREDICTIONS)).astype("int32")
    weights = np.ones((BATCH, PREDICTIONS), "float32")
    weights[:2, -1] = 0.0
    x["mask_positions"][:2, -1] = 0
    y = {
        "mlm_ids": rng.integers(1, VOCAB, (BATCH, PREDICTIONS)).astype("int32"),
        "mlm_weights": weights,
        "nsp_labels": np.array([0, 1, 1, 0], "int32"),
    }
    return x, y


def build(nsp=True, dtype=None, dropout=0.0, **kwargs):
    backbone = BertBackbone(**TINY_BACKBONE, dropout=dropout, dtype=dtype, **kwargs)
    return BertPretrainer(backbone, nsp=nsp)


def log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


def reference_losses(y, out):
    """`run_pretraining.py`'s losses, in NumPy float64."""
    logp = log_softmax(np.asarray(out["mlm_logits"], "float64"))
    per = -np.take_along_axis(logp, y["mlm_ids"][..., None], -1)[..., 0]
    mlm = (per * y["mlm_weights"]).sum() / (y["mlm_weights"].sum() + 1e-5)
    nsp_logp = log_softmax(np.asarray(out["nsp_logits"], "float64"))
    nsp = -nsp_logp[np.arange(BATCH), y["nsp_labels"]].mean()
    return mlm, nsp


def test_outputs_loss_and_metrics_match_numpy():
    model = build()
    x, y = make_batch()
    out = keras.tree.map_structure(np.asarray, model(x, training=False))
    assert set(out) == {"mlm_logits", "nsp_logits"}
    assert out["mlm_logits"].shape == (BATCH, PREDICTIONS, VOCAB)
    # The head gathers the masked positions: logits equal the head on the full sequence.
    backbone_inputs = {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    sequence = model.backbone(backbone_inputs, training=False)["sequence_output"]
    full = np.asarray(model.mlm_head(sequence))  # (batch, seq, vocab)
    np.testing.assert_allclose(
        out["mlm_logits"], np.take_along_axis(full, x["mask_positions"][..., None], 1), atol=1e-5
    )
    mlm, nsp = reference_losses(y, out)
    loss = float(model.compute_loss(x, y, model(x, training=False), training=False))
    np.testing.assert_allclose(loss, mlm + nsp, rtol=1e-5)
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    result = model.evaluate(x, y, batch_size=BATCH, verbose=0, return_dict=True)
    hits = out["mlm_logits"].argmax(-1) == y["mlm_ids"]
    np.testing.assert_allclose(result["mlm_accuracy"], (hits * y["mlm_weights"]).sum() / 10, atol=1e-6)
    np.testing.assert_allclose(result["mlm_loss"], mlm, rtol=1e-5)
    np.testing.assert_allclose(result["nsp_loss"], nsp, rtol=1e-5)
    nsp_hits = (out["nsp_logits"].argmax(-1) == y["nsp_labels"]).mean()
    np.testing.assert_allclose(result["nsp_accuracy"], nsp_hits, atol=1e-6)
    np.testing.assert_allclose(result["loss"], mlm + nsp, rtol=1e-5)


def test_padding_predictions_do_not_count():
    model = build()
    x, y = make_batch()
    out = model(x, training=False)
    base = float(model.compute_loss(x, y, out))
    y2 = dict(y, mlm_ids=y["mlm_ids"].copy())
    y2["mlm_ids"][:2, -1] = (y["mlm_ids"][:2, -1] + 7) % VOCAB  # only weight-0 targets change
    assert float(model.compute_loss(x, y2, out)) == pytest.approx(base, abs=1e-7)
    y2["mlm_ids"][2, 0] = (y["mlm_ids"][2, 0] + 7) % VOCAB  # a real target changes
    assert float(model.compute_loss(x, y2, out)) != pytest.approx(base, abs=1e-6)


def test_no_nsp_variant():
    model = build(nsp=False)
    x, y = make_batch()
    out = model(x, training=False)
    assert set(out) == {"mlm_logits"} and model.nsp_head is None
    mlm, _ = reference_losses(y, dict(out, nsp_logits=np.zeros((BATCH, 2))))
    loss = float(model.compute_loss(x, {k: y[k] for k in ("mlm_ids", "mlm_weights")}, out))
    np.testing.assert_allclose(loss, mlm, rtol=1e-5)


def test_left_to_right_variant_is_causal_with_next_token_loss():
    backbone = BertBackbone(**TINY_BACKBONE, dropout=0.0, causal=True)
    model = BertPretrainer(backbone, nsp=False, objective="ltr")
    x, _ = make_batch()
    del x["mask_positions"]
    out = np.asarray(model(x, training=False)["lm_logits"], "float64")
    assert out.shape == (BATCH, SEQ, VOCAB)
    changed = {k: v.copy() for k, v in x.items()}
    changed["token_ids"][:, 5] = (changed["token_ids"][:, 5] + 1) % VOCAB
    out2 = np.asarray(model(changed, training=False)["lm_logits"])
    np.testing.assert_allclose(out2[:, :5], out[:, :5], atol=1e-5)  # the past does not see the future
    assert np.abs(out2[:, 5:] - out[:, 5:]).max() > 1e-4
    per = -np.take_along_axis(log_softmax(out[:, :-1]), x["token_ids"][:, 1:, None], -1)[..., 0]
    weights = x["padding_mask"][:, 1:]
    expected = (per * weights).sum() / (weights.sum() + 1e-5)
    np.testing.assert_allclose(float(model.compute_loss(x, None, model(x))), expected, rtol=1e-5)
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    history = model.fit(x, None, batch_size=BATCH, epochs=1, verbose=0).history
    assert set(history) == {"loss", "lm_loss", "lm_accuracy"}
    helpers.assert_config_round_trip(model)


def test_config_round_trip_and_keras_file_with_optimizer_state(tmp_path):
    model = build()
    helpers.assert_config_round_trip(model)
    x, y = make_batch()
    model.compile(warmup_steps=0, total_steps=10)
    assert isinstance(model.optimizer, BertAdamW)
    helpers.assert_fit_one_step(model, x, y)
    restored = helpers.assert_saved_model_equal(model, x, tmp_path)
    assert int(restored.optimizer.iterations) == 1
    # Training continues identically from the file (optimizer slots and schedule restored).
    for m in (model, restored):
        m.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    helpers.assert_all_close(restored.get_weights(), model.get_weights(), atol=1e-6)


def test_mixed_precision_policies():
    x, y = make_batch()
    helpers.assert_mixed_precision(lambda policy: build(dtype=policy), x)
    model = build(dtype="mixed_float16")
    out = model(x)
    assert keras.backend.standardize_dtype(out["mlm_logits"].dtype) == "float32"
    assert keras.backend.standardize_dtype(model.compute_loss(x, y, out).dtype) == "float32"
    model.compile(warmup_steps=0, total_steps=10)
    # Keras wraps the optimizer in dynamic loss scaling under mixed_float16.
    assert isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert isinstance(model.optimizer.inner_optimizer, BertAdamW)
    helpers.assert_fit_one_step(model, x, y)
    bf16 = build(dtype="mixed_bfloat16")
    bf16.compile(warmup_steps=1, total_steps=10)
    assert isinstance(bf16.optimizer, BertAdamW)


def test_sequence_length_switch_between_phases_shares_positions():
    """Paper: 90% of steps at 128 then 10% at 512; here phase 1 at 8, phase 2 at 16."""
    model = build()
    model.compile(optimizer=keras.optimizers.SGD(0.5))  # no decay: untouched rows stay put
    positions = model.backbone.embeddings.position_embeddings
    start = np.array(positions)
    x, y = make_batch(seq=8)
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    phase1 = np.array(positions)
    assert np.abs(phase1[:8] - start[:8]).max() > 0
    np.testing.assert_array_equal(phase1[8:], start[8:])
    x, y = make_batch(seq=16, seed=1)
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    phase2 = np.array(positions)
    assert np.abs(phase2[8:16] - phase1[8:16]).max() > 0
    np.testing.assert_array_equal(phase2[16:], start[16:])


def test_from_preset_builds_variants():
    model = BertPretrainer.from_preset(
        "bert_tiny_en_uncased", load_weights=False, nsp=False, objective="ltr", num_layers=1
    )
    assert model.backbone.causal and model.backbone.num_layers == 1
    assert model.backbone.hidden_dim == 128 and model.nsp_head is None


def test_bad_arguments_raise_clear_errors():
    causal = BertBackbone(**TINY_BACKBONE, causal=True)
    with pytest.raises(ValueError, match="objective"):
        BertPretrainer(causal, nsp=False, objective="clm")
    with pytest.raises(ValueError, match="nsp=False"):
        BertPretrainer(causal, nsp=True, objective="ltr")
    with pytest.raises(ValueError, match="causal=True"):
        BertPretrainer(BertBackbone(**TINY_BACKBONE), nsp=False, objective="ltr")
    with pytest.raises(ValueError, match="causal=False"):
        BertPretrainer(causal)
    model = build()
    with pytest.raises(ValueError, match="loss"):
        model.compile(loss="mse")
    x, y = make_batch()
    with pytest.raises(ValueError, match="nsp_labels"):
        model.compute_loss(x, {"mlm_ids": y["mlm_ids"], "mlm_weights": y["mlm_weights"]}, model(x))
