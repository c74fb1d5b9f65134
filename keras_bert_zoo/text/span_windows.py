"""Window geometry, "max context" and answer labels of the original `run_squad.py`, in TF ops.

Helpers of `SpanExtractorPreprocessor`; each works on a batch at once (ragged tensors),
never example by example.
"""

import tensorflow as tf

# `run_squad.py`'s `is_whitespace`: the characters that separate its "words".
_SQUAD_WHITESPACE = (32, 9, 13, 10, 0x202F)
_LOW32 = 2**32 - 1

# Whose windows and decoding a span extractor follows: the original `run_squad.py`, or
# HF's `pipeline("question-answering")` (same answers as it for the same weights).
RULES = ("original", "hf_pipeline")


def check_rules(rules):
    """`rules` if it is one of `RULES`, else a ValueError that names them."""
    if rules not in RULES:
        raise ValueError(
            f"`rules` must be one of {RULES}: 'original' (run_squad.py's windows and decoding) or "
            f"'hf_pipeline' (HF's question-answering pipeline's). Received: rules={rules!r}."
        )
    return rules


def ranges(starts, lengths):
    """int64 ragged rows `[start, start + length)`."""
    return tf.ragged.range(starts, starts + lengths)


def _ceil_div(a, b):
    return -tf.math.floordiv(-a, b)


def window_step(max_doc_tokens, doc_stride, overlap=False):
    """Context tokens between window starts.

    The original's `doc_stride` is the step (at most a window); with `overlap` it is,
    as HF tokenizers' `stride` (HF's QA pipeline and `run_qa.py`), the number of tokens
    consecutive windows share, so the step is the window less `doc_stride` (at least 1).
    Either way window i starts at i x step and the last one ends at the context's end.
    """
    if overlap:
        return tf.maximum(max_doc_tokens - doc_stride, 1)
    return tf.minimum(max_doc_tokens, doc_stride)


def window_geometry(doc_lengths, max_doc_tokens, doc_stride, overlap=False):
    """Start and length of every window, as the original's `doc_spans` loop.

    Args:
        doc_lengths: int64 (batch,) context tokens per example.
        max_doc_tokens: int64 (batch,) context tokens a window holds.
        doc_stride: int, the stride.
        overlap: bool. `doc_stride` counts shared tokens (see `window_step`).

    Returns:
        (example, index, start, length, count): int64 (windows,) x4 and (batch,) windows
        per example. An empty context still gets one (empty) window.
    """
    step = window_step(max_doc_tokens, doc_stride, overlap)  # (batch,)
    extra = tf.maximum(_ceil_div(doc_lengths - max_doc_tokens, step), 0)
    count = extra + 1  # (batch,)
    example = tf.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)  # (windows,)
    index = tf.ragged.range(count).flat_values  # (windows,)
    start = index * tf.gather(step, example)
    length = tf.minimum(tf.gather(doc_lengths, example) - start, tf.gather(max_doc_tokens, example))
    return example, index, start, length, count


def max_context_windows(doc_lengths, max_doc_tokens, doc_stride, count, overlap=False):
    """The window that is each context token's "max context" one.

    The original scores window j for token p as min(left, right context) + 0.01 x
    length and keeps the first best. Full-length windows score a tent in j, so only the
    two windows around the token's centred one can win, plus the (shorter) last window:
    three candidates per token, compared in exact integers (100 x score).

    Returns:
        int64 ragged (batch, tokens): window index per context token.
    """
    step = window_step(max_doc_tokens, doc_stride, overlap)
    positions = tf.ragged.range(doc_lengths)  # (batch, tokens)
    rows = positions.value_rowids()
    p = positions.flat_values
    n, m, s, k = (tf.gather(v, rows) for v in (doc_lengths, max_doc_tokens, step, count))
    last = k - 1
    low = tf.maximum(_ceil_div(p - m + 1, s), 0)
    high = tf.minimum(tf.math.floordiv(p, s), last - 1)  # full-length windows only
    centre = 2 * p - (m - 1)
    candidates = [
        tf.clip_by_value(tf.math.floordiv(centre, 2 * s), low, tf.maximum(high, low)),
        tf.clip_by_value(_ceil_div(centre, 2 * s), low, tf.maximum(high, low)),
        last,
    ]
    valid = [low <= high, low <= high, p >= last * s]
    keys = []
    for j, ok in zip(candidates, valid):
        start = j * s
        length = tf.minimum(n - start, m)
        score = 100 * tf.minimum(p - start, start + length - 1 - p) + length
        # Highest score first, then the lowest window index (the original's strict `>`).
        keys.append(tf.where(ok, score * 2**32 + (_LOW32 - j), -1))
    best = tf.reduce_max(tf.stack(keys, axis=1), axis=1)  # (tokens,)
    best_window = _LOW32 - tf.bitwise.bitwise_and(best, _LOW32)
    return positions.with_flat_values(best_window)


def answer_texts(contexts, answer_spans):
    """The answers' text, cut from the contexts by character span ("" for no answer)."""
    spans = tf.cast(tf.reshape(answer_spans, [-1, 2]), tf.int64)
    char_start, char_end = spans[:, 0], spans[:, 1]
    length = tf.where(char_start >= 0, tf.maximum(char_end - char_start, 0), 0)
    return tf.strings.substr(contexts, tf.maximum(char_start, 0), length, unit="UTF8_CHAR")


def answer_token_spans(contexts, doc, begins, answer_spans, answer):
    """Context-token span of each answer, as the original's reader and `_improve_answer_span`.

    The character span picks whitespace words (`run_squad.py`'s split); their tokens
    are the span, narrowed to the first sub-span whose ids equal the tokenized answer.

    Args:
        contexts: (batch,) valid UTF-8 strings.
        doc: int ragged (batch, tokens) context ids; `begins` their character starts.
        answer_spans: int (batch, 2) character spans; start < 0 for no answer.
        answer: int ragged (batch, tokens): the ids of `answer_texts(contexts, answer_spans)`.

    Returns:
        (token_start, token_end, has_answer): int64, int64, bool (batch,).
    """
    spans = tf.cast(tf.reshape(answer_spans, [-1, 2]), tf.int64)
    char_start, char_end = spans[:, 0], spans[:, 1]
    has_answer = char_start >= 0
    chars = tf.strings.unicode_decode(contexts, "UTF-8")  # (batch, chars)
    codepoints = chars.flat_values
    is_space = tf.reduce_any(tf.equal(codepoints[:, tf.newaxis], _SQUAD_WHITESPACE), axis=1)
    rowids = chars.value_rowids()
    first = tf.concat([[True], tf.not_equal(rowids[1:], rowids[:-1])], axis=0)[: tf.size(rowids)]
    previous_space = tf.concat([[True], is_space[:-1]], axis=0)[: tf.size(rowids)]
    word_start = tf.logical_not(is_space) & (previous_space | first)
    # Global word numbers: only compared within a row, so no per-row reset is needed.
    word = tf.cumsum(tf.cast(word_start, tf.int64)) - 1
    word = tf.concat([word, [2**62]], axis=0)  # a sentinel for empty contexts
    row_starts, row_lengths = chars.row_starts(), chars.row_lengths()
    last_char = tf.maximum(row_lengths - 1, 0)
    answer_first = tf.clip_by_value(char_start, 0, last_char)
    answer_last = tf.clip_by_value(tf.maximum(char_end - 1, char_start), 0, last_char)
    word_first = tf.gather(word, row_starts + answer_first)
    word_last = tf.gather(word, row_starts + answer_last)
    # Flat over all context tokens (ragged broadcasting would cost hundreds of graph ops).
    batch = tf.size(char_start)
    token_row = begins.value_rowids()
    token_word = tf.gather(word, begins.flat_values + tf.gather(row_starts, token_row))

    def count_per_row(flags):
        return tf.math.unsorted_segment_sum(tf.cast(flags, tf.int64), token_row, batch)

    token_start = count_per_row(token_word < tf.gather(word_first, token_row))
    token_end = count_per_row(token_word <= tf.gather(word_last, token_row)) - 1
    # _improve_answer_span: the first sub-span inside [token_start, token_end] equal to the answer.
    answer_lengths = tf.cast(answer.row_lengths(), tf.int64)
    count = tf.where(has_answer & (answer_lengths > 0), tf.maximum(token_end - token_start - answer_lengths + 2, 0), 0)
    candidate_row = tf.repeat(tf.range(tf.size(count, out_type=tf.int64)), count)  # (candidates,)
    candidate = tf.gather(token_start, candidate_row) + tf.ragged.range(count).flat_values
    # Token j of every candidate: (candidate, j) pairs, flat.
    offsets = tf.ragged.range(tf.gather(answer_lengths, candidate_row))
    owner, j = offsets.value_rowids(), offsets.flat_values
    doc_at = tf.gather(tf.gather(doc.row_starts(), candidate_row) + candidate, owner) + j
    answer_at = tf.gather(tf.gather(answer.row_starts(), candidate_row), owner) + j
    equal = tf.equal(tf.gather(doc.flat_values, doc_at), tf.gather(answer.flat_values, answer_at))
    # (candidates,) 1 where every token matches.
    matches = tf.math.unsorted_segment_min(tf.cast(equal, tf.int32), owner, tf.size(candidate_row))
    never = tf.constant(2**62, tf.int64)
    first_match = tf.math.unsorted_segment_min(tf.where(matches > 0, candidate, never), candidate_row, batch)
    found = first_match < never
    token_start = tf.where(found, first_match, token_start)
    token_end = tf.where(found, first_match + answer_lengths - 1, token_end)
    return token_start, token_end, has_answer
