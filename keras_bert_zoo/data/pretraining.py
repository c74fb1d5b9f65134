"""Pretraining batches (masked LM + next sentence) from raw documents, on the fly.

documents (`data/documents.py`) → windows of tokenized documents → NSP instances
(`data/nsp_instances.py`) → MLM masking (`text/mlm_masker.py`) → batches in the shared
layout: `x = {token_ids, segment_ids, padding_mask, mask_positions}`,
`y = {mlm_ids, mlm_weights, nsp_labels}`.
"""

import weakref

import tensorflow as tf

from keras_bert_zoo.data.documents import documents_dataset, without_autograph
from keras_bert_zoo.data.nsp_instances import build_instances
from keras_bert_zoo.text.mlm_masker import MLMMasker

SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _check(name, value, ok, fix):
    if not ok:
        raise ValueError(f"`{name}` {fix}. Received: {name}={value!r}.")


def validate_options(sequence_length, max_predictions, masked_lm_prob, short_seq_prob, window_size):
    """Raises ValueError naming the first bad option."""
    _check("sequence_length", sequence_length, isinstance(sequence_length, int) and sequence_length >= 5,
           "must be an int >= 5 ([CLS] A [SEP] B [SEP] needs 5 positions)")
    _check("max_predictions", max_predictions, isinstance(max_predictions, int) and max_predictions >= 1,
           "must be a positive int")
    _check("masked_lm_prob", masked_lm_prob, isinstance(masked_lm_prob, float) and 0.0 < masked_lm_prob < 1.0,
           "must be a float in (0, 1)")
    _check("short_seq_prob", short_seq_prob, isinstance(short_seq_prob, (int, float)) and 0 <= short_seq_prob <= 1,
           "must be a number in [0, 1]")
    _check("window_size", window_size, isinstance(window_size, int) and window_size >= 2,
           "must be an int >= 2 (documents among which the random next segment is drawn)")


def special_token_ids(tokenizer):
    """Returns `{pad, unk, cls, sep, mask}` ids from `tokenizer.get_vocabulary()`."""
    vocab = tokenizer.get_vocabulary()
    index = {t: i for i, t in enumerate(vocab)}
    missing = [t for t in SPECIALS if t not in index]
    if missing:
        raise ValueError(f"The tokenizer's vocabulary lacks {missing}; BERT pretraining needs {list(SPECIALS)}.")
    return {t.strip("[]").lower(): index[t] for t in SPECIALS}


def _tokenize_window(tokenizer, lines, bad):
    """(docs, lines) strings → (docs, segments, tokens) ids, without empty segments/documents."""
    ids = tokenizer(lines.flat_values)
    if isinstance(ids, tf.RaggedTensor) and ids.ragged_rank > 1:
        ids = ids.merge_dims(1, -1)
    # Flat ops only (ragged masking adds hundreds of ops to trace): empty lines hold no
    # token, so dropping them only drops their zero row lengths.
    line_lengths = tf.cast(ids.row_lengths(), tf.int64)
    keep = line_lengths > 0
    num_docs = lines.nrows(out_type=tf.int64)
    segments = tf.math.unsorted_segment_sum(tf.cast(keep, tf.int64), lines.value_rowids(), num_docs)
    nonempty = segments > 0
    docs = tf.RaggedTensor.from_nested_row_lengths(
        tf.cast(ids.flat_values, tf.int32), [tf.boolean_mask(segments, nonempty), tf.boolean_mask(line_lengths, keep)],
        validate=False)
    empty_documents = num_docs - tf.reduce_sum(tf.cast(nonempty, tf.int64))
    return docs, empty_documents, tf.reduce_sum(tf.cast(bad, tf.int64))


def instance_windows(files, tokenizer, masker, sequence_length=128, short_seq_prob=0.1, seed=12345,
                     epochs=None, window_size=256, cache_tokens=False):
    """Dataset of `(features, stats)`, one element per window of documents and epoch.

    Every random draw is stateless, from `seed`, the epoch and the window index, so the
    stream is reproducible and its iterator can be checkpointed. Epoch `e` re-chunks,
    re-pairs and re-masks the corpus (the original's `dupe_factor` rounds).

    Args:
        files: str or list of str. Text files / globs (see `documents_dataset`).
        tokenizer: callable strings → ragged int ids with `get_vocabulary()`.
        masker: `MLMMasker`.
        sequence_length: int. Defaults to 128.
        short_seq_prob: float. Defaults to 0.1.
        seed: int. Defaults to 12345.
        epochs: int or None (forever).
        window_size: int. Documents per window; the random next document is drawn among
            them (the original draws from the whole corpus). Defaults to 256.
        cache_tokens: bool. Keep the tokenized documents in memory after the first epoch
            (the static writer does, per shard); False streams. Defaults to False.

    Returns:
        `tf.data.Dataset` of `(features, stats)`: features dict of (N, ...) tensors
        (shared batch layout plus `nsp_labels`), stats dict of counts
        (`nsp_instances.STAT_KEYS`, `length_histogram`, `empty_documents`,
        `invalid_utf8_lines`, `masked`, `mask_cap_hits`, `mask_replaced`, `mask_kept`).
    """
    specials = special_token_ids(tokenizer)
    base = tf.cast(tf.stack([seed % (2**31), seed // (2**31)]), tf.int32)  # seed: int or int64 tensor
    tokenize, window = _window_functions(tokenizer, masker, sequence_length, short_seq_prob, specials)
    windows = documents_dataset(files).ragged_batch(window_size).enumerate()
    windows = windows.map(without_autograph(lambda i, d: (i,) + tokenize(*d)),
                          num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if cache_tokens:
        windows = windows.cache()
    windows = windows.repeat(epochs)

    def count_epochs(epoch, element):  # window index 0 starts a new epoch
        epoch = epoch + tf.cast(tf.equal(element[0], 0), tf.int64)
        return epoch, (epoch,) + element

    windows = windows.scan(tf.constant(-1, tf.int64), without_autograph(count_epochs))
    return windows.map(without_autograph(lambda *element: window(base, *element)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


# `(tokenize, window)` tf.functions per tokenizer and settings. tf.data traces the functions
# of every new dataset again; these keep their traces, so a run that builds its pipeline
# several times (the corpus check, training, held-out batches) traces the costly graphs
# once.
_FUNCTIONS = weakref.WeakKeyDictionary()


def _window_functions(tokenizer, masker, sequence_length, short_seq_prob, specials):
    # The vocabulary too: `set_vocabulary` gives the same tokenizer new tables.
    key = (sequence_length, float(short_seq_prob), hash(tuple(tokenizer.get_vocabulary())),
           repr(sorted((k, v) for k, v in masker.get_config().items() if k != "name")))
    try:
        per_tokenizer = _FUNCTIONS.setdefault(tokenizer, {})
    except TypeError:  # a tokenizer that cannot be weakly referenced: trace per dataset
        per_tokenizer = {}
    if key not in per_tokenizer:
        per_tokenizer[key] = _make_window_functions(tokenizer, masker, sequence_length, short_seq_prob, specials)
    return per_tokenizer[key]


def _make_window_functions(tokenizer, masker, sequence_length, short_seq_prob, specials):
    # A weak reference: the functions are values of `_FUNCTIONS`, whose key is the tokenizer
    # (a strong one would keep it, and them, alive for good).
    tokenizer = weakref.ref(tokenizer)

    def tokenize(lines, bad):
        return _tokenize_window(tokenizer(), lines, bad)

    def window(base, epoch, index, doc_ids, empty_documents, bad_lines):
        key = tf.random.experimental.stateless_fold_in(base, tf.cast(epoch, tf.int32))
        key = tf.random.experimental.stateless_fold_in(key, tf.cast(index, tf.int32))
        n = doc_ids.nrows()
        # The original shuffles the documents first; we shuffle within the window.
        doc_ids = tf.gather(doc_ids, tf.argsort(tf.random.stateless_uniform([n], key)))
        inst_key, mask_key = tf.unstack(tf.random.experimental.stateless_split(key, 2))
        features, stats = build_instances(doc_ids, inst_key, sequence_length, short_seq_prob, specials)
        masked = masker(features["token_ids"], padding_mask=features["padding_mask"], seed=mask_key)
        features.update(masked)
        stats.update(_mask_stats(features, masker, specials["mask"]))
        stats.update(empty_documents=empty_documents, invalid_utf8_lines=bad_lines)
        return features, stats

    return tf.function(tokenize, autograph=False), tf.function(window, autograph=False)


def _mask_stats(features, masker, mask_id):
    weights = features["mlm_weights"] > 0
    length = tf.reduce_sum(tf.cast(features["padding_mask"], tf.float64), axis=1)
    wanted = tf.round(length * masker.mask_selection_rate)
    masked_ids = tf.gather(features["token_ids"], features["mask_positions"], batch_dims=1)
    count = lambda x: tf.reduce_sum(tf.cast(x, tf.int64))  # noqa: E731
    return {
        "masked": count(weights),
        "mask_cap_hits": count(wanted > masker.max_predictions),
        "mask_replaced": count(weights & (masked_ids == mask_id)),
        "mask_kept": count(weights & (masked_ids == features["mlm_ids"])),
    }


def make_masker(tokenizer, max_predictions=20, masked_lm_prob=0.15, whole_word_masking=False,
                per_word_replacement=False):
    """The `MLMMasker` for `tokenizer`'s vocabulary (original rates 80/10/10)."""
    return MLMMasker.from_vocabulary(
        tokenizer.get_vocabulary(), max_predictions=max_predictions, mask_selection_rate=masked_lm_prob,
        whole_word=whole_word_masking, per_word_replacement=per_word_replacement,
    )


def to_batch_layout(features):
    """Splits instance features into the shared `(x, y)` layout."""
    x = {k: features[k] for k in ("token_ids", "segment_ids", "padding_mask", "mask_positions")}
    y = {k: features[k] for k in ("mlm_ids", "mlm_weights", "nsp_labels")}
    return x, y


def pretraining_dataset(files, tokenizer, batch_size, sequence_length=128, max_predictions=20, seed=12345,
                        masked_lm_prob=0.15, short_seq_prob=0.1, whole_word_masking=False,
                        per_word_replacement=False, num_epochs=None, window_size=256, drop_remainder=True):
    """Masked-LM + next-sentence pretraining batches from raw text, made on the fly.

    Dynamic masking: each epoch re-chunks, re-pairs and re-masks the documents
    (stateless draws from `seed`, the epoch and the window), so the same arguments give
    the same batches and `tf.train.Checkpoint(iterator=iter(ds))` saves the position.

    Args:
        files: str or list of str. Text files in the original format (one sentence per
            line, blank line between documents); globs and comma-separated lists work.
        tokenizer: `keras_bert_zoo.text.bert_tokenizer.BertTokenizer` (or any callable
            strings → ragged ids with `get_vocabulary()`).
        batch_size: int.
        sequence_length: int. `max_seq_length`. Defaults to 128.
        max_predictions: int. `max_predictions_per_seq`. Defaults to 20.
        seed: int. Defaults to 12345.
        masked_lm_prob: float. Defaults to 0.15.
        short_seq_prob: float. Defaults to 0.1.
        whole_word_masking: bool. Defaults to False.
        per_word_replacement: bool. One 80/10/10 draw per whole word. Defaults to False.
        num_epochs: int or None (repeat forever). Defaults to None.
        window_size: int. Documents among which the random next document is drawn
            (the one deviation from the original's whole-corpus draw). Defaults to 256.
        drop_remainder: bool. Defaults to True (static shapes for the pretrainer).

    Returns:
        `tf.data.Dataset` of `(x, y)`: x `token_ids`, `segment_ids`, `padding_mask`
        int32 `(batch, sequence_length)`, `mask_positions` int32 `(batch, max_predictions)`;
        y `mlm_ids` int32, `mlm_weights` float32 `(batch, max_predictions)`, `nsp_labels`
        int32 `(batch,)` (1 = random next, 0 = actual next).

    Examples:
    >>> tokenizer = keras_bert_zoo.BertTokenizer("vocab.txt")
    >>> ds = keras_bert_zoo.data.pretraining_dataset("corpus.txt", tokenizer, 2, sequence_length=16,
    ...                                         max_predictions=3)
    >>> x, y = next(iter(ds))
    >>> {key: tuple(value.shape) for key, value in x.items()}
    {'token_ids': (2, 16), 'segment_ids': (2, 16), 'padding_mask': (2, 16), 'mask_positions': (2, 3)}
    >>> {key: tuple(value.shape) for key, value in y.items()}
    {'mlm_ids': (2, 3), 'mlm_weights': (2, 3), 'nsp_labels': (2,)}
    """
    _check("batch_size", batch_size, isinstance(batch_size, int) and batch_size >= 1, "must be a positive int")
    validate_options(sequence_length, max_predictions, masked_lm_prob, short_seq_prob, window_size)
    masker = make_masker(tokenizer, max_predictions, masked_lm_prob, whole_word_masking, per_word_replacement)
    windows = instance_windows(files, tokenizer, masker, sequence_length, short_seq_prob, seed, num_epochs,
                               window_size)
    instances = windows.map(without_autograph(lambda f, s: f)).unbatch()
    ds = instances.batch(batch_size, drop_remainder=drop_remainder).map(without_autograph(to_batch_layout)).prefetch(2)
    # The tokenizer runs as a traced function with a constant vocabulary table: tf.data
    # flags both as "external state" and would refuse to checkpoint the iterator. All our
    # randomness is stateless, so the iterator's position is its whole state.
    options = tf.data.Options()
    options.experimental_external_state_policy = tf.data.experimental.ExternalStatePolicy.IGNORE
    return ds.with_options(options)
