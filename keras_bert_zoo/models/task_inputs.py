"""What `Task.fit`/`evaluate`/`predict` do with raw inputs before Keras sees them.

Raw strings (a list, a NumPy array, a tuple of columns for pairs, or a batched
`tf.data.Dataset` of `(x, y)`) become a batched pipeline: preprocessor → padding cut
to the longest row of the batch → prefetch. `predict` sorts in-memory rows by length
first (so a batch holds rows of similar length) and restores the input order after.
Also here: the number of inputs the preprocessor truncates (reported in one log
line).
"""

import logging

import keras
import numpy as np
import tensorflow as tf


logger = logging.getLogger("keras_bert_zoo.models")

DEFAULT_BATCH_SIZE = 32
# Cut lengths are rounded up to a multiple of 8: aligned for tensor cores, and XLA
# compiles at most sequence_length / 8 shapes instead of one per length.
PAD_MULTIPLE = 8
SEQUENCE_KEYS = ("token_ids", "segment_ids", "padding_mask")


def packed_inputs(backbone, num_choices=None):
    """A task's `keras.Input`s of packed ids: the backbone's own (`backbone.input`, as keras-hub's
    tasks take them), or, with `num_choices`, the same names with a choices axis (batch, choices, seq)."""
    if num_choices is None:
        return dict(backbone.input)
    return {name: keras.Input(shape=(num_choices, None), dtype="int32", name=name) for name in backbone.input}


def is_packed(x):
    """True for inputs the backbone takes as they are: a dict with `token_ids`."""
    return isinstance(x, dict) and "token_ids" in x


def dataset_x_spec(dataset):
    """The element spec of a dataset's `x` (the first item of a tuple element)."""
    spec = dataset.element_spec
    return spec[0] if isinstance(spec, tuple) else spec


def as_columns(x, keep_items=False):
    """Raw text inputs → one NumPy array or a tuple of column arrays (pairs, choices).

    A list of pairs `[(a, b), ...]` is transposed into columns `(texts_a, texts_b)`; a dict of
    named columns (`COLUMN_ORDERS`, e.g. GLUE's `{"premise": ..., "hypothesis": ...}`) becomes
    the tuple of its columns in segment order. One example (a string, a tuple of strings such
    as one pair, or `(context, endings)` for multiple choice) is a batch of one, as keras-hub
    and HF pipelines take it. `keep_items=True` keeps the items of Python lists as they are
    (object arrays), for the input checks: NumPy would turn `["a film", 4]` into two strings.
    """
    if keep_items:
        def array(column):
            return column if isinstance(column, np.ndarray) else np.asarray(column, dtype=object)
    else:
        array = np.asarray
    if isinstance(x, dict):
        columns = tuple(array(x[key]) for key in _column_order(x))
    elif isinstance(x, tuple):
        columns = tuple(array(column) for column in x)
    elif isinstance(x, list) and x and all(isinstance(row, tuple) for row in x):
        columns = tuple(array(column) for column in zip(*x))
    else:
        columns = array(x)
    first = keras.tree.flatten(columns)
    if first and first[0].ndim == 0:  # one example: every column gets a batch axis of one
        columns = keras.tree.map_structure(lambda column: column[np.newaxis], columns)
    return columns


# Dicts of raw columns, by their names: ours and keras-hub's, then GLUE's (tfds feature names).
# The order is the segments' order: `[CLS] first [SEP] second [SEP]`.
COLUMN_ORDERS = (("text",), ("text_a",), ("text_a", "text_b"), ("sentence",), ("sentence1", "sentence2"),
                 ("question1", "question2"), ("premise", "hypothesis"), ("question", "sentence"))


def _column_order(x):
    """The key order of a dict of raw text columns (an `idx` column is ignored)."""
    keys = set(x) - {"idx"}
    for order in COLUMN_ORDERS:
        if keys == set(order):
            return order
    raise TypeError(
        "A dict of raw text must have the columns of one of these layouts (an extra `idx` is ignored): "
        f"{[list(o) for o in COLUMN_ORDERS]}; a dict with `token_ids` is read as packed ids. Received a dict "
        f"with keys {sorted(x)}. Rename the columns, or pass them as a tuple `(texts_a, texts_b)` in order."
    )


def num_rows(columns):
    return len(keras.tree.flatten(columns)[0])


def length_order(columns):
    """Indices sorting rows by their total number of characters (a proxy for tokens)."""
    total = np.zeros(num_rows(columns), dtype="int64")
    for column in keras.tree.flatten(columns):
        lengths = np.vectorize(len, otypes=["int64"])(column) if column.size else column.astype("int64")
        total += lengths.reshape(len(lengths), -1).sum(axis=1)
    return np.argsort(total, kind="stable")


def in_memory_dataset(x, y=None, sample_weight=None, batch_size=None, shuffle=False, order=None):
    """A batched dataset of `(x[, y[, sample_weight]])` from in-memory inputs.

    Args:
        x: raw columns (see `as_columns`) or a dict of packed arrays.
        order: optional row order (from `length_order`) applied to every array.
    """
    data = keras.utils.pack_x_y_sample_weight(x, y, sample_weight)
    data = keras.tree.map_structure(np.asarray, data)
    if order is not None:
        data = keras.tree.map_structure(lambda array: array[order], data)
    dataset = tf.data.Dataset.from_tensor_slices(data)
    if shuffle:
        # The whole set is in memory: a full-size buffer is an exact shuffle per epoch.
        dataset = dataset.shuffle(num_rows(data), reshuffle_each_iteration=True)
    return dataset.batch(batch_size or DEFAULT_BATCH_SIZE)


def bucketed_dataset(x, y=None, sample_weight=None, batch_size=None, window_batches=8):
    """A training dataset whose batches hold rows of similar length, reshuffled every epoch.

    Each epoch: all rows shuffled, cut into windows of `window_batches * batch_size` rows,
    each window sorted by length (characters of all columns, a proxy for word pieces) and
    cut into batches, the batches shuffled within a buffer of `window_batches`. The cut to
    the longest row (`trim_to_longest`) then pads each batch to about its rows' length,
    not to the longest row of a random sample. Same rows per epoch and same number of
    batches as `in_memory_dataset(..., shuffle=True)`; only the grouping differs.

    Args:
        x, y, sample_weight: as `in_memory_dataset` (raw text columns; optional targets).
        batch_size: int or None. Rows per batch. Defaults to `DEFAULT_BATCH_SIZE`.
        window_batches: int >= 1. Batches per sorted window (1: batches of random rows,
            sorted inside, the same batches as without bucketing).
    """
    if isinstance(window_batches, bool) or not isinstance(window_batches, int) or window_batches < 1:
        raise ValueError(
            "`length_buckets` (batches per length-sorted window) must be an int >= 1. Received: "
            f"length_buckets={window_batches!r}. Pass e.g. 8, or None for random batches."
        )
    size = batch_size or DEFAULT_BATCH_SIZE
    data = keras.tree.map_structure(np.asarray, keras.utils.pack_x_y_sample_weight(x, y, sample_weight))
    rows = num_rows(data)
    dataset = tf.data.Dataset.from_tensor_slices(data).shuffle(rows, reshuffle_each_iteration=True)
    columns = keras.tree.flatten(data[0] if isinstance(data, tuple) else data)
    text = [i for i, c in enumerate(columns) if c.dtype.kind in "USO"]

    def sort_window(*window):
        flat = keras.tree.flatten(window)
        length = tf.zeros(tf.shape(flat[0])[:1], tf.int64)
        for i in text:
            column = tf.strings.length(flat[i])
            length += tf.cast(tf.reshape(tf.reduce_sum(tf.reshape(column, [tf.shape(column)[0], -1]), 1), [-1]),
                              tf.int64)
        order = tf.argsort(length, stable=True)
        return keras.tree.map_structure(lambda t: tf.gather(t, order), window if len(window) > 1 else window[0])

    dataset = dataset.batch(size * window_batches).map(tf.autograph.experimental.do_not_convert(sort_window))
    dataset = dataset.unbatch().batch(size).shuffle(window_batches, reshuffle_each_iteration=True)
    return dataset.apply(tf.data.experimental.assert_cardinality(-(-rows // size)))


def batch_if_unbatched(dataset, batch_size):
    """A dataset of single examples (scalar strings) is batched; a batched one is kept."""
    first = keras.tree.flatten(dataset_x_spec(dataset))[0]
    if first.shape.rank == 0:
        logger.info("Batching a dataset of single examples by %d.", batch_size or DEFAULT_BATCH_SIZE)
        return dataset.batch(batch_size or DEFAULT_BATCH_SIZE)
    if batch_size is not None:
        raise ValueError(
            f"`batch_size` is set by the dataset, which is already batched. Received: "
            f"batch_size={batch_size}. Drop `batch_size` or pass an unbatched dataset."
        )
    return dataset


def split_off(x, y, sample_weight, fraction):
    """Keras' `validation_split` on raw rows: the last `fraction` of them, before shuffling."""
    columns = as_columns(x)
    split = int(np.ceil(num_rows(columns) * (1.0 - fraction)))

    def part(data, rows):
        return None if data is None else keras.tree.map_structure(lambda v: np.asarray(v)[rows], data)

    train = tuple(part(d, slice(None, split)) for d in (columns, y, sample_weight))
    held_out = tuple(part(d, slice(split, None)) for d in (columns, y, sample_weight))
    return train + (held_out,)


def trim_to_longest(x, y=None, sample_weight=None):
    """Cuts the padding columns no row of the batch uses (rounded up to `PAD_MULTIPLE`).

    `x`'s `token_ids`, `segment_ids` and `padding_mask` are cut on their last axis;
    so is any `y`/`sample_weight` of rank >= 2 whose last dimension is the padded
    length (per-token labels and weights).
    """
    mask = x["padding_mask"]
    width = tf.shape(mask)[-1]
    longest = tf.reduce_max(tf.concat([tf.reshape(tf.reduce_sum(mask, axis=-1), [-1]), [0]], 0))
    cut = tf.minimum(width, (longest + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE)
    static_width = mask.shape[-1]
    x = {k: (v[..., :cut] if k in SEQUENCE_KEYS else v) for k, v in x.items()}

    def cut_targets(t):
        if t is None or t.shape.rank is None or t.shape.rank < 2 or t.shape[-1] != static_width:
            return t
        return t[..., :cut]

    y = None if y is None else keras.tree.map_structure(cut_targets, y)
    sample_weight = None if sample_weight is None else keras.tree.map_structure(cut_targets, sample_weight)
    return x, y, sample_weight


def pipeline_functions(preprocessor):
    """Returns `(prepare, count)`: tf.functions over a raw `(x[, y[, sample_weight]])`
    batch. `prepare` runs the preprocessor and cuts the padding; `count` gives
    `[truncated, total]` input sequences (None without `preprocessor.truncated_rows`).
    A task keeps them, so that each call's pipeline reuses their traces."""

    @tf.function(autograph=False, reduce_retracing=True)
    def prepare(data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(preprocessor(x, y, sample_weight))
        return keras.utils.pack_x_y_sample_weight(*trim_to_longest(x, y, sample_weight))

    count_rows = getattr(preprocessor, "truncated_rows", None)
    if count_rows is None:
        return prepare, None

    @tf.function(autograph=False, reduce_retracing=True)
    def count(data):
        flags = tf.reshape(count_rows(keras.utils.unpack_x_y_sample_weight(data)[0]), [-1])
        return tf.stack([tf.reduce_sum(tf.cast(flags, tf.int64)), tf.size(flags, out_type=tf.int64)])

    return prepare, count


def _packed(function):
    """tf.data passes a tuple element's items as arguments; the tf.functions take the tuple
    (one traced signature per structure: `(x,)`, `(x, y)`, `(x, y, sample_weight)`)."""
    return tf.autograph.experimental.do_not_convert(lambda *data: function(data))


def preprocess(dataset, prepare, regroup=None):
    """Maps `prepare` (see `pipeline_functions`) over the batches, in order, prefetching.
    `regroup` (a function of the mapped dataset) rebatches its rows first: span extraction's
    training steps take a fixed number of windows, not all the windows of some questions
    (`window_batches.py`)."""
    dataset = dataset.map(_packed(prepare), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if regroup is not None:
        dataset = regroup(dataset)
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(_OPTIONS)


# tf.data's default graph rewrites found nothing to gain on the tokenizer's graph but
# cost time on every iterator, i.e. on every fit/evaluate/predict call (as in pretraining_writer).
# Without the autotuner (AUTOTUNE is then one call per core; the model step, not the
# tokenizer, is the bottleneck): inside Keras' `fit`, the teardown of an epoch's iterator
# waited for the autotuner's thread to wake from its sleep, up to its optimisation period
# (TensorFlow 2.21, at the next epoch's start or at the end of `fit`; gdb showed the
# teardown in Model::OptimizeLoop's wait).
_OPTIONS = tf.data.Options()
_OPTIONS.experimental_optimization.apply_default_optimizations = False
_OPTIONS.autotune.enabled = False


def report_truncated(dataset, preprocessor, count, steps=None):
    """Counts the inputs the preprocessor will truncate and logs one line; returns the count.

    `count` is from `pipeline_functions`; without it (a preprocessor without
    `truncated_rows`), or for a dataset of unknown or infinite length without
    `steps`, nothing is counted (returns None).
    """
    if count is None:
        return None
    if steps is not None:
        dataset = dataset.take(steps)
    elif dataset.cardinality() < 0:
        return None
    counts = dataset.map(_packed(count), num_parallel_calls=tf.data.AUTOTUNE)
    truncated, total = (int(v) for v in counts.reduce(tf.zeros([2], tf.int64), lambda a, b: a + b))
    _log_truncated(preprocessor, truncated, total)
    return truncated


# Rows per `count` call on in-memory text: few calls, bounded memory.
COUNT_CHUNK = 4096


def count_truncated(columns, preprocessor, count):
    """`report_truncated` for in-memory raw columns: `count` over chunks of the rows, without a
    `tf.data` pass (whose tracing and graph optimisation would be paid on every call).
    Logs one line; returns the count (None without `count`)."""
    if count is None:
        return None
    totals = np.zeros([2], "int64")
    for start in range(0, num_rows(columns), COUNT_CHUNK):
        chunk = keras.tree.map_structure(lambda column: column[start : start + COUNT_CHUNK], columns)
        totals += count((chunk,)).numpy()
    _log_truncated(preprocessor, int(totals[0]), int(totals[1]))
    return int(totals[0])


def _log_truncated(preprocessor, truncated, total):
    level = logging.WARNING if truncated else logging.INFO
    logger.log(
        level,
        "Truncated %d of %d input sequences to sequence_length=%s (%s).",
        truncated, total, preprocessor.sequence_length, getattr(preprocessor, "truncate", "longest_first"),
    )


def steps_of(dataset, steps_per_epoch):
    """Batches one epoch runs: `steps_per_epoch`, else the dataset's (finite) length."""
    if steps_per_epoch is not None:
        return int(steps_per_epoch)
    steps = int(dataset.cardinality())
    if steps == tf.data.UNKNOWN_CARDINALITY:
        steps = int(dataset.reduce(np.int64(0), lambda n, _: n + 1))
    if steps <= 0:
        raise ValueError(
            "The learning-rate schedule of compile(optimizer='auto') runs over the steps "
            f"`fit` will take, but the dataset has no finite length (cardinality={steps}). "
            "Pass `steps_per_epoch`."
        )
    return steps
