"""`BertPreprocessor`: raw strings (or pairs) -> the backbone's inputs, in-graph."""

import keras

from keras_bert_zoo.text.segment_packer import TRUNCATE, SegmentPacker
from keras_bert_zoo.text.tokenizer_preprocessor import TokenizerPreprocessor


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertPreprocessor(TokenizerPreprocessor):
    """Tokenizes and packs a string, or a pair of strings, into backbone inputs.

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        sequence_length: int or None. Output length; None pads to the longest row.
            Defaults to 512.
        truncate: str. "longest_first" (the original fine-tuning rule), "round_robin"
            or "waterfall", see `SegmentPacker`. Defaults to "longest_first".

    Both may be set after construction (`preprocessor.sequence_length = 64`): the packer
    packs to the new values from the next call on (`TokenizerPreprocessor`).

    Call arguments:
        x: a string, a batch of strings, or a tuple `(text_a, text_b)` (or more) of them.
        y: optional labels, passed through.
        sample_weight: optional weights, passed through.

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask` (batch, length); with
        `y`/`sample_weight` the tuple `(x, y[, sample_weight])`, so the layer maps over
        a `tf.data.Dataset` of `((text_a, text_b), label)`.

    Examples:
    >>> preprocessor = keras_bert_zoo.BertPreprocessor.from_preset("tiny_preset", sequence_length=12)
    >>> x = preprocessor(("A man is eating.", "Someone eats."))
    >>> x["token_ids"].numpy().tolist()
    [2, 11, 18, 12, 20, 22, 3, 19, 20, 21, 5, 3]
    >>> x["segment_ids"].numpy().tolist()
    [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    """

    settings = ("sequence_length", "truncate")

    def __init__(self, tokenizer, sequence_length=512, truncate="longest_first", **kwargs):
        super().__init__(tokenizer, **kwargs)
        if truncate not in TRUNCATE:
            raise ValueError(f"`truncate` must be one of {TRUNCATE}. Received: truncate={truncate!r}.")
        self.sequence_length = sequence_length
        self.truncate = truncate
        self._packer = None
        if tokenizer.has_vocabulary():
            self._build_packer()

    def _build_packer(self):
        self._packer = SegmentPacker(
            self.sequence_length,
            start_value=self.tokenizer.cls_token_id,
            end_value=self.tokenizer.sep_token_id,
            pad_value=self.tokenizer.pad_token_id,
            truncate=self.truncate,
            dtype="int32",
        )

    def settings_changed(self):
        # The packer reads its length and rule at call time: the next call (and trace) packs so.
        if self._packer is not None:
            self._packer.sequence_length = self.sequence_length
            self._packer.truncate = self.truncate

    def call(self, x, y=None, sample_weight=None):
        if self._packer is None:  # the tokenizer got its vocabulary after construction
            self._build_packer()
        segments = _as_segments(x)
        ids = tuple(self.tokenizer.tokenize(s) for s in segments)
        outputs = self._packer(ids)
        return keras.utils.pack_x_y_sample_weight(outputs, y, sample_weight)

    def truncated_rows(self, x):
        """Whether each input is longer than `sequence_length` (`call` truncates it).

        Returns:
            bool tensor (batch,); all False when `sequence_length` is None.
        """
        segments = _as_segments(x)
        lengths = [self.tokenizer.tokenize(s).row_lengths() for s in segments]
        total = sum(lengths) + 1 + len(segments)  # [CLS] and one [SEP] per segment
        if self.sequence_length is None:
            return total < 0
        return total > self.sequence_length

    def compute_output_spec(self, x, y=None, sample_weight=None):
        first = _as_segments(x)[0]
        batch = tuple(first.shape)[:1] if getattr(first, "shape", None) is not None else ()
        shape = batch + (self.sequence_length,)
        outputs = {
            key: keras.KerasTensor(shape, dtype="int32")
            for key in ("token_ids", "segment_ids", "padding_mask")
        }
        return keras.utils.pack_x_y_sample_weight(outputs, y, sample_weight)

    @classmethod
    def from_preset(cls, preset, sequence_length=512, truncate="longest_first", lowercase=None, **kwargs):
        """Builds the preprocessor with the preset's vocabulary and casing.

        Args:
            preset: str. A registry name/alias or a local checkpoint directory or zip.
            sequence_length: int or None. Defaults to 512.
            truncate: str. See the class. Defaults to "longest_first".
            lowercase: bool or None. None uses the preset's casing; a value that
                contradicts it warns, as the original `validate_case_matches_checkpoint`.
            **kwargs: more `BertTokenizer` arguments (`strip_accents`, `errors`, ...).
        """
        tokenizer = cls.preset_tokenizer(preset, lowercase, **kwargs)
        return cls(tokenizer, sequence_length=sequence_length, truncate=truncate)


def _as_segments(x):
    """A tuple is segments; a list of pairs is transposed to segments; else one segment."""
    if isinstance(x, tuple):
        return x
    if isinstance(x, list) and x and all(isinstance(item, (tuple, list)) for item in x):
        return tuple(list(column) for column in zip(*x))
    return (x,)
