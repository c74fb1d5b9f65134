"""`BertBackbone`: the BERT encoder as a functional Keras model."""

import keras

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers.bert_embeddings import BertEmbeddings
from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.layers.real_tokens import NEVER, check_per_sequence_above, check_skip_padding
from keras_bert_zoo.layers.transformer_encoder import TransformerEncoder, check_activation
from keras_bert_zoo.models.base import Backbone
from keras_bert_zoo.utils.precision import AUTO, auto_precision, default_policy


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertBackbone(Backbone):
    """The BERT encoder (Devlin et al., 2018) as a functional `keras.Model`.

    Inputs are a dict of `token_ids`, `segment_ids` and `padding_mask`, each
    `(batch, seq)` with any `seq <= max_sequence_length`. Outputs are a dict:
    `sequence_output` `(batch, seq, hidden_dim)`, `pooled_output` `(batch, hidden_dim)`
    (dense + tanh on the [CLS] vector) and `encoder_outputs`, the list of the
    embedding output and every layer's output (`num_layers + 1` tensors), for the
    feature-based approach (§5.3).

    Args:
        vocabulary_size: int. Word pieces in the vocabulary.
        num_layers: int. Transformer layers (L).
        num_heads: int. Attention heads (A); must divide `hidden_dim`.
        hidden_dim: int. Hidden width (H).
        intermediate_dim: int. Feed-forward width (4H in every released model).
        dropout: float. Hidden and attention dropout. Defaults to 0.1.
        max_sequence_length: int. Learned positions. Defaults to 512.
        num_segments: int. Token types. Defaults to 2.
        activation: str. `"gelu"` (exact, default) or `"gelu_approximate"`.
        causal: bool. Left-to-right attention for the §5.1 ablation. Defaults to False.
        skip_padding: str or None. When the encoder's dense layers run on the real tokens only
            (`TransformerEncoder`): `"never"` (every position, on any device), `"inference"` or
            `"always"` (`fit` too). None (default): chosen once by the first task built on the
            backbone, for itself and the device (`Task.skippable_padding`: on a CPU with
            TensorFlow as far as the task allows, else "never"); a backbone called alone
            meanwhile runs every position. A preset does not store it.
        per_sequence_above: int or None. On the real-token path at inference, rows longer than
            this attend one sequence at a time (`layers/real_tokens.py`; SQuAD-style windows on a
            CPU). None (default): one batched call until a task chooses (128 where it chooses a
            `skip_padding` other than "never"); pass `max_sequence_length` to keep one batched
            call there. Refused with `skip_padding="never"`. A preset does not store it.
        dtype: str or `keras.DTypePolicy`, a float policy, e.g. `"float32"` or
            `"mixed_bfloat16"`. None (default): Keras' global policy, float32 unless set
            (`keras.config.set_dtype_policy`; `utils.precision.default_policy()`), so that a
            checkpoint loaded with the defaults matches its reference on every machine; saved
            as None, so a reloaded model follows the global policy where it is loaded.
            `"auto"`: the opt-in that picks for this machine (`utils.precision.auto_precision()`:
            `mixed_bfloat16` on a CPU with native bf16 (AVX512-BF16/AMX) or a GPU/TPU, float32
            elsewhere), saved as the policy it picked. The variables are float32 in any.

    Wrong types raise `TypeError` (`hidden_dim="32"`, `causal="no"`), wrong values
    `ValueError`, each naming the argument.

    Examples:
    >>> backbone = keras_bert_zoo.BertBackbone.from_preset("bert_tiny_en_uncased", load_weights=False)
    >>> ids = np.array([[101, 7592, 2088, 102]])  # [CLS] hello world [SEP]
    >>> out = backbone({"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": np.ones_like(ids)})
    >>> tuple(out["sequence_output"].shape), tuple(out["pooled_output"].shape)
    ((1, 4, 128), (1, 128))

    References:
        Devlin et al., 2018. BERT: Pre-training of Deep Bidirectional Transformers.
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        dropout=0.1,
        max_sequence_length=512,
        num_segments=2,
        activation="gelu",
        causal=False,
        skip_padding=None,
        per_sequence_above=None,
        dtype=None,
        **kwargs,
    ):
        vocabulary_size = args.positive_int("vocabulary_size", vocabulary_size)
        num_layers = args.positive_int("num_layers", num_layers)
        num_heads = args.positive_int("num_heads", num_heads)
        hidden_dim = args.positive_int("hidden_dim", hidden_dim)
        intermediate_dim = args.positive_int("intermediate_dim", intermediate_dim)
        dropout = args.rate("dropout", dropout)
        max_sequence_length = args.positive_int("max_sequence_length", max_sequence_length)
        num_segments = args.positive_int("num_segments", num_segments)
        check_activation(activation)
        causal = args.boolean("causal", causal)
        if hidden_dim % num_heads:
            raise ValueError(
                "`num_heads` must divide `hidden_dim`. Received: "
                f"hidden_dim={hidden_dim}, num_heads={num_heads}."
            )
        auto_dtype = dtype is None  # follows the global policy, saved as such (`Backbone.get_config`)
        if isinstance(dtype, str) and dtype == AUTO:
            dtype = auto_precision()  # asked for: the machine's fast policy, saved as picked
        policy = args.float_policy(default_policy() if auto_dtype else dtype)
        embeddings = BertEmbeddings(
            vocabulary_size,
            hidden_dim,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
            dropout=dropout,
            dtype=policy,
            name="embeddings",
        )
        layers = [
            TransformerEncoder(
                num_heads,
                intermediate_dim,
                dropout=dropout,
                activation=activation,
                causal=causal,
                skip_padding=skip_padding,
                per_sequence_above=per_sequence_above,
                dtype=policy,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]
        pooled_dense = keras.layers.Dense(
            hidden_dim,
            activation="tanh",
            kernel_initializer=bert_initializer(),
            dtype=policy,
            name="pooled_dense",
        )

        # === Functional model ===
        token_ids = keras.Input(shape=(None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input(shape=(None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        x = embeddings(token_ids, segment_ids)
        encoder_outputs = [x]
        for layer in layers:
            x = layer(x, padding_mask=padding_mask)
            encoder_outputs.append(x)
        pooled = pooled_dense(x[:, 0, :])  # (batch, hidden) from [CLS]
        super().__init__(
            inputs={"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask},
            outputs={
                "sequence_output": x,
                "pooled_output": pooled,
                "encoder_outputs": encoder_outputs,
            },
            dtype=policy,
            **kwargs,
        )
        # keras.Model (Functional) drops `dtype`; keep it so get_config/.keras reloads keep
        # the mixed-precision policy (the public setter, as keras-hub's Backbone).
        self.dtype_policy = policy
        self.auto_dtype = auto_dtype  # saved as dtype None: the global policy where reloaded
        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.activation = activation
        self.causal = causal
        self.skip_padding = skip_padding
        self.per_sequence_above = per_sequence_above
        # === Handles used by heads and weight loaders ===
        self.embeddings = embeddings
        self.token_embedding = embeddings.token_embedding
        self.transformer_layers = layers
        self.pooled_dense = pooled_dense

    def choose_paths(self, skip_padding, per_sequence_above):
        """Fixes how the encoder computes where it was left open (None), before any trace reads it:
        `skip_padding` and, if open too and the real-token path can run, `per_sequence_above`, on
        every encoder layer. A backbone built with a `skip_padding` keeps both. Returns its `skip_padding`."""
        if self.skip_padding is None:
            check_skip_padding(skip_padding, keras.backend.backend())
            if self.per_sequence_above is None and skip_padding != NEVER:
                self.per_sequence_above = per_sequence_above
            check_per_sequence_above(self.per_sequence_above, skip_padding)
            self.skip_padding = skip_padding
            for layer in self.transformer_layers:
                layer.skip_padding = self.skip_padding
                layer.per_sequence_above = self.per_sequence_above
        return self.skip_padding

    def with_paths(self, skip_padding, per_sequence_above):
        """This backbone where it already computes so, else a twin built so with these weights
        (copied): for a graph that must give every position's output on any device (TF Hub's
        encoder), or an A/B of the paths."""
        if (skip_padding, per_sequence_above) == (self.skip_padding, self.per_sequence_above):
            return self
        twin = type(self).from_config(
            {**self.get_config(), "skip_padding": skip_padding, "per_sequence_above": per_sequence_above})
        twin.set_weights(self.get_weights())
        return twin

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                "num_heads": self.num_heads,
                "hidden_dim": self.hidden_dim,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "activation": self.activation,
                "causal": self.causal,
                "skip_padding": self.skip_padding,
                "per_sequence_above": self.per_sequence_above,
            }
        )
        return config
