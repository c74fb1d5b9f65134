"""Training attention that keeps less for the backward pass: the probabilities are recomputed.

Autodiff through `scores → softmax → dropout → probs @ v` keeps two `(batch, heads, seq, seq)`
float tensors a layer until the backward pass (the softmax output for its gradient, the dropped
probabilities for the `@ v` gradient) beside the dropout's keep mask. At fine-tuning shapes they
are most of the activations: all-MiniLM-L6-v2 on 16 windows of 256 tokens holds 50 MB for each
of them in each of its 6 layers. `attention_context` keeps only its inputs (q, k, v: as wide as
the hidden states, which the projections' gradients keep anyway) and the boolean keep mask, and
recomputes the scores and the softmax in the backward pass, as FlashAttention does: one more
`q @ kᵀ` a layer, about 5% of a BERT layer's FLOPs at 256 tokens. Values and gradients are those
of the composite (`attention_context_reference`), to float rounding.
"""

import keras
from keras import ops

# The original adds -10000 to masked scores; -1e9 in float32 gives exactly zero probability, so
# padding never changes the real positions' outputs.
MASKED_SCORE = -1e9


def masked_probabilities(q, k, allowed):
    """softmax(q @ kᵀ) in float32 over the allowed keys; `q` already scaled. Training and inference
    attention both compute their probabilities here."""
    scores = ops.cast(ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))), "float32")  # (b, h, s, s)
    if allowed is not None:
        scores = ops.where(allowed, scores, ops.cast(MASKED_SCORE, "float32"))
    return ops.softmax(scores, axis=-1)


def dropped(probs, keep, rate, dtype):
    """The probabilities in the compute dtype, dropout applied with `keep` (None: no dropout)."""
    probs = ops.cast(probs, dtype)
    if keep is None:
        return probs
    return ops.where(keep, probs * ops.cast(1.0 / (1.0 - rate), dtype), ops.cast(0.0, dtype))


def attention_context_reference(q, k, v, allowed, keep, rate):
    """The composite `BertAttention.attend` computes: `(b, h, s, d)` context of split heads."""
    return ops.matmul(dropped(masked_probabilities(q, k, allowed), keep, rate, v.dtype), v)


def attention_context(q, k, v, allowed, keep, rate):
    """`attention_context_reference` with a backward pass that recomputes the probabilities.

    Args:
        q, k, v: `(batch, heads, seq, head_dim)`, `q` scaled by 1/√head_dim.
        allowed: bool, broadcastable to `(batch, heads, seq, seq)`, or None.
        keep: bool `(batch, heads, seq, seq)` dropout keep mask, or None (no dropout).
        rate: the dropout rate `keep` was drawn with.

    TensorFlow only (`ops.custom_gradient` there is `tf.custom_gradient`); the masks are inputs,
    not drawn inside, so the function reads no variable.
    """
    dtype = v.dtype

    @ops.custom_gradient
    def context(q, k, v):
        probs = masked_probabilities(q, k, allowed)
        out = ops.matmul(dropped(probs, keep, rate, dtype), v)

        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream  # (b, h, s, d)
            probs = masked_probabilities(q, k, allowed)
            grad_v = ops.matmul(ops.transpose(dropped(probs, keep, rate, dtype), (0, 1, 3, 2)), upstream)
            grad_dropped = ops.cast(ops.matmul(upstream, ops.transpose(v, (0, 1, 3, 2))), "float32")
            if keep is not None:
                grad_dropped = ops.where(keep, grad_dropped * (1.0 / (1.0 - rate)), 0.0)
            # softmax: dS = P ⊙ (dP − Σ_j dP ⊙ P); masked keys have P = 0 exactly, so dS = 0 there.
            grad_scores = probs * (grad_dropped - ops.sum(grad_dropped * probs, axis=-1, keepdims=True))
            grad_scores = ops.cast(grad_scores, dtype)
            grad_q = ops.matmul(grad_scores, k)
            grad_k = ops.matmul(ops.transpose(grad_scores, (0, 1, 3, 2)), q)
            return grad_q, grad_k, grad_v

        return out, grad

    return context(q, k, v)


def keep_mask(shape, rate, seed_generator, dtype):
    """The keep mask `keras.layers.Dropout` draws for an input of `shape` and `dtype` (the same
    uniform draw from the same seed generator: `random >= rate`)."""
    return keras.random.uniform(shape, dtype=dtype, seed=seed_generator) >= ops.cast(rate, dtype)
