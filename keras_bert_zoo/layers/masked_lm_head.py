"""The masked-LM head: gather → dense → GELU → LayerNorm → tied-embedding logits + bias."""

import keras
from keras import ops

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers.id_checks import check_id_range
from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.layers.transformer_encoder import check_activation, gelu


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MaskedLMHead(keras.layers.Layer):
    """Predicts the word pieces at `mask_positions` (`cls/predictions` in the original).

    The decoder is tied to the backbone's word embeddings (`token_embedding`), as in
    the original and HF; only the output bias is the head's own.

    Args:
        token_embedding: `keras.layers.Embedding`. The backbone's word embeddings.
        activation: str. `"gelu"` (default) or `"gelu_approximate"`.
        layer_norm_epsilon: float. Defaults to 1e-12.

    Call arguments:
        sequence_output: tensor `(batch, seq, hidden)`.
        mask_positions: int tensor `(batch, predictions)` of positions in
            `[0, seq)` (checked when `seq` is static, see `layers/id_checks.py`), or
            None to predict at every position (the left-to-right ablation's next-token head).

    Returns:
        Logits `(batch, predictions, vocabulary_size)` in float32 (`predictions = seq`
        when `mask_positions` is None).
    """

    def __init__(self, token_embedding, activation="gelu", layer_norm_epsilon=1e-12, **kwargs):
        super().__init__(**kwargs)
        args.check_float_policy(self.dtype_policy, kwargs.get("dtype"))
        if not isinstance(token_embedding, keras.layers.Embedding):
            raise TypeError(
                "`token_embedding` must be the backbone's keras.layers.Embedding "
                f"(`backbone.token_embedding`). Received: an object of type {type(token_embedding).__name__}."
            )
        check_activation(activation)
        self.token_embedding = token_embedding
        self.activation = activation
        self.layer_norm_epsilon = args.positive_float("layer_norm_epsilon", layer_norm_epsilon)
        # The transform keeps the hidden width, the embeddings' `output_dim`.
        self.transform_dense = keras.layers.Dense(
            token_embedding.output_dim,
            kernel_initializer=bert_initializer(),
            dtype=self.dtype_policy,
            name="transform_dense",
        )
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype="float32", name="transform_layer_norm"
        )

    def build(self, sequence_output_shape, mask_positions_shape=None):
        hidden_dim = self.token_embedding.output_dim
        if sequence_output_shape[-1] not in (None, hidden_dim):
            raise ValueError(
                "`sequence_output` must be as wide as the tied embeddings. Received: "
                f"width {sequence_output_shape[-1]}, token_embedding.output_dim={hidden_dim}. "
                "Pass the backbone's own `token_embedding`."
            )
        self.transform_dense.build((None, None, hidden_dim))
        self.layer_norm.build((None, None, hidden_dim))
        self.output_bias = self.add_weight(
            name="output_bias",
            shape=(self.token_embedding.input_dim,),
            initializer="zeros",
        )
        self.built = True

    def call(self, sequence_output, mask_positions=None):
        if mask_positions is None:
            x = sequence_output  # (batch, seq, hidden): every position predicts
        else:
            length = sequence_output.shape[1]
            if length is not None:  # known in eager calls and fixed-length batches
                # -1 would predict the last position (take_along_axis wraps negatives).
                mask_positions = check_id_range(
                    mask_positions, length, "mask_positions", "sequence length",
                    "Pad unused prediction slots with position 0 and weight 0 (mlm_weights).",
                )
            positions = ops.cast(mask_positions, "int32")[:, :, None]  # (batch, predictions, 1)
            x = ops.take_along_axis(sequence_output, positions, axis=1)  # (batch, predictions, hidden)
        x = self.transform_dense(x)
        x = gelu(x, approximate=self.activation == "gelu_approximate")
        x = ops.cast(self.layer_norm(x), self.compute_dtype)
        table = ops.cast(self.token_embedding.embeddings, self.compute_dtype)  # (vocab, hidden)
        logits = ops.matmul(x, ops.transpose(table))  # (batch, predictions, vocab)
        return ops.cast(logits, "float32") + ops.cast(self.output_bias, "float32")

    def compute_output_shape(self, sequence_output_shape, mask_positions_shape=None):
        if mask_positions_shape is None:
            return tuple(sequence_output_shape[:-1]) + (self.token_embedding.input_dim,)
        return tuple(mask_positions_shape) + (self.token_embedding.input_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "token_embedding": keras.saving.serialize_keras_object(self.token_embedding),
                "activation": self.activation,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["token_embedding"] = keras.saving.deserialize_keras_object(config["token_embedding"])
        return cls(**config)
