"""The post-LayerNorm Transformer encoder block of the original BERT."""

import keras
from keras import ops

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers.bert_attention import BertAttention
from keras_bert_zoo.layers.initializers import bert_initializer

ACTIVATIONS = ("gelu", "gelu_approximate")


def gelu(x, approximate=False):
    """GELU; exact (erf) like the 2018 checkpoints and HF, or the tanh approximation."""
    if approximate:
        return keras.activations.gelu(x, approximate=True)
    # x·Φ(x) = x·(1 + erf(x/√2))/2 written with erf on purpose: keras' exact gelu on TF goes
    # through tf.nn.gelu's erfc, ~2× slower in float32 and ~5× slower in bfloat16 on this CPU
    # (measured in tools/bench/backbone.py's investigation). Same function, |Δ| < 1e-6 in float32.
    return x * (0.5 + 0.5 * ops.erf(x * 0.7071067811865476))


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

    Call arguments:
        x: tensor `(batch, seq, hidden)`.
        padding_mask: tensor `(batch, seq)`, 1 for real tokens, or None.
        training: bool.

    Returns:
        Tensor `(batch, seq, hidden)`.

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
        context = self.attention(x, padding_mask=padding_mask, training=training)
        attended = self.attention_dropout_layer(
            self.attention_output_dense(context), training=training
        )
        x = ops.cast(self.attention_layer_norm(x + attended), self.compute_dtype)
        hidden = gelu(
            self.intermediate_dense(x), approximate=self.activation == "gelu_approximate"
        )
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
            }
        )
        return config
