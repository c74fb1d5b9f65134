"""Whole-string WordPiece over normalised text, with the original's 200-character limit.

tensorflow-text's `FastWordpieceTokenizer` (with BERT pre-tokenization) splits on
whitespace and punctuation and runs greedy longest-match WordPiece in one fast op, but
its word limit counts UTF-8 bytes. `WordPiece` sets that limit to 4 bytes per allowed
character (so no legal word is cut) and then turns every word longer than the limit in
*characters* into a single `[UNK]`, as the original does. Words are recovered from the
pieces: a word starts at every piece that is not a `##` continuation.

The ids-only path (`tokenize`) avoids that work for most rows: a second op with a limit of
`max_chars_per_word` *bytes* is exact wherever no word has more bytes than characters
allowed yet no more characters than allowed (which needs non-ASCII characters). Rows that
are pure ASCII never have one; other rows are re-tokenized by the exact path only if they
hold a run of more than `max_chars_per_word` bytes between spaces (rare in running text).
"""

import warnings

import tensorflow as tf
import tensorflow_text as tf_text


class WordPiece:
    """Normalised strings -> WordPiece ids and byte offsets (not a Keras layer).

    Args:
        tokens: list of str, the vocabulary as the op may see it (id = index).
        is_continuation: list of bool per id, True for `##` pieces.
        unk_id: int. Id of `[UNK]`.
        max_chars_per_word: int. Longer words become `[UNK]`.
    """

    def __init__(self, tokens, is_continuation, unk_id, max_chars_per_word):
        self.unk_id = unk_id
        self.max_chars_per_word = max_chars_per_word
        self._is_continuation = tf.constant(is_continuation, tf.bool)
        # `FastWordpieceTokenizer` with BERT pre-tokenization (split on whitespace and
        # punctuation) is `FastBertTokenizer` without its normaliser, which we replace
        # (exactly, beforehand) and whose offset mapping costs a lot, in tf.data most.
        self._op = tf_text.FastWordpieceTokenizer(
            vocab=tokens,
            suffix_indicator="##",
            max_bytes_per_word=4 * max_chars_per_word,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            no_pretokenization=False,
        )
        # Words over `max_chars_per_word` bytes -> one [UNK]: exact for ASCII words.
        self._byte_limited_op = tf_text.FastWordpieceTokenizer(
            vocab=tokens,
            suffix_indicator="##",
            max_bytes_per_word=max_chars_per_word,
            token_out_type=tf.int32,
            unknown_token="[UNK]",
            no_pretokenization=False,
        )

    def tokenize(self, normalized, ascii_rows):
        """1-D normalised strings -> int32 ragged ids (batch, tokens).

        Args:
            normalized: 1-D `tf.string` tensor of normalised text.
            ascii_rows: bool (batch,), True where the row is known to be ASCII.
        """
        ids = self._byte_limited_op.tokenize(normalized)
        if ids.ragged_rank > 1:
            ids = ids.merge_dims(1, -1)
        # A word lies inside a run between spaces (the only whitespace left after
        # normalisation but line/paragraph separators, which only lengthen runs).
        others = tf.where(tf.logical_not(ascii_rows))[:, 0]
        runs = tf.strings.split(tf.gather(normalized, others), sep=" ")
        long_runs = tf.strings.length(runs.flat_values) > self.max_chars_per_word
        maybe_long = tf.math.unsorted_segment_max(
            tf.cast(long_runs, tf.int32), runs.value_rowids(), tf.size(others)
        ) > 0
        suspects = tf.boolean_mask(others, maybe_long)

        def exact_rows():
            exact = self.tokenize_with_offsets(tf.gather(normalized, suspects))[0]
            exact = tf.RaggedTensor.from_row_splits(
                tf.cast(exact.flat_values, ids.dtype), exact.row_splits, validate=False
            )
            n = ids.nrows(out_type=tf.int64)
            where = tf.tensor_scatter_nd_update(
                tf.range(n), suspects[:, tf.newaxis], n + tf.range(tf.size(suspects, out_type=tf.int64))
            )
            merged = tf.gather(tf.concat([ids, exact], axis=0), where)
            return merged.flat_values, merged.row_splits

        def fast_rows():
            return ids.flat_values, ids.row_splits

        values, splits = tf.cond(tf.size(suspects) > 0, exact_rows, fast_rows)
        return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

    def tokenize_with_offsets(self, normalized):
        """1-D normalised strings -> (ids, begins, ends), ragged (batch, tokens), bytes."""
        ids, begins, ends = self._op.tokenize_with_offsets(normalized)
        ids, begins, ends = (t.merge_dims(1, -1) if t.ragged_rank > 1 else t for t in (ids, begins, ends))
        flat_ids, flat_begins, flat_ends = ids.flat_values, begins.flat_values, ends.flat_values
        rows = ids.value_rowids()
        num = tf.shape(flat_ids, out_type=tf.int64)[0]
        is_start = tf.logical_not(tf.gather(self._is_continuation, flat_ids))
        # A piece ends its word when the next piece starts a word or a new row.
        next_starts = tf.logical_or(is_start[1:], tf.not_equal(rows[1:], rows[:-1]))
        is_end = tf.concat([next_starts, [True]], 0)[:num]
        word_begins = tf.boolean_mask(flat_begins, is_start)
        word_ends = tf.boolean_mask(flat_ends, is_end)
        word_rows = tf.boolean_mask(rows, is_start)
        too_long = self._too_long(normalized, word_rows, word_begins, word_ends)
        word_of_piece = tf.cumsum(tf.cast(is_start, tf.int64)) - 1
        long_piece = tf.gather(too_long, word_of_piece)
        keep = tf.logical_or(is_start, tf.logical_not(long_piece))
        flat_ids = tf.where(long_piece, tf.constant(self.unk_id, flat_ids.dtype), flat_ids)
        # The [UNK] of a long word spans the whole word.
        flat_ends = tf.where(long_piece, tf.gather(word_ends, word_of_piece), flat_ends)
        # Drop the continuation pieces of long words (flat ops: cheaper than ragged masks).
        row_lengths = tf.math.unsorted_segment_sum(
            tf.cast(keep, tf.int64), rows, ids.nrows(out_type=tf.int64)
        )
        return tuple(
            tf.RaggedTensor.from_row_lengths(tf.boolean_mask(values, keep), row_lengths, validate=False)
            for values in (flat_ids, flat_begins, flat_ends)
        )

    def _too_long(self, normalized, rows, begins, ends):
        """Per word: more than `max_chars_per_word` characters (checked only for words
        with more bytes than that, which are rare)."""
        nbytes = ends - begins
        candidates = tf.where(nbytes > self.max_chars_per_word)  # (k, 1)
        texts = tf.gather(normalized, tf.gather_nd(rows, candidates))
        spans = tf.strings.substr(
            texts, tf.gather_nd(begins, candidates), tf.gather_nd(nbytes, candidates), unit="BYTE"
        )
        long = tf.strings.length(spans, unit="UTF8_CHAR") > self.max_chars_per_word
        return tf.scatter_nd(candidates, long, tf.shape(nbytes, out_type=tf.int64))


def matchable_tokens(tokens, max_chars_per_word):
    """The vocabulary for the WordPiece op, ids unchanged.

    The op refuses tokens over 256 UTF-8 bytes (without `##`). Tokens longer than
    `max_chars_per_word` characters can never match (such words are [UNK]); both are
    replaced by placeholders that no word can match (`[` is always split off as
    punctuation). Tokens of <= 200 characters but > 256 bytes cannot be matched here
    although the original could match them; Google's vocabularies have none, so warn.
    """
    out, unmatchable = [], []
    for i, token in enumerate(tokens):
        body = token[2:] if token.startswith("##") else token
        if len(body.encode("utf-8")) > 256 or len(body) > max_chars_per_word:
            if len(body) <= max_chars_per_word:
                unmatchable.append(token)
            token = f"[kbz_unmatchable_{i}]"
        out.append(token)
    if unmatchable:
        warnings.warn(
            f"{len(unmatchable)} vocabulary tokens exceed 256 UTF-8 bytes and will never be "
            f"produced (first: {unmatchable[0][:40]!r}...).",
            stacklevel=5,
        )
    return out
