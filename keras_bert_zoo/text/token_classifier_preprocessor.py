"""`TokenClassifierPreprocessor`: words + word labels -> `[CLS] pieces [SEP]` windows, in-graph.

The paper's NER recipe (§5.3): each word is WordPiece-tokenized and its label goes on
its FIRST piece; the other pieces, `[CLS]`, `[SEP]`, context and padding get label 0
and sample weight 0, so Keras' own loss and metrics skip them. A sentence longer than a
window is cut into windows every `window_stride` pieces and each word is scored in the
window where it has the most context (`run_squad.py`'s max-context rule), so every word
is labelled exactly once. With document context, a window that holds the whole sentence
is filled with the pieces of the sentences around it (the paper's "maximal document
context"); only the centre sentence is scored.
"""

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.text.segment_packer import SegmentPacker
from keras_bert_zoo.text.span_windows import max_context_windows, ranges, window_geometry
from keras_bert_zoo.text.tag_schemes import tag_chunks
from keras_bert_zoo.text.tokenizer_preprocessor import TokenizerPreprocessor

# Words are separated by any Unicode whitespace (RE2's \s is ASCII only).
WORD_SEPARATOR = r"[\s\p{Z}]+"


def split_words(texts):
    """(batch,) strings -> ragged (batch, words) words and their byte begins/ends."""
    return tf_text.regex_split_with_offsets(texts, WORD_SEPARATOR)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TokenClassifierPreprocessor(TokenizerPreprocessor):
    """Turns sentences (whitespace-separated words) and word labels into tagging windows.

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        sequence_length: int. Pieces per window row, `[CLS]` and `[SEP]` included.
            Defaults to 128.
        window_stride: int or None. Pieces between the starts of a long sentence's
            windows; None is half a window. Defaults to None.

    Call arguments:
        x: (batch,) strings, each a sentence's words joined by whitespace (CoNLL words
            joined by spaces, or raw text: then a word is what whitespace separates);
            or a tuple `(sentences, left_context, right_context)` of such strings for
            document context (the words before and after the sentence in its document).
        y: optional int word labels, (batch, words) ragged, or dense padded with any
            value (only the first `len(words)` entries of a row are read).
        sample_weight: not supported (the weights mark the scored pieces).

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask` (windows, length); with
        `y`, the tuple `(x, labels, sample_weight)`: int32 piece labels and float32
        weights (windows, length), 1.0 on the scored first pieces. There are as many
        windows as sentences unless a sentence needs more than one.

    Examples:
    >>> tokenizer = keras_bert_zoo.BertTokenizer("vocab.txt")
    >>> preprocessor = keras_bert_zoo.TokenClassifierPreprocessor(tokenizer, 8)
    >>> x, y, sample_weight = preprocessor(["EU rejects German call"], [[1, 0, 2, 0]])
    >>> [tokenizer.id_to_token(i) for i in x["token_ids"].numpy()[0]]
    ['[CLS]', 'eu', 'reject', '##s', 'german', 'call', '[SEP]', '[PAD]']
    >>> y.numpy().tolist(), sample_weight.numpy().tolist()  # scored: each word's first piece
    ([[0, 1, 0, 0, 2, 0, 0, 0]], [[0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]])
    """

    settings = ("sequence_length", "window_stride")

    def __init__(self, tokenizer, sequence_length=128, window_stride=None, **kwargs):
        super().__init__(tokenizer, **kwargs)
        if not isinstance(sequence_length, int) or isinstance(sequence_length, bool) or sequence_length < 3:
            raise ValueError(
                "`sequence_length` must be an int >= 3 ([CLS], one piece, [SEP]). "
                f"Received: sequence_length={sequence_length!r}."
            )
        if window_stride is not None and (
            not isinstance(window_stride, int) or isinstance(window_stride, bool) or window_stride < 1
        ):
            raise ValueError(f"`window_stride` must be a positive int or None. Received: window_stride={window_stride!r}.")
        self.sequence_length = sequence_length
        self.window_stride = window_stride
        self._packer = None

    @property
    def stride(self):
        return self.window_stride or max((self.sequence_length - 2) // 2, 1)

    def _word_pieces(self, words):
        """Ragged (batch, words) strings -> (batch, pieces) ids, first-piece flags, word index."""
        pieces = self.tokenizer.tokenize(words.flat_values)  # (total_words, pieces)
        # A word the tokenizer drops entirely (control characters) still needs a piece.
        empty = tf.cast(tf.equal(pieces.row_lengths(), 0), tf.int64)
        unk = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(empty)], tf.constant(self.tokenizer.unk_token_id, pieces.dtype)), empty
        )
        pieces = tf.concat([pieces, unk], axis=1)  # (total_words, >=1 pieces)
        per_word = pieces.row_lengths()
        per_sentence = tf.reduce_sum(words.with_flat_values(per_word), axis=1)  # (batch,)
        first = tf.equal(tf.ragged.range(per_word).flat_values, 0)  # (total pieces,)
        word_index = tf.repeat(tf.ragged.range(words.row_lengths()).flat_values, per_word)

        def as_rows(values):  # (total pieces,) -> (batch, pieces)
            return tf.RaggedTensor.from_row_lengths(values, per_sentence)

        return as_rows(pieces.flat_values), as_rows(first), as_rows(word_index)

    @staticmethod
    def _take(rows, example, starts, lengths):
        """Rows `example` of `rows`, positions [starts, starts + lengths): ragged (windows, None) + flat indices."""
        positions = ranges(starts, lengths)
        offsets = tf.gather(tf.gather(rows.row_starts(), example), positions.value_rowids())
        flat = positions.flat_values + offsets
        return positions.with_flat_values(tf.gather(rows.flat_values, flat)), flat

    def windows(self, x, y=None):
        """The windows and what decoding needs.

        Returns:
            dict: `token_ids`, `segment_ids`, `padding_mask` (windows, length);
            `example` int64 (windows,), the input row of each window; `word_index`
            int32 (windows, length), the word a scored piece labels, -1 elsewhere;
            with `y`, also `labels` int32 and `sample_weight` float32 (windows, length).
        """
        sentences, left, right = self._columns(x)
        words, _, _ = split_words(sentences)
        pieces, first, word_index = self._word_pieces(words)
        lengths = pieces.row_lengths()  # (batch,)
        room = tf.constant(self.sequence_length - 2, tf.int64)
        max_tokens = tf.fill(tf.shape(lengths), room)
        example, index, start, length, count = window_geometry(lengths, max_tokens, self.stride)
        best = max_context_windows(lengths, max_tokens, self.stride, count)  # (batch, pieces)
        ids, flat = self._take(pieces, example, start, length)  # (windows, pieces in window)
        window_of = tf.gather(index, ids.value_rowids())
        scored = tf.gather(first.flat_values, flat) & tf.equal(tf.gather(best.flat_values, flat), window_of)
        word = ids.with_flat_values(tf.where(scored, tf.gather(word_index.flat_values, flat), -1))
        if left is not None:
            # Only a window holding the whole sentence gets context, centred on it.
            budget = tf.where(tf.gather(count, example) == 1, room - length, 0)  # (windows,)
            left, _, _ = self._word_pieces(split_words(left)[0])
            right, _, _ = self._word_pieces(split_words(right)[0])
            n_left, n_right = tf.gather(left.row_lengths(), example), tf.gather(right.row_lengths(), example)
            take_left = tf.minimum(n_left, tf.maximum(budget // 2, budget - n_right))
            take_right = tf.minimum(n_right, budget - take_left)
            left_ids, _ = self._take(left, example, n_left - take_left, take_left)
            right_ids, _ = self._take(right, example, tf.zeros_like(take_right), take_right)
            ids = tf.concat([left_ids, ids, right_ids], axis=1)
            word = tf.concat([tf.ones_like(left_ids, tf.int64) * -1, word, tf.ones_like(right_ids, tf.int64) * -1], axis=1)
        out = self._pack(ids)
        out["example"] = example
        out["word_index"] = self._pad(word, -1)
        if y is not None:
            labels = self._word_labels(y, words.row_lengths())  # (batch, words)
            scored = word.flat_values >= 0
            offsets = tf.gather(tf.gather(labels.row_starts(), example), word.value_rowids())
            values = tf.gather(labels.flat_values, tf.where(scored, word.flat_values + offsets, 0))
            out["labels"] = self._pad(word.with_flat_values(tf.where(scored, values, 0)), 0)
            out["sample_weight"] = tf.cast(out["word_index"] >= 0, "float32")
        return out

    def _columns(self, x):
        """x -> (sentences, left context or None, right context or None), 1-D string tensors."""
        if not isinstance(x, tuple):
            return tf.reshape(tf.convert_to_tensor(x, tf.string), [-1]), None, None
        if len(x) != 3:
            raise ValueError(
                "`x` must be sentences (strings) or a tuple `(sentences, left_context, "
                f"right_context)`. Received a tuple of {len(x)} items."
            )
        sentences, left, right = (tf.reshape(tf.convert_to_tensor(c, tf.string), [-1]) for c in x)
        return sentences, left, right

    def _word_labels(self, y, word_counts):
        if isinstance(y, tf.RaggedTensor):
            return tf.cast(y, tf.int64)
        if isinstance(y, (list, tuple)) and y and isinstance(y[0], (list, tuple)):
            return tf.cast(tf.ragged.constant(y), tf.int64)
        dense = tf.cast(tf.convert_to_tensor(y), tf.int64)
        return tf.RaggedTensor.from_tensor(dense, lengths=word_counts)

    def _pad(self, values, fill):
        inner = tf.concat([tf.fill([values.nrows(), 1], tf.cast(fill, values.dtype)), values], axis=1)
        padded = inner.to_tensor(default_value=tf.cast(fill, values.dtype), shape=[None, self.sequence_length])
        return tf.cast(padded, "int32")

    def settings_changed(self):
        # Windows, stride and padding read the settings at call time; the packer is told its length.
        if self._packer is not None:
            self._packer.sequence_length = self.sequence_length

    def _pack(self, ids):
        if self._packer is None:
            self._packer = SegmentPacker(
                self.sequence_length,
                start_value=self.tokenizer.cls_token_id,
                end_value=self.tokenizer.sep_token_id,
                pad_value=self.tokenizer.pad_token_id,
                dtype="int32",
            )
        return dict(self._packer(ids))

    def call(self, x, y=None, sample_weight=None):
        if sample_weight is not None:
            raise ValueError(
                "`sample_weight` is set by the preprocessor (1.0 on each word's first piece). "
                "Received a sample_weight; drop it."
            )
        out = self.windows(x, y)
        inputs = {k: out[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        if y is None:
            return inputs
        return inputs, out["labels"], out["sample_weight"]

    # Decoding (eager, NumPy) -------------------------------------------------------
    @staticmethod
    def word_predictions(windows, piece_predictions, num_examples):
        """Per-piece predictions of the windows -> per-word predictions of each input.

        Args:
            windows: the dict `windows(x)` returned (`example`, `word_index`).
            piece_predictions: (windows, length, ...) array, e.g. label ids or logits.
            num_examples: int, the number of inputs.

        Returns:
            list (one per input) of arrays (words, ...): each word's value at its
            scored first piece.
        """
        example = np.asarray(windows["example"])
        word_index = np.asarray(windows["word_index"])
        piece_predictions = np.asarray(piece_predictions)
        rows, cols = np.nonzero(word_index >= 0)
        owner, word = example[rows], word_index[rows, cols]
        out = []
        for i in range(num_examples):
            mine = owner == i
            values = np.zeros((int(mine.sum()),) + piece_predictions.shape[2:], piece_predictions.dtype)
            values[word[mine]] = piece_predictions[rows[mine], cols[mine]]
            out.append(values)
        return out

    @staticmethod
    def entities(texts, word_tags):
        """Word tags (any scheme, read as conlleval does) -> entities with exact character spans.

        Args:
            texts: list of str, the inputs (words separated by whitespace).
            word_tags: list (per input) of lists of tag strings, one per word.

        Returns:
            list (per input) of dicts `{"type", "text", "start", "end"}`: `text ==
            input[start:end]` (Python character offsets), from the first character of
            the entity's first word to the last of its last word.
        """
        if isinstance(texts, str):
            raise TypeError("`texts` must be a list of strings. Received a single string; wrap it in a list.")
        words, begins, ends = split_words(tf.constant(list(texts), tf.string))
        results = []
        for i, text in enumerate(texts):
            encoded = text.encode("utf-8")
            # Byte offsets of valid UTF-8 -> character offsets.
            to_char = {b: len(encoded[:b].decode("utf-8")) for b in begins[i].numpy().tolist() + ends[i].numpy().tolist()}
            starts = [to_char[b] for b in begins[i].numpy().tolist()]
            stops = [to_char[b] for b in ends[i].numpy().tolist()]
            if len(word_tags[i]) != len(starts):
                raise ValueError(
                    f"Input {i} has {len(starts)} words but {len(word_tags[i])} tags; they must match."
                )
            found = []
            for kind, first, last in tag_chunks(list(word_tags[i])):
                start, end = starts[first], stops[last - 1]
                found.append({"type": kind, "text": text[start:end], "start": start, "end": end})
            results.append(found)
        return results

    @classmethod
    def from_preset(cls, preset, sequence_length=128, window_stride=None, truncate=None, lowercase=None, **kwargs):
        """Builds the preprocessor with a preset's vocabulary and casing (see
        `BertPreprocessor.from_preset`); `truncate` is accepted for `Task.from_preset`
        and unused (windows replace truncation)."""
        tokenizer = cls.preset_tokenizer(preset, lowercase, **kwargs)
        return cls(tokenizer, sequence_length=sequence_length, window_stride=window_stride)
