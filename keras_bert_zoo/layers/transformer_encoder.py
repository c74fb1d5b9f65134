"""The post-LayerNorm Transformer encoder block of the original BERT."""

import contextlib

import keras
from keras import ops

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers import real_tokens
from keras_bert_zoo.layers.bert_attention import BertAttention
from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.utils.keras_internals import flatten_layers

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

    Call arguments:
        x: tensor `(batch, seq, hidden)`.
        padding_mask: tensor `(batch, seq)`, 1 for real tokens, or None.
        training: bool.

    Returns:
        Tensor `(batch, seq, hidden)`.

    Attributes:
        skip_padding: bool. At inference on TensorFlow (`training=False`, as `predict`,
            `evaluate` and the export call the model), run the dense layers and layer norms
            on the real tokens only, and the attention one sequence at a time on them
            (`_call_on_real_tokens`, `BertAttention.attend_packed`): about twice the
            throughput on batches of real-length text on CPU; outputs at padded positions are
            then zeros.
            Training keeps the padded computation unless `skip_padding_in_training`.
            Defaults to False; a `Task` whose outputs never read the padded positions turns
            it on (`set_skip_padding`) on CPU, where Keras never compiles with XLA (XLA does
            not take the dynamic token count).
        skip_padding_in_training: bool. With `skip_padding`, training (`training=True`, as
            `fit` calls the model) takes the real-token path too, dropout drawn on the
            `(real tokens, hidden)` matrix: the same distribution over the real positions as
            the padded call's, the same gradients without dropout; padded positions' outputs
            are zeros and get no gradient. Defaults to False; a `Task` whose loss never reads
            the padded positions (`Task.trains_on_real_tokens`) turns it on.

    References:
        Vaswani et al., 2017; Devlin et al., 2018; google-research/bert `modeling.py`.
    """

    skip_padding = False
    skip_padding_in_training = False
    # Training on TensorFlow: the exact GELU keeps only its input (`exact_gelu`); False: autodiff
    # through the composite (benchmarks' lever).
    lean_gelu_in_training = True
    # Inference on the real tokens: rows up to this long attend in one padded batch, longer ones one
    # sequence at a time (`_inference_attention`).
    batched_attention_up_to = 128

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
        if (self.skip_padding and padding_mask is not None and keras.backend.backend() == "tensorflow"
                and (training is False or (training is True and self.skip_padding_in_training))):
            return self._call_on_real_tokens(x, padding_mask, training)
        context = self.attention(x, padding_mask=padding_mask, training=training)
        attended = self.attention_dropout_layer(
            self.attention_output_dense(context), training=training
        )
        x = ops.cast(self.attention_layer_norm(x + attended), self.compute_dtype)
        hidden = gelu(
            self.intermediate_dense(x), approximate=self.activation == "gelu_approximate",
            training=training and self.lean_gelu_in_training,
        )
        out = self.output_dropout_layer(self.output_dense(hidden), training=training)
        return ops.cast(self.output_layer_norm(x + out), self.compute_dtype)

    def _call_on_real_tokens(self, x, padding_mask, training=False):
        """`call` with every dense layer, layer norm, GELU and dropout on the real tokens only.

        The rows of a batch padded to its longest row are mostly padding on real text (a
        batch of 32 review snippets: ~27 pieces on average, padded to ~55), and the dense
        layers are nearly all the work: they run on the `(real tokens, hidden)` matrix. At
        inference the attention runs on it too, one sequence at a time without its padding
        (`BertAttention.attend_packed`); in training it sees the padded `(batch, seq)` layout
        (queries, keys and values put into it, zeros at padding, which the mask hides; `real_tokens`),
        where its dropout is drawn as in `call`. Real positions get the outputs of `call` (to
        float rounding); padded positions get zeros. Every batch's token
        count is a new matmul shape: rounding it up to fewer shapes (8 per power of two) was
        slower than exact shapes (docs/measurements/). TensorFlow only
        (the token count is a dynamic shape, which XLA and JAX's jit do not take).
        """
        shape = ops.shape(x)
        width = shape[-1]
        real, index = real_tokens.positions(padding_mask)
        tokens = real_tokens.pack(ops.reshape(x, (-1, width)), real, index)  # (tokens, hidden)

        def to_padded(values):
            return ops.reshape(real_tokens.unpack(values, real, index), shape)

        attention = self.attention
        query, key, value = (dense(tokens) for dense in (attention.query_dense, attention.key_dense,
                                                         attention.value_dense))

        def on_padded_batch():  # one attention call over the padded batch; its real tokens' rows
            context = attention.attend_batched(to_padded(query), to_padded(key), to_padded(value), padding_mask, training)
            return real_tokens.pack(ops.reshape(context, (-1, width)), real, index)

        def one_sequence_at_a_time():
            lengths = ops.sum(ops.cast(padding_mask > 0, "int32"), axis=1)  # (batch,)
            return attention.attend_packed(query, key, value, lengths)

        if training:  # dropout is drawn on the padded layout, as in `call`
            context = on_padded_batch()
        else:
            context = self._inference_attention(padding_mask, on_padded_batch, one_sequence_at_a_time)
        attended = self.attention_dropout_layer(self.attention_output_dense(context), training=training)
        tokens = ops.cast(self.attention_layer_norm(tokens + attended), self.compute_dtype)
        hidden = gelu(
            self.intermediate_dense(tokens), approximate=self.activation == "gelu_approximate",
            training=training and self.lean_gelu_in_training,
        )
        out = self.output_dropout_layer(self.output_dense(hidden), training=training)
        tokens = ops.cast(self.output_layer_norm(tokens + out), self.compute_dtype)
        return to_padded(tokens)

    def _inference_attention(self, padding_mask, on_padded_batch, one_sequence_at_a_time):
        """The real tokens' attention context at inference: one padded batch when its rows are at most
        `batched_attention_up_to` long, else one sequence at a time (`attend_packed`).

        One sequence at a time keeps long windows' `(heads, seq, seq)` scores in the CPU's cache, but
        it runs a dozen small ops per sequence and layer (slices, head transposes, pads): on short
        rows those ops cost more than the attention they compute (the transposes alone were a tenth
        of BERT-Base's forward pass on ~27-piece snippets, docs/benchmarks.md's profile), where one
        batched call runs them once a layer."""
        length = ops.shape(padding_mask)[1]
        if isinstance(length, int):
            return on_padded_batch() if length <= self.batched_attention_up_to else one_sequence_at_a_time()
        return ops.cond(length <= self.batched_attention_up_to, on_padded_batch, one_sequence_at_a_time)

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


def set_skip_padding(model, enabled=True, in_training=None):
    """Sets `skip_padding` on every `TransformerEncoder` inside `model` (a `Task` does at
    construction on CPU): `predict`, `evaluate` and the export then run the encoder's dense
    layers on the real tokens only; `in_training`, unless None, sets
    `skip_padding_in_training` too (`fit` as well)."""
    for layer in flatten_layers(model):
        if isinstance(layer, TransformerEncoder):
            layer.skip_padding = bool(enabled)
            if in_training is not None:
                layer.skip_padding_in_training = bool(in_training)


@contextlib.contextmanager
def padded_encoders(model):
    """Inside: every `TransformerEncoder` of `model` runs on the padded batch with batched
    attention (no `skip_padding`, no `BertAttention.per_sequence`); each layer's own
    settings come back after. For graphs that must run on any device (TF Hub's encoder
    export), or that only give the outputs' shapes (a symbolic build, where the padded
    path traces in a fraction of the time of the real tokens' per-sequence loop)."""
    encoders = [layer for layer in flatten_layers(model) if isinstance(layer, TransformerEncoder)]
    saved = [(layer, layer.skip_padding, layer.attention.per_sequence) for layer in encoders]
    try:
        for layer in encoders:
            layer.skip_padding = layer.attention.per_sequence = False
        yield
    finally:
        for layer, skipping, per_sequence in saved:
            layer.skip_padding, layer.attention.per_sequence = skipping, per_sequence
