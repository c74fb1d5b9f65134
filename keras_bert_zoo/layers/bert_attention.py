"""Multi-head scaled dot-product self-attention as in the original BERT."""

import math

import keras
from keras import ops

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers import attention_training
from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.utils.keras_internals import flatten_layers


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

    Attributes:
        per_sequence: bool. At inference on TensorFlow (`training` falsy) with a mask,
            attend one sequence at a time (`ops.map`): its `(heads, seq, seq)` scores stay in
            the CPU's cache, where the whole batch's go through memory several times (the
            scores, the mask, the softmax): a MiniLM-shaped encoder (L6 H384) on 32 rows of
            384 positions (~274 real), a higher throughput end to end than the batched call
            (docs/measurements/). The same outputs (to float rounding). Defaults to
            False (one batched computation, what accelerators want); a `Task` on CPU turns it
            on (`set_per_sequence_attention`).
    """

    per_sequence = False
    # Training on TensorFlow recomputes the probabilities in the backward pass
    # (`attention_training.attention_context`); False: autodiff through the composite (benchmarks' lever).
    recompute_in_training = True

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
        return self.attend(
            self.query_dense(x), self.key_dense(x), self.value_dense(x), padding_mask, training
        )

    def attend(self, query, key, value, padding_mask=None, training=None):
        """The context of already projected queries, keys and values, each `(batch, seq, hidden)`.

        With `per_sequence`, inference on TensorFlow with a mask runs one sequence at a time.
        """
        if self.per_sequence and not training and padding_mask is not None and keras.backend.backend() == "tensorflow":
            def one_sequence(row):
                q, k, v, mask = (part[None] for part in row)
                return self._attend(q, k, v, mask, training)[0]

            return ops.map(one_sequence, (query, key, value, padding_mask))
        return self._attend(query, key, value, padding_mask, training)

    def attend_batched(self, query, key, value, padding_mask, training=False):
        """Attention over the whole padded batch at once, whatever `per_sequence` says:
        `(batch, seq, hidden)` projected inputs -> the context, heads concatenated."""
        return self._attend(query, key, value, padding_mask, training)

    def _attend(self, query, key, value, padding_mask, training):
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
        if training and self.recompute_in_training and keras.backend.backend() == "tensorflow":
            # The same values and gradients, with less kept for the backward pass.
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

    def attend_packed(self, query, key, value, lengths):
        """Inference attention of sequences packed row after row, without their padding.

        The real tokens of a padded batch, taken in row-major order (what
        `TransformerEncoder.skip_padding` computes its dense layers on), are each sequence's
        tokens one after the other. Each sequence attends within itself, one at a time
        (`ops.map`): its scores are `(heads, length, length)`, a few MB that stay in the
        CPU's cache, where the padded batch's `(batch, heads, seq, seq)` scores and the
        mask over them go through memory several times; without padded keys there is no
        mask, and no scores for padded queries (the gain on SQuAD-style windows is in
        docs/measurements/). The same outputs as `attend` on the padded batch at the real positions
        (to float rounding); no dropout (inference only). TensorFlow: the lengths are
        dynamic shapes.

        Args:
            query, key, value: `(tokens, hidden)`, projected; sequence `i` is rows
                `sum(lengths[:i])` to `sum(lengths[:i + 1])`.
            lengths: int tensor `(batch,)`, each sequence's number of tokens.

        Returns:
            The context `(tokens, hidden)`, heads concatenated, rows as in `query`.
        """
        lengths = ops.cast(lengths, "int32")
        starts = ops.cumsum(lengths) - lengths  # (batch,) each sequence's first row
        longest = ops.max(lengths)

        def one_sequence(bounds):
            start, length = bounds[0], bounds[1]
            q, k, v = (ops.slice(x, (start, 0), (length, self.hidden_dim))[None]  # (1, n, hidden)
                       for x in (query, key, value))
            # A sequence without padding: no mask; `causal` masks by order, which the real tokens keep.
            context = self._attend(q, k, v, None, False)[0]  # (n, hidden)
            return ops.pad(context, ((0, longest - length), (0, 0)))  # (longest, hidden)

        padded = _map_sequences(one_sequence, (starts, lengths), self.hidden_dim, self.compute_dtype)
        # Row t of sequence i sits at (i, t - starts[i]) of `padded`.
        tokens = ops.shape(query)[0]
        sequence = ops.repeat(ops.arange(ops.shape(lengths)[0], dtype="int32"), lengths, axis=0)  # (tokens,)
        within = ops.arange(tokens, dtype="int32") - ops.take(starts, sequence)
        flat = ops.reshape(padded, (-1, self.hidden_dim))
        return ops.take(flat, sequence * longest + within, axis=0)

    def compute_output_shape(self, x_shape, padding_mask_shape=None):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_heads": self.num_heads, "dropout": self.dropout, "causal": self.causal}
        )
        return config


def _map_sequences(function, bounds, hidden_dim, dtype):
    """`ops.map(function, bounds)`: `(batch, longest, hidden)`. On TensorFlow (the only backend
    `attend_packed` runs on), `tf.map_fn` with the output's signature given: Keras' `ops.map`
    first calls `function` on row 0 for it, a second copy of the per-sequence attention in
    every layer's graph (all-MiniLM-L6-v2's export traced 12 sequence bodies for 6 layers)."""
    if keras.backend.backend() != "tensorflow":
        return ops.map(function, bounds)
    import tensorflow as tf  # lazy: only the TensorFlow backend runs this (start-up time elsewhere)

    signature = tf.TensorSpec([None, hidden_dim], dtype)
    return tf.map_fn(function, bounds, fn_output_signature=signature)


def set_per_sequence_attention(model, enabled=True):
    """Sets `BertAttention.per_sequence` on every attention layer inside `model`."""
    for layer in flatten_layers(model):
        if isinstance(layer, BertAttention):
            layer.per_sequence = bool(enabled)
