"""Multi-head scaled dot-product self-attention as in the original BERT."""

import math

import keras
from keras import ops

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers import attention_training
from keras_bert_zoo.layers.initializers import bert_initializer


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertAttention(keras.layers.Layer):
    """Self-attention: Q/K/V dense with bias, scaled dot product, masked softmax, dropout.

    The attention scores and the softmax are computed in float32 whatever the dtype
    policy, so `mixed_float16` and `mixed_bfloat16` keep the original's numerics.
    The output projection (`attention/output/dense` in the original) is not part of
    this layer; see `TransformerEncoder`.

    Args:
        num_heads: int. Number of heads; must divide the input width.
        dropout: float. Dropout on the attention probabilities. Defaults to 0.1.
        causal: bool. If True each position attends only to itself and earlier
            positions (the paper's left-to-right ablation, §5.1). Defaults to False.

    Call arguments:
        x: tensor `(batch, seq, hidden)`.
        padding_mask: bool/int tensor `(batch, seq)`, 1 for real tokens, or None.
        training: bool.

    Returns:
        The attention context, `(batch, seq, hidden)`, heads concatenated.

    In training on TensorFlow the backward pass recomputes the probabilities instead of keeping
    them (`attention_training.attention_context`): the same values and gradients, less memory
    (docs/benchmarks.md, fine-tuning memory).
    """

    def __init__(self, num_heads, dropout=0.1, causal=False, **kwargs):
        super().__init__(**kwargs)
        args.check_float_policy(self.dtype_policy, kwargs.get("dtype"))
        self.num_heads = args.positive_int("num_heads", num_heads)
        self.dropout = args.rate("dropout", dropout)
        self.causal = args.boolean("causal", causal)
        # The Q/K/V projections are as wide as the input: `build` creates them.
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy, name="dropout")

    def build(self, x_shape, padding_mask_shape=None):
        hidden_dim = x_shape[-1]
        if hidden_dim % self.num_heads != 0:
            raise ValueError(
                "`num_heads` must divide the hidden width. Received: "
                f"hidden_dim={hidden_dim}, num_heads={self.num_heads}."
            )
        self.hidden_dim = hidden_dim
        self.head_dim = hidden_dim // self.num_heads
        # One initializer each: a shared seeded initializer would start Q, K and V equal.
        self.query_dense, self.key_dense, self.value_dense = (
            keras.layers.Dense(
                hidden_dim, kernel_initializer=bert_initializer(), dtype=self.dtype_policy, name=name
            )
            for name in ("query", "key", "value")
        )
        for dense in (self.query_dense, self.key_dense, self.value_dense):
            dense.build(x_shape)
        self.built = True

    def _split_heads(self, x):
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        x = ops.reshape(x, (batch, length, self.num_heads, self.head_dim))  # (b, s, h, d)
        return ops.transpose(x, (0, 2, 1, 3))  # (b, h, s, d)

    def call(self, x, padding_mask=None, training=None):
        return self.attend(self.query_dense(x), self.key_dense(x), self.value_dense(x), padding_mask, training)

    def attend(self, query, key, value, padding_mask=None, training=None):
        """The context of already projected queries, keys and values, each `(batch, seq, hidden)`:
        what `call` computes after its projections (`TransformerEncoder`'s real-token path projects
        the real tokens alone, then attends here, in the padded layout or one sequence at a time)."""
        q = self._split_heads(query)  # (b, h, s, d)
        k = self._split_heads(key)  # (b, h, s, d)
        v = self._split_heads(value)  # (b, h, s, d)
        q = q * ops.cast(1.0 / math.sqrt(self.head_dim), q.dtype)
        allowed = None
        if padding_mask is not None:
            allowed = ops.cast(padding_mask, "bool")[:, None, None, :]  # (b, 1, 1, s)
        if self.causal:
            length = ops.shape(query)[1]
            idx = ops.arange(length)
            tril = idx[:, None] >= idx[None, :]  # (s, s), query row >= key column
            tril = tril[None, None, :, :]
            allowed = tril if allowed is None else ops.logical_and(allowed, tril)
        if training and keras.backend.backend() == "tensorflow":
            # The same values and gradients, with less kept for the backward pass (`tf.custom_gradient`).
            return self._merge_heads(self._attend_training(q, k, v, allowed))
        probs = attention_training.masked_probabilities(q, k, allowed)  # (b, h, s, s), float32
        probs = ops.cast(probs, self.compute_dtype)
        probs = self.dropout_layer(probs, training=training)
        return self._merge_heads(ops.matmul(probs, v))  # (b, h, s, d) -> (b, s, hidden)

    def _merge_heads(self, context):
        context = ops.transpose(context, (0, 2, 1, 3))  # (b, s, h, d)
        batch, length = ops.shape(context)[0], ops.shape(context)[1]
        return ops.reshape(context, (batch, length, self.hidden_dim))  # (b, s, hidden)

    def _attend_training(self, q, k, v, allowed):
        """`attention_training.attention_context`: the backward pass recomputes the probabilities
        instead of keeping them; the dropout mask is the one `dropout_layer` would draw."""
        keep = None
        if self.dropout > 0:
            shape = ops.shape(q)[:3] + (ops.shape(k)[2],)  # (b, h, s, s)
            keep = attention_training.keep_mask(shape, self.dropout, self.dropout_layer.seed_generator, v.dtype)
        return attention_training.attention_context(q, k, v, allowed, keep, self.dropout)

    def compute_output_shape(self, x_shape, padding_mask_shape=None):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_heads": self.num_heads, "dropout": self.dropout, "causal": self.causal}
        )
        return config

