"""BertAdamW and LinearWarmupLinearDecay against a NumPy port of the original `optimization.py`."""

import json

import keras
import numpy as np
import pytest

from keras_bert_zoo.training.optimizer import BertAdamW, LinearWarmupLinearDecay


def reference_lr(step, peak, warmup, total, end=0.0):
    """`create_optimizer`: polynomial (power 1) decay from step 0, overridden during warmup."""
    decayed = (peak - end) * (1 - min(step, total) / total) + end
    if warmup and step < warmup:
        return peak * step / warmup
    return decayed


def reference_steps(params, grads_per_step, lrs, decay_mask, bias_correction=False, clip=1.0,
                    beta_1=0.9, beta_2=0.999):
    """The original AdamWeightDecayOptimizer (+ `clip_by_global_norm`), in float64."""
    params = [p.astype("float64") for p in params]
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    for t, (grads, lr) in enumerate(zip(grads_per_step, lrs), start=1):
        norm = np.sqrt(sum(np.sum(np.square(g)) for g in grads))
        grads = [g * clip / max(norm, clip) for g in grads]
        for i, g in enumerate(grads):
            m[i] = beta_1 * m[i] + (1 - beta_1) * g
            v[i] = beta_2 * v[i] + (1 - beta_2) * g * g
            m_hat, v_hat = m[i], v[i]
            if bias_correction:
                m_hat, v_hat = m[i] / (1 - beta_1**t), v[i] / (1 - beta_2**t)
            update = m_hat / (np.sqrt(v_hat) + 1e-6)
            if decay_mask[i]:
                update = update + 0.01 * params[i]
            params[i] = params[i] - lr * update
    return params


def _layers():
    """A Dense (kernel decays, bias does not) and a LayerNorm (excluded) with known values."""
    dense = keras.layers.Dense(3, name="dense")
    dense.build((None, 4))
    norm = keras.layers.LayerNormalization(name="layer_norm")
    norm.build((None, 3))
    rng = np.random.default_rng(0)
    variables = [dense.kernel, dense.bias, norm.gamma, norm.beta]
    for var in variables:
        var.assign(rng.normal(size=var.shape).astype("float32"))
    return variables


@pytest.mark.parametrize("bias_correction, path", [(False, "fused"), (False, "ops"), (True, "fused"), (True, "ops")])
def test_matches_original_update(bias_correction, path):
    # On TensorFlow the update runs in TF's fused Adam kernel (with bias correction through
    # β^t and a scaled ε), which takes 1 - β in float32: the original with β1, β2 rounded to float32
    # (1 - β2 is 0.99998713e-3, not 1e-3). The keras.ops path (every other backend) is exact.
    betas = dict(beta_1=1 - float(1 - np.float32(0.9)), beta_2=1 - float(1 - np.float32(0.999))) if (
        path == "fused") else {}
    variables = _layers()
    start = [np.array(v) for v in variables]
    rng = np.random.default_rng(1)
    # Large gradients, so global-norm clipping to 1.0 is active at every step.
    grads = [[rng.normal(scale=3.0, size=v.shape).astype("float32") for v in variables] for _ in range(5)]
    schedule = LinearWarmupLinearDecay(0.1, warmup_steps=2, total_steps=10)
    optimizer = BertAdamW(schedule, bias_correction=bias_correction)
    calls = []
    for name in ("_fused_tf_update_step", "_update_step_ops"):
        method = getattr(optimizer, name)
        setattr(optimizer, name, lambda *a, name=name, method=method: calls.append(name) or method(*a))
    if path == "ops":
        optimizer.update_step = optimizer._update_step_ops
    for step_grads in grads:
        optimizer.apply(step_grads, variables)
    assert set(calls) == {"_fused_tf_update_step" if path == "fused" else "_update_step_ops"}
    lrs = [reference_lr(step, 0.1, 2, 10) for step in range(5)]
    expected = reference_steps(start, grads, lrs, [True, False, False, False], bias_correction, **betas)
    for var, exp in zip(variables, expected):
        np.testing.assert_allclose(np.array(var), exp, rtol=2e-5, atol=2e-6)
    assert int(optimizer.iterations) == 5


def test_decay_excludes_layer_norm_and_bias():
    optimizer = BertAdamW()
    kernel, bias, gamma, beta = _layers()
    assert optimizer.use_weight_decay(kernel)
    assert not any(optimizer.use_weight_decay(v) for v in (bias, gamma, beta))
    # The original's own spelling of the LayerNorm scope is excluded as well.
    google = keras.layers.Dense(2, name="LayerNorm")
    google.build((None, 2))
    assert not optimizer.use_weight_decay(google.kernel)
    assert not BertAdamW(weight_decay_rate=0.0).use_weight_decay(kernel)


def test_zero_gradient_only_decays_kernel():
    """With g = 0 the Adam part is 0: the kernel shrinks by lr·0.01·w, nothing else moves."""
    variables = _layers()
    start = [np.array(v) for v in variables]
    optimizer = BertAdamW(0.5)
    optimizer.apply([np.zeros(v.shape, "float32") for v in variables], variables)
    np.testing.assert_allclose(np.array(variables[0]), start[0] * (1 - 0.5 * 0.01), rtol=1e-6)
    for var, before in zip(variables[1:], start[1:]):
        np.testing.assert_array_equal(np.array(var), before)


def test_schedule_values_and_serialization():
    schedule = LinearWarmupLinearDecay(1e-4, warmup_steps=10, total_steps=100)
    for step in (0, 1, 5, 9, 10, 11, 50, 99, 100, 150):
        np.testing.assert_allclose(
            float(schedule(step)), reference_lr(step, 1e-4, 10, 100), rtol=1e-6, atol=1e-12
        )
    config = keras.saving.serialize_keras_object(schedule)
    clone = keras.saving.deserialize_keras_object(json.loads(json.dumps(config)))
    assert clone.get_config() == schedule.get_config()
    no_warmup = LinearWarmupLinearDecay(2.0, warmup_steps=0, total_steps=4)
    assert [float(no_warmup(s)) for s in range(5)] == [2.0, 1.5, 1.0, 0.5, 0.0]


def test_optimizer_config_round_trip():
    optimizer = BertAdamW(LinearWarmupLinearDecay(1e-4, 10, 100), bias_correction=True)
    config = json.loads(json.dumps(keras.saving.serialize_keras_object(optimizer)))
    clone = keras.saving.deserialize_keras_object(config)
    assert isinstance(clone, BertAdamW)
    assert clone.get_config() == optimizer.get_config()
    assert clone.global_clipnorm == 1.0 and clone.epsilon == 1e-6


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(peak_learning_rate=1e-4, warmup_steps=20, total_steps=10), "warmup_steps"),
        (dict(peak_learning_rate=1e-4, warmup_steps=0, total_steps=0), "total_steps"),
        (dict(peak_learning_rate=0.0, warmup_steps=0, total_steps=10), "peak_learning_rate"),
    ],
)
def test_schedule_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LinearWarmupLinearDecay(**kwargs)


def test_optimizer_rejects_keras_weight_decay():
    with pytest.raises(ValueError, match="weight_decay_rate"):
        BertAdamW(weight_decay=0.01)
    with pytest.raises(ValueError, match="weight_decay_rate"):
        BertAdamW(weight_decay_rate=-1.0)
