"""Token + position + segment embeddings, LayerNorm and dropout (BERT's input layer)."""

import keras
from keras import ops

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers.id_checks import check_id_range
from keras_bert_zoo.layers.initializers import bert_initializer

TOKEN_IDS_FIX = (
    "Pad with the [PAD] id (0 in Google's vocabularies) and mark padding in `padding_mask`, "
    "not with -1; give unknown words the [UNK] id."
)
SEGMENT_IDS_FIX = (
    "Segment ids are 0 for the first segment (and padding), 1 for the second; build the "
    "model with a larger num_segments for more."
)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertEmbeddings(keras.layers.Layer):
    """BERT's embedding layer: word + learned position + token-type, LayerNorm, dropout.

    Args:
        vocabulary_size: int. Number of word pieces.
        hidden_dim: int. Width of every embedding.
        max_sequence_length: int. Number of learned positions. Defaults to 512.
        num_segments: int. Number of token types (segments). Defaults to 2.
        dropout: float. Dropout after the LayerNorm. Defaults to 0.1.
        layer_norm_epsilon: float. Defaults to 1e-12, as the original.

    Call arguments:
        token_ids: int tensor `(batch, seq)`, ids in `[0, vocabulary_size)`.
        segment_ids: int tensor `(batch, seq)`, ids in `[0, num_segments)`.
        training: bool.

    Ids outside their range raise (a `ValueError` in eager calls, an
    `InvalidArgumentError` inside `fit`/`predict`; see `layers/id_checks.py`) instead of
    embedding a wrong row: Keras would wrap `-1` to the last word piece.

    Returns:
        Tensor `(batch, seq, hidden_dim)`.

    Examples:
    >>> layer = keras_bert_zoo.layers.BertEmbeddings(100, 16, max_sequence_length=32)
    >>> tuple(layer(np.ones((2, 8), "int32"), np.zeros((2, 8), "int32")).shape)
    (2, 8, 16)

    References:
        Devlin et al., 2018, §3 (Input/Output Representations).
    """

    def __init__(
        self,
        vocabulary_size,
        hidden_dim,
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
        layer_norm_epsilon=1e-12,
        **kwargs,
    ):
        super().__init__(**kwargs)
        args.check_float_policy(self.dtype_policy, kwargs.get("dtype"))
        self.vocabulary_size = args.positive_int("vocabulary_size", vocabulary_size)
        self.hidden_dim = args.positive_int("hidden_dim", hidden_dim)
        self.max_sequence_length = args.positive_int("max_sequence_length", max_sequence_length)
        self.num_segments = args.positive_int("num_segments", num_segments)
        self.dropout = args.rate("dropout", dropout)
        self.layer_norm_epsilon = args.positive_float("layer_norm_epsilon", layer_norm_epsilon)

        self.token_embedding = keras.layers.Embedding(
            vocabulary_size,
            hidden_dim,
            embeddings_initializer=bert_initializer(),
            dtype=self.dtype_policy,
            name="token_embedding",
        )
        self.segment_embedding = keras.layers.Embedding(
            num_segments,
            hidden_dim,
            embeddings_initializer=bert_initializer(),
            dtype=self.dtype_policy,
            name="segment_embedding",
        )
        # LayerNorm always runs in float32 (stable under mixed precision).
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype="float32", name="layer_norm"
        )
        self.dropout_layer = keras.layers.Dropout(
            dropout, dtype=self.dtype_policy, name="dropout"
        )

    def build(self, token_ids_shape=None, segment_ids_shape=None):
        self.token_embedding.build(token_ids_shape)
        self.segment_embedding.build(token_ids_shape)
        self.position_embeddings = self.add_weight(
            name="position_embeddings",
            shape=(self.max_sequence_length, self.hidden_dim),
            initializer=bert_initializer(),
        )
        self.layer_norm.build((None, None, self.hidden_dim))
        self.built = True

    def call(self, token_ids, segment_ids, training=None):
        seq_len = token_ids.shape[1]
        if seq_len is not None and seq_len > self.max_sequence_length:
            raise ValueError(
                f"The input sequence is longer than `max_sequence_length`. Received: "
                f"sequence length {seq_len}, max_sequence_length={self.max_sequence_length}. "
                "Truncate the input or build the model with a larger max_sequence_length."
            )
        if seq_len == 0:
            raise ValueError(
                "The input sequences are empty. Received: `token_ids` of shape "
                f"{tuple(token_ids.shape)}. Every row needs at least the [CLS] position; "
                "pack inputs with keras_bert_zoo.text.BertPreprocessor or SegmentPacker."
            )
        token_ids = check_id_range(
            token_ids, self.vocabulary_size, "token_ids", "vocabulary_size", TOKEN_IDS_FIX
        )
        segment_ids = check_id_range(
            segment_ids, self.num_segments, "segment_ids", "num_segments", SEGMENT_IDS_FIX
        )
        length = ops.shape(token_ids)[1]
        # (seq, hidden): the first `length` learned positions, shared across the batch.
        positions = ops.cast(self.position_embeddings[:length], self.compute_dtype)
        x = self.token_embedding(token_ids) + self.segment_embedding(segment_ids)
        x = x + positions[None, :, :]  # (batch, seq, hidden)
        x = self.layer_norm(x)
        x = ops.cast(x, self.compute_dtype)
        return self.dropout_layer(x, training=training)

    def compute_output_shape(self, token_ids_shape, segment_ids_shape=None):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "hidden_dim": self.hidden_dim,
                "max_sequence_length": self.max_sequence_length,
                "num_segments": self.num_segments,
                "dropout": self.dropout,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config
