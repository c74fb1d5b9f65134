"""`MultipleChoicePreprocessor`: (context, [ending_1 … ending_C]) → C packed pairs per example."""

import keras
import tensorflow as tf

from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor


def _flatten_choices(x):
    """`(contexts (batch,), endings (batch, choices))` → the two columns of the
    `batch * choices` pairs, and the number of choices."""
    if not isinstance(x, tuple) or len(x) != 2:
        raise ValueError(
            "Multiple-choice inputs must be a tuple `(contexts, endings)`: `contexts` (batch,) "
            f"strings, `endings` (batch, num_choices) strings. Received: {type(x).__name__}."
        )
    contexts, endings = (tf.convert_to_tensor(column) for column in x)
    if endings.shape.rank != contexts.shape.rank + 1:
        raise ValueError(
            "`endings` must have one more axis than `contexts` (one list of endings per context). "
            f"Received: contexts of shape {contexts.shape}, endings of shape {endings.shape}."
        )
    choices = tf.shape(endings)[-1]
    repeated = tf.repeat(tf.reshape(contexts, [-1]), choices)  # (batch * choices,)
    return (repeated, tf.reshape(endings, [-1])), choices


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MultipleChoicePreprocessor(BertPreprocessor):
    """Packs each (context, ending) pair as `[CLS] context [SEP] ending [SEP]` (SWAG, §4.4).

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        sequence_length: int. Length of each packed pair. Defaults to 128.
        truncate: str. Pair truncation rule, see `BertPreprocessor`. Defaults to
            "longest_first" (the original's).

    Call arguments:
        x: a tuple `(contexts, endings)`: `contexts` a batch of strings (batch,),
            `endings` (batch, num_choices) strings (a list of lists or an array).
        y: optional labels (the index of the right ending), passed through.
        sample_weight: optional, passed through.

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask`, each
        (batch, num_choices, sequence_length); with `y` the tuple `(x, y[, sample_weight])`.

    Examples:
    >>> preprocessor = keras_bert_zoo.MultipleChoicePreprocessor.from_preset("tiny_preset", sequence_length=16)
    >>> x = preprocessor((["A man sits down."], [["He eats.", "He flies.", "It rains.", "Cars."]]))
    >>> tuple(x["token_ids"].shape)
    (1, 4, 16)
    """

    def __init__(self, tokenizer, sequence_length=128, truncate="longest_first", **kwargs):
        if sequence_length is None:
            raise ValueError(
                "MultipleChoicePreprocessor needs a fixed `sequence_length` (the choices of one "
                "example share it). Received: sequence_length=None."
            )
        super().__init__(tokenizer, sequence_length=sequence_length, truncate=truncate, **kwargs)

    def call(self, x, y=None, sample_weight=None):
        pairs, choices = _flatten_choices(x)
        packed = super().call(pairs)  # (batch * choices, seq) each
        outputs = {
            key: tf.reshape(value, [-1, choices, self.sequence_length])  # (batch, choices, seq)
            for key, value in packed.items()
        }
        return keras.utils.pack_x_y_sample_weight(outputs, y, sample_weight)

    def truncated_rows(self, x):
        """Whether each (context, ending) pair is truncated: bool (batch, num_choices)."""
        pairs, choices = _flatten_choices(x)
        return tf.reshape(super().truncated_rows(pairs), [-1, choices])

    def compute_output_spec(self, x, y=None, sample_weight=None):
        endings = x[1]
        shape = tuple(getattr(endings, "shape", (None, None)))[:2] + (self.sequence_length,)
        outputs = {
            key: keras.KerasTensor(shape, dtype="int32") for key in ("token_ids", "segment_ids", "padding_mask")
        }
        return keras.utils.pack_x_y_sample_weight(outputs, y, sample_weight)
