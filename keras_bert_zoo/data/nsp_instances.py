"""Next-sentence instances from a window of tokenized documents, in-graph and stateless.

Follows the original `create_instances_from_document`, vectorised over the documents of a
window: one `tf.while_loop` step emits every document's next chunk (the original adds
segments one by one until the chunk reaches the target length or the document ends; the
chunk's end is found at once, by a search over token offsets).
An instance is four token offsets into the window's flat token array (A and B are each
contiguous), so nothing is copied until the final `[CLS] A [SEP] B [SEP]` gather.
"""

import tensorflow as tf

STAT_KEYS = (
    "documents", "single_segment_documents", "segments", "long_segments", "tokens", "unknown_tokens",
    "short_target_documents", "instances", "random_next", "same_document_fallbacks", "single_segment_chunks", "truncated",
)


def _randint(u, low, high):
    """Maps uniforms in [0, 1) to ints in [low, high] (both inclusive, like `random.randint`)."""
    span = tf.cast(high - low + 1, tf.float32)
    return low + tf.minimum(tf.cast(tf.floor(u * span), tf.int32), high - low)


def _loop_step(t, chunk_start, c):
    """Emits every active document's next chunk; returns the new chunk starts and the record.

    Only what the walk depends on is drawn here (where A ends, whether B is random); the
    random document and its segments are drawn after the loop, for emitted chunks only.
    """
    nseg, starts, seg_splits = c["nseg"], c["doc_starts"], c["seg_splits"]
    active = chunk_start < nseg
    first = starts + tf.minimum(chunk_start, nseg - 1)  # global index of the chunk's first segment
    # The chunk ends at its first segment where the chunk reaches `target` tokens, or at
    # the document's last segment.
    want = tf.gather(seg_splits, first) + c["target"]
    last = tf.searchsorted(seg_splits, want, side="left") - 1
    last = tf.clip_by_value(last, first, starts + nseg - 1)
    n = last - first + 1  # segments in the chunk
    u = tf.random.stateless_uniform([c["d"], 2], tf.random.experimental.stateless_fold_in(c["seed"], t))
    a_end = tf.where(n >= 2, _randint(u[:, 0], 1, n - 1), 1)
    is_random = (n == 1) | (u[:, 1] < 0.5)
    end = last - starts  # the chunk's last segment, in the document
    record = tf.stack([chunk_start, a_end, end, tf.cast(is_random, tf.int32), tf.cast(active, tf.int32)], axis=1)
    # A random next puts the chunk's unused segments back: the next chunk starts after A.
    chunk_start = tf.where(active, tf.where(is_random, chunk_start + a_end, end + 1), chunk_start)
    return chunk_start, record


def _pair_offsets(docs, seed, max_num_tokens, short_seq_prob):
    """Runs the chunking loop; returns (records (N, 7), short-target flags per document).

    Record columns: A start, A end, B start, B end (token offsets), random-next label,
    same-document fallback, single-segment chunk (random next forced, no coin drawn).
    """
    seg_splits = docs.values.row_splits  # token offsets of segments
    doc_splits = docs.row_splits  # segment offsets of documents
    d = tf.shape(doc_splits)[0] - 1
    nseg = doc_splits[1:] - doc_splits[:-1]
    starts = doc_splits[:-1]
    seeds = tf.unstack(tf.random.experimental.stateless_split(seed, 3))
    u = tf.random.stateless_uniform([d, 2], seeds[0])
    short = u[:, 0] < short_seq_prob
    # The original draws the target length once per document.
    target = tf.where(short, _randint(u[:, 1], 2, max_num_tokens), max_num_tokens)
    consts = dict(nseg=nseg, doc_starts=starts, seg_splits=seg_splits, target=target, d=d, seed=seeds[1])

    def body(t, chunk_start, ta):
        chunk_start, record = _loop_step(t, chunk_start, consts)
        return t + 1, chunk_start, ta.write(t + 1, record)

    # Element 0 emits nothing; it keeps the stack defined when the window has no document.
    ta = tf.TensorArray(tf.int32, size=1, dynamic_size=True, element_shape=[None, 5])
    ta = ta.write(0, tf.zeros([d, 5], tf.int32))
    _, _, ta = tf.while_loop(lambda t, chunk_start, ta: tf.reduce_any(chunk_start < nseg), body,
                             (tf.constant(0), tf.zeros([d], tf.int32), ta))
    steps = ta.stack()  # (iterations, docs, 5)
    emitted = tf.where(steps[:, :, 4] > 0)
    chunk_start, a_end, i, is_random = tf.unstack(tf.gather_nd(steps, emitted)[:, :4], axis=1)
    doc = tf.cast(emitted[:, 1], tf.int32)
    doc_start = tf.gather(starts, doc)
    first = doc_start + chunk_start  # the chunk's first segment
    a_s = tf.gather(seg_splits, first)
    a_e = tf.gather(seg_splits, first + a_end)
    # Random next: 10 tries to draw another document (the last draw stands otherwise),
    # a random start segment in it, then segments until B reaches target - len(A).
    u = tf.random.stateless_uniform([tf.shape(doc)[0], 11], seeds[2])
    tries = _randint(u[:, :10], 0, d - 1)
    ok = tries != doc[:, None]
    any_ok = tf.reduce_any(ok, axis=1)
    r = tf.where(any_ok, tf.gather(tries, tf.argmax(ok, axis=1, output_type=tf.int32), batch_dims=1), tries[:, 9])
    rg = tf.gather(starts, r) + _randint(u[:, 10], 0, tf.gather(nseg, r) - 1)
    b_s_rand = tf.gather(seg_splits, rg)
    j = tf.searchsorted(seg_splits, b_s_rand + tf.gather(target, doc) - (a_e - a_s), side="left")
    j = tf.clip_by_value(j, rg + 1, tf.gather(starts + nseg, r))
    random = is_random > 0
    b_s = tf.where(random, b_s_rand, a_e)
    b_e = tf.where(random, tf.gather(seg_splits, j), tf.gather(seg_splits, doc_start + i + 1))
    fallback = tf.cast(random & ~any_ok, tf.int32)
    single = tf.cast(i == chunk_start, tf.int32)
    return tf.stack([a_s, a_e, b_s, b_e, is_random, fallback, single], axis=1), short


def _truncate(a_s, a_e, b_s, b_e, max_num_tokens, seed):
    """`truncate_seq_pair` in closed form: which side loses how many tokens is fixed by the
    lengths (the longer, B on ties); each removal is from the front or back with p=0.5."""
    la, lb = a_e - a_s, b_e - b_s
    excess = tf.maximum(0, la + lb - max_num_tokens)
    to_longer = tf.minimum(excess, tf.abs(la - lb))
    rest = excess - to_longer
    ra = tf.where(la > lb, to_longer, 0) + rest // 2
    rb = tf.where(la > lb, 0, to_longer) + rest - rest // 2
    seeds = tf.random.experimental.stateless_split(seed, 2)
    n = tf.shape(la)
    front_a = tf.random.stateless_binomial(n, seeds[0], tf.cast(ra, tf.float32), 0.5, output_dtype=tf.int32)
    front_b = tf.random.stateless_binomial(n, seeds[1], tf.cast(rb, tf.float32), 0.5, output_dtype=tf.int32)
    return a_s + front_a, a_e - (ra - front_a), b_s + front_b, b_e - (rb - front_b), excess > 0


def _assemble(flat, a_s, a_e, b_s, b_e, sequence_length, cls_id, sep_id):
    """Dense `[CLS] A [SEP] B [SEP]` (N, S) token ids, segment ids and padding mask."""
    la, lb = (a_e - a_s)[:, None], (b_e - b_s)[:, None]
    p = tf.range(sequence_length)[None]
    in_a = (p >= 1) & (p <= la)
    in_b = (p >= la + 2) & (p <= la + lb + 1)
    src = tf.where(in_a, a_s[:, None] + p - 1, tf.where(in_b, b_s[:, None] + p - la - 2, 0))
    ids = tf.gather(flat, src)
    ids = tf.where(in_a | in_b, ids, 0)
    ids = tf.where(p == 0, cls_id, ids)
    ids = tf.where((p == la + 1) | (p == la + lb + 2), sep_id, ids)
    mask = tf.cast(p <= la + lb + 2, tf.int32)
    segments = tf.cast((p >= la + 2) & (p <= la + lb + 2), tf.int32)
    return ids, segments, mask


def build_instances(docs, seed, sequence_length, short_seq_prob, special_ids):
    """Builds NSP instances from a window of tokenized documents.

    Deviation from the original: the random next document is drawn from the same window
    (not the whole corpus), and instances are shuffled within the window.

    Args:
        docs: int32 `tf.RaggedTensor` `(docs, segments, tokens)`; no empty segment or document.
        seed: int32 tensor `(2,)`.
        sequence_length: int. `max_seq_length`.
        short_seq_prob: float.
        special_ids: dict with `cls`, `sep`, `unk` ids.

    Returns:
        (features, stats): features `token_ids`, `segment_ids`, `padding_mask` (N, S) and
        `nsp_labels` (N,) int32 (1 = random next); stats a dict of int64 counts (`STAT_KEYS`)
        plus `length_histogram` (S + 1,) of real lengths.
    """
    docs = docs.with_row_splits_dtype(tf.int32)
    max_num_tokens = sequence_length - 3
    seeds = tf.random.experimental.stateless_split(seed, 3)
    records, short = _pair_offsets(docs, seeds[0], max_num_tokens, short_seq_prob)
    perm = tf.argsort(tf.random.stateless_uniform(tf.shape(records)[:1], seeds[1]))
    records = tf.gather(records, perm)
    a_s, a_e, b_s, b_e, truncated = _truncate(*tf.unstack(records[:, :4], axis=1), max_num_tokens, seeds[2])
    flat = docs.flat_values
    ids, segments, mask = _assemble(flat, a_s, a_e, b_s, b_e, sequence_length, special_ids["cls"], special_ids["sep"])
    features = {"token_ids": ids, "segment_ids": segments, "padding_mask": mask, "nsp_labels": records[:, 4]}
    seg_lens = docs.values.row_lengths()
    nseg = docs.row_lengths()
    count = lambda x: tf.reduce_sum(tf.cast(x, tf.int64))  # noqa: E731
    stats = {
        "documents": count(tf.size(nseg)),
        "single_segment_documents": count(nseg == 1),
        "segments": count(tf.size(seg_lens)),
        "long_segments": count(seg_lens > max_num_tokens),
        "tokens": count(tf.size(flat)),
        "unknown_tokens": count(flat == special_ids["unk"]),
        "short_target_documents": count(short),
        "instances": count(tf.shape(records)[0]),
        "random_next": count(records[:, 4]),
        "same_document_fallbacks": count(records[:, 5]),
        "single_segment_chunks": count(records[:, 6]),
        "truncated": count(truncated),
        "length_histogram": tf.math.bincount(tf.reduce_sum(mask, 1), minlength=sequence_length + 1,
                                             maxlength=sequence_length + 1, dtype=tf.int64),
    }
    return features, stats
