"""The post-LayerNorm Transformer encoder block of the original BERT."""

import keras
from keras import ops

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers import real_tokens
from keras_bert_zoo.layers.bert_attention import BertAttention
from keras_bert_zoo.layers.initializers import bert_initializer

ACTIVATIONS = ("gelu", "gelu_approximate")


def gelu(x, approximate=False, training=False):
    """GELU; exact (erf) like the 2018 checkpoints and HF, or the tanh approximation. In training
    on TensorFlow the exact one keeps only its input for the backward pass (`exact_gelu`)."""
    if approximate:
        return keras.activations.gelu(x, approximate=True)
    # x·Φ(x) = x·(1 + erf(x/√2))/2 written with erf on purpose: keras' exact gelu on TF goes
    # through tf.nn.gelu's erfc, ~2× slower in float32 and ~5× slower in bfloat16 on this CPU
    # (measured in benchmarks/backbone.py's investigation). Same function, |Δ| < 1e-6 in float32.
    if training and keras.backend.backend() == "tensorflow" and not isinstance(x, keras.KerasTensor):
        return exact_gelu(x)
    return exact_gelu_reference(x)


def normal_cdf(x):
    """Φ(x) = (1 + erf(x/√2))/2."""
    return 0.5 + 0.5 * ops.erf(x * 0.7071067811865476)


def exact_gelu_reference(x):
    """x·Φ(x), the composite whose gradient autodiff derives."""
    return x * normal_cdf(x)


def exact_gelu(x):
    """x·Φ(x) keeping only `x` for the backward pass: autodiff through the composite keeps three
    tensors as wide as the intermediate layer (x, x/√2 and Φ(x)) until the gradient, the largest
    activations of a layer after the attention's; the gradient Φ(x) + x·φ(x) is recomputed from x."""

    def forward(x):
        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            pdf = ops.exp(-0.5 * x * x) * 0.3989422804014327  # φ(x) = exp(−x²/2)/√(2π)
            return upstream * (normal_cdf(x) + x * pdf)

        return exact_gelu_reference(x), grad

    return ops.custom_gradient(forward)(x)


def check_activation(activation):
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"`activation` must be one of {ACTIVATIONS}. Received: activation={activation!r}. "
            "Use 'gelu' for the exact (erf) GELU of the released checkpoints, "
            "'gelu_approximate' for the tanh approximation."
        )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TransformerEncoder(keras.layers.Layer):
    """One post-LN BERT layer: attention → dense → dropout → add & norm → FFN → add & norm.

    Args:
        num_heads: int. Attention heads.
        intermediate_dim: int. Width of the feed-forward layer (4 × hidden in BERT).
        dropout: float. Dropout after the attention output and the FFN output. Defaults to 0.1.
        attention_dropout: float. Dropout on attention probabilities. Defaults to `dropout`.
        activation: str. `"gelu"` (exact, default) or `"gelu_approximate"` (tanh).
        layer_norm_epsilon: float. Defaults to 1e-12.
        causal: bool. Left-to-right attention (§5.1 ablation). Defaults to False.
        skip_padding: str or None. When the real-token path runs: `"never"` (every position, any
            device), `"inference"` (calls with `training=False`: `predict`, `evaluate`, exports) or
            `"always"` (`fit` too: for a task whose loss reads no padded position's output, whose
            dropout is then drawn on the `(real tokens, hidden)` matrix, the same distribution
            over the real positions). None (default): not chosen yet, every position meanwhile;
            `BertBackbone.choose_paths` fixes it once (a `Task` does, for itself).
        per_sequence_above: int or None. On the real-token path at inference, rows longer than
            this attend one sequence at a time (`real_tokens.attend`; CPUs); None (default): one
            batched call. Refused with `skip_padding="never"`, where it would do nothing.

    Call arguments:
        x: tensor `(batch, seq, hidden)`.
        padding_mask: tensor `(batch, seq)`, 1 for real tokens, or None.
        training: bool.

    Returns:
        Tensor `(batch, seq, hidden)`.

    The encoder has two paths, fixed by `skip_padding`: every position of the padded batch
    (keras-hub's), or the dense layers, layer norms, GELU and dropout on the real tokens only and
    the attention in the padded layout (`layers/real_tokens.py`): on batches of real-length text on
    a CPU the largest lever of `predict` and `fit` (docs/benchmarks.md), the same outputs at real
    positions (to float rounding), zeros at padded ones. TensorFlow only, without XLA (each
    batch's token count is a new shape); a `Task` picks it on a CPU (`Task.skippable_padding`).

    References:
        Vaswani et al., 2017; Devlin et al., 2018; google-research/bert `modeling.py`.
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.1,
        attention_dropout=None,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        causal=False,
        skip_padding=None,
        per_sequence_above=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        args.check_float_policy(self.dtype_policy, kwargs.get("dtype"))
        check_activation(activation)
        self.num_heads = args.positive_int("num_heads", num_heads)
        self.intermediate_dim = args.positive_int("intermediate_dim", intermediate_dim)
        self.dropout = args.rate("dropout", dropout)
        self.attention_dropout = (
            self.dropout if attention_dropout is None else args.rate("attention_dropout", attention_dropout)
        )
        self.activation = activation
        self.layer_norm_epsilon = args.positive_float("layer_norm_epsilon", layer_norm_epsilon)
        self.causal = args.boolean("causal", causal)
        self.skip_padding = real_tokens.check_skip_padding(skip_padding, keras.backend.backend())
        self.per_sequence_above = real_tokens.check_per_sequence_above(per_sequence_above, self.skip_padding)
        policy = self.dtype_policy
        self.attention = BertAttention(
            self.num_heads, self.attention_dropout, causal=self.causal, dtype=policy, name="attention"
        )
        # The two projections back to the input width are created by `build`.
        self.attention_dropout_layer = keras.layers.Dropout(dropout, dtype=policy, name="attention_output_dropout")
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype="float32", name="attention_layer_norm"
        )
        self.intermediate_dense = self._dense(intermediate_dim, "intermediate")
        self.output_dropout_layer = keras.layers.Dropout(dropout, dtype=policy, name="output_dropout")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype="float32", name="output_layer_norm"
        )

    def _dense(self, units, name):
        return keras.layers.Dense(
            units, kernel_initializer=bert_initializer(), dtype=self.dtype_policy, name=name
        )

    def build(self, x_shape, padding_mask_shape=None):
        hidden_dim = x_shape[-1]
        self.attention.build(x_shape)
        self.attention_output_dense = self._dense(hidden_dim, "attention_output")
        self.attention_output_dense.build(x_shape)
        self.attention_layer_norm.build(x_shape)
        self.intermediate_dense.build(x_shape)
        self.output_dense = self._dense(hidden_dim, "output")
        self.output_dense.build(tuple(x_shape[:-1]) + (self.intermediate_dim,))
        self.output_layer_norm.build(x_shape)
        self.built = True

    def call(self, x, padding_mask=None, training=None):
        if not real_tokens.skips(self.skip_padding, padding_mask, training):
            context = self.attention(x, padding_mask=padding_mask, training=training)
            return self._after_attention(x, context, training)
        # The real-token path: the dense layers on `(tokens, hidden)` (`layers/real_tokens.py`).
        where = real_tokens.RealTokens(padding_mask, ops.shape(x))
        tokens = where.pack(x)  # (tokens, hidden)
        attention = self.attention
        query, key, value = (dense(tokens) for dense in (attention.query_dense, attention.key_dense,
                                                         attention.value_dense))
        context = real_tokens.attend(attention, query, key, value, where, padding_mask, training,
                                      self.per_sequence_above)
        return where.unpack(self._after_attention(tokens, context, training))

    def _after_attention(self, x, context, training):
        """Output projection, dropout, add & norm, then the feed-forward block: on `x` of any
        leading shape (`(batch, seq)` or the real tokens' `(tokens,)`)."""
        attended = self.attention_dropout_layer(self.attention_output_dense(context), training=training)
        x = ops.cast(self.attention_layer_norm(x + attended), self.compute_dtype)
        hidden = gelu(self.intermediate_dense(x), approximate=self.activation == "gelu_approximate",
                      training=training)
        out = self.output_dropout_layer(self.output_dense(hidden), training=training)
        return ops.cast(self.output_layer_norm(x + out), self.compute_dtype)

    def compute_output_shape(self, x_shape, padding_mask_shape=None):
        return tuple(x_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "causal": self.causal,
                "skip_padding": self.skip_padding,
                "per_sequence_above": self.per_sequence_above,
            }
        )
        return config
