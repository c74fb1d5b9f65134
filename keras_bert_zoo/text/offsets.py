"""Maps byte offsets in normalised text back to character offsets in the input.

Normalisation (../text/normalize.py) deletes characters, inserts spaces around CJK
ideographs and may change byte lengths (lower-casing, NFD, dropping marks). Every step is
per character except two that keep byte lengths (final sigma: `σ`/`ς` are both 2 bytes)
or only reorder marks, so normalising each input character on its own gives the byte
length it contributes to the whole normalised string; a cumulative sum then maps any
normalised byte offset to the input character that produced it.
"""

import tensorflow as tf

from keras_bert_zoo.text import normalize as norm


def char_starts_in_normalized(strings, lowercase, strip_accents):
    """Byte offset in the normalised string where each input character's output starts.

    Args:
        strings: 1-D `tf.string` tensor of valid UTF-8 (already capped).
        lowercase: bool, as for `normalize.normalize`.
        strip_accents: bool or None, as for `normalize.normalize`.

    Returns:
        int64 `tf.RaggedTensor` (batch, chars): exclusive cumulative byte lengths.
    """
    codepoints = tf.strings.unicode_decode(strings, "UTF-8")  # (batch, chars)
    flat = codepoints.flat_values
    # ASCII needs no string ops: tab/LF/CR become a space, other controls vanish,
    # printable characters stay one byte (lower-casing and NFD keep ASCII as is).
    printable = tf.logical_and(flat >= 32, flat <= 126)
    whitespace = tf.logical_or(tf.equal(flat, 9), tf.logical_or(tf.equal(flat, 10), tf.equal(flat, 13)))
    lengths = tf.cast(tf.logical_or(printable, whitespace), tf.int64)
    # Other characters are normalised one by one (rare in English text).
    others = tf.where(flat >= 128)  # (k, 1)
    chars = tf.strings.unicode_encode(tf.gather_nd(flat, others)[:, tf.newaxis], "UTF-8")  # (k,)
    normalized = norm.normalize(chars, lowercase, strip_accents)
    other_lengths = tf.cast(tf.strings.length(normalized), tf.int64)
    lengths = tf.tensor_scatter_nd_update(lengths, others, other_lengths)
    lengths = codepoints.with_flat_values(lengths)
    starts = tf.cumsum(lengths, axis=1, exclusive=True)
    return starts


def bytes_to_chars(char_starts, byte_begins, byte_ends):
    """Converts token byte spans in normalised text to character spans in the input.

    A begin maps to the last input character whose output starts at or before it
    (skipping deleted characters before it); an end maps to one past the character
    holding the token's last byte.

    Args:
        char_starts: int64 ragged (batch, chars) from `char_starts_in_normalized`.
        byte_begins: int64 ragged (batch, tokens).
        byte_ends: int64 ragged (batch, tokens).

    Returns:
        (begins, ends): int64 ragged (batch, tokens), character offsets.
    """
    big = tf.constant(2**62, tf.int64)
    starts = char_starts.to_tensor(default_value=big)  # (batch, max_chars)
    # A sentinel column keeps the search defined for rows (or batches) of empty strings.
    sentinel = tf.fill(tf.stack([tf.shape(starts)[0], 1]), big)
    starts = tf.concat([starts, sentinel], axis=1)  # (batch, max_chars + 1)
    begins = byte_begins.to_tensor(default_value=0)  # (batch, max_tokens)
    ends = byte_ends.to_tensor(default_value=1)
    # searchsorted fails on an empty batch: search one extra row, then drop it.
    starts, begins, ends = (tf.pad(t, [[0, 1], [0, 0]], constant_values=v)
                            for t, v in ((starts, big), (begins, 0), (ends, 1)))
    begin_chars = tf.searchsorted(starts, begins, side="right")[:-1] - 1
    end_chars = tf.searchsorted(starts, ends - 1, side="right")[:-1]
    lengths = byte_begins.row_lengths()
    begin_chars = tf.RaggedTensor.from_tensor(tf.cast(begin_chars, tf.int64), lengths=lengths)
    end_chars = tf.RaggedTensor.from_tensor(tf.cast(end_chars, tf.int64), lengths=lengths)
    return begin_chars, end_chars
