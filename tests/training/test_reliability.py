"""R6–R8 of RELIABILITY.md: NaN stops naming the step, fp16 inf gradient skipped, clipping holds."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.training.callbacks import NonFiniteError
from keras_bert_zoo.training.resumable_fit import fit_resumable
from tests.training import tiny


def _dataset_fn(index, count, batch):
    return tiny.synthetic_dataset(batch, shard=(index, count))


def _batch(size=4):
    return next(iter(tiny.synthetic_dataset(size)))


class _PoisonAt(keras.callbacks.Callback):
    """Sets the word embeddings to NaN just before the run's `batch`-th step (0-based)."""

    def __init__(self, batch):
        super().__init__()
        self.batch = batch

    def on_train_batch_begin(self, batch, logs=None):
        if batch == self.batch:
            table = self.model.backbone.token_embedding.embeddings
            table.assign(np.full(table.shape, np.nan, "float32"))


def test_r6_nan_weight_stops_naming_step_and_keeps_finite_checkpoint(tmp_path):
    directory = str(tmp_path / "ckpt")
    model = tiny.make_pretrainer()
    with pytest.raises(NonFiniteError, match="at step 5"):
        fit_resumable(model, _dataset_fn, 4, 8, directory, save_every=2, verbose=0,
                      callbacks=[_PoisonAt(4)])
    assert os.path.isdir(directory)
    latest = tf.train.latest_checkpoint(directory)
    assert latest.endswith("ckpt-4")
    reader = tf.train.load_checkpoint(latest)
    floats = [k for k, d in reader.get_variable_to_dtype_map().items() if d.is_floating]
    assert len(floats) > 20
    for key in floats:
        assert np.all(np.isfinite(reader.get_tensor(key))), key


def test_r6_non_finite_weight_with_finite_loss_is_caught(tmp_path):
    """A NaN in a weight the loss does not see this step (an unused row) still stops."""

    class PoisonRow(keras.callbacks.Callback):
        def on_train_batch_begin(self, batch, logs=None):
            if batch == 2:
                table = self.model.backbone.token_embedding.embeddings
                value = np.array(table)
                value[0, 0] = np.inf  # id 0 is padding: masked, but still a weight
                table.assign(value)

    model = tiny.make_pretrainer(dropout=0.0)
    with pytest.raises(NonFiniteError, match="step 3"):
        fit_resumable(model, _dataset_fn, 4, 6, str(tmp_path / "c"), save_every=2, verbose=0,
                      callbacks=[PoisonRow()])
    assert tf.train.latest_checkpoint(str(tmp_path / "c")).endswith("ckpt-2")


def test_r7_fp16_inf_gradient_is_skipped_and_loss_scale_halves():
    model = tiny.make_pretrainer(dtype="mixed_float16")
    optimizer = model.optimizer
    assert isinstance(optimizer, keras.optimizers.LossScaleOptimizer)
    # LayerNorm and the attention softmax run in float32 under mixed precision.
    norms = [l for l in model._flatten_layers() if isinstance(l, keras.layers.LayerNormalization)]
    assert norms and all(l.compute_dtype == "float32" for l in norms)
    x, y = _batch()
    model.train_on_batch(x, y)  # builds everything with a normal step
    before = [np.array(v) for v in model.trainable_weights]
    slots = [np.array(v) for v in optimizer.inner_optimizer.variables]
    # A scale of 2**60 overflows float16 in the backward pass: every gradient is inf.
    optimizer.dynamic_scale.assign(2.0**60)
    model.train_on_batch(x, y)
    assert float(optimizer.dynamic_scale) == 2.0**59
    assert all(np.array_equal(b, np.array(v)) for b, v in zip(before, model.trainable_weights))
    assert all(np.array_equal(s, np.array(v)) for s, v in zip(slots, optimizer.inner_optimizer.variables))
    # Training continues at a sane scale.
    optimizer.dynamic_scale.assign(2.0**10)
    loss = model.train_on_batch(x, y)
    loss = loss[0] if isinstance(loss, (list, tuple)) else loss
    assert np.isfinite(loss)
    changed = [not np.array_equal(b, np.array(v)) for b, v in zip(before, model.trainable_weights)]
    assert sum(changed) > len(changed) // 2
    assert all(np.all(np.isfinite(np.array(v))) for v in model.trainable_weights)


def _raw_gradient_norm(model, x, y):
    with tf.GradientTape() as tape:
        y_pred = model(x, training=False)
        loss = model.compute_loss(x=x, y=y, y_pred=y_pred, training=False)
    grads = tape.gradient(loss, [v.value for v in model.trainable_variables])
    return float(tf.linalg.global_norm([g for g in grads if g is not None]))


def test_r8_exploding_loss_applied_gradient_norm_is_clipped():
    keras.utils.set_random_seed(0)
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

    model = BertPretrainer(BertBackbone(**dict(tiny.TINY, dropout=0.0)))
    model.compile()  # the default pretraining optimizer
    x, y = _batch()
    # Explode the loss: huge word embeddings give huge tied logits.
    table = model.backbone.token_embedding.embeddings
    table.assign(np.array(table) * 1e4)
    raw = _raw_gradient_norm(model, x, y)
    assert raw > 1e3, raw  # the injected failure is real

    optimizer = model.optimizer
    applied_sq = tf.Variable(0.0, dtype=tf.float64)
    original = optimizer.update_step

    def recording_update_step(gradient, variable, learning_rate):
        applied_sq.assign_add(tf.reduce_sum(tf.square(tf.cast(gradient, tf.float64))))
        return original(gradient, variable, learning_rate)

    optimizer.update_step = recording_update_step
    model.train_on_batch(x, y)
    applied = float(np.sqrt(applied_sq.numpy()))
    assert 0.5 < applied <= 1.0 + 1e-5, applied
