"""`MaskedMeanPooling`: the mean of a sequence's real (unpadded) token vectors."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MaskedMeanPooling(keras.layers.Layer):
    """Averages `sequence_output` over the positions where `padding_mask` is 1.

    A sentence vector that reads only what masked-LM pretraining trains: the last layer's
    token vectors. BERT's `pooled_output` (dense + tanh on `[CLS]`) is trained only by the
    next-sentence head, so a model pretrained without NSP has a random pooler; a classifier
    on such a model reads this instead (`BertClassifier(pooling="mean")`), as
    sentence-transformers' models do.

    Call arguments:
        sequence_output: (batch, seq, hidden) float.
        padding_mask: (batch, seq) int or bool, 1 for real tokens.

    Returns:
        (batch, hidden): the mean of the real positions (a row without any is all zeros).
    """

    def call(self, sequence_output, padding_mask):
        mask = ops.cast(padding_mask, sequence_output.dtype)[:, :, None]  # (batch, seq, 1)
        total = ops.sum(sequence_output * mask, axis=1)  # (batch, hidden)
        count = ops.maximum(ops.sum(mask, axis=1), 1.0)  # (batch, 1)
        return total / count

    def compute_output_shape(self, sequence_output_shape, padding_mask_shape):
        return (sequence_output_shape[0], sequence_output_shape[2])
