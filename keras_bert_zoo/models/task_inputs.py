"""What a `Task` takes: raw text in its forms, read as columns; in-memory rows as a batched
`tf.data.Dataset`; the steps a `fit` runs and the rows it records in the model card; and the checks
that in-memory inputs of `fit`, `evaluate` and `predict` pass before any graph is traced
(`keras_bert_zoo.data.input_checks` holds the checks, which the file readers share).
`task_pipeline` runs the preprocessor over the batches.

A `tf.data.Dataset` is not checked (its rows exist only when the pipeline runs). Targets are
checked and mapped against the task's own loss (`compile(loss="auto")`, the default); with a loss
of the caller's (`compile(loss=...)`), only their rows are counted, since their meaning is the
caller's. A task's `target_kind` says what its targets are: "classes" (one class per row:
`num_classes` with `labels`, or `num_choices`; `num_classes=1` is a regression score),
"word_labels" (a label per word of each sentence), "spans" (an answer's character span in each
context) or None (rows counted only).
"""

import logging

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.data import input_checks as checks
from keras_bert_zoo.presets import model_card
from keras_bert_zoo.text.token_classifier_preprocessor import split_words

logger = logging.getLogger("keras_bert_zoo.models")

DEFAULT_BATCH_SIZE = 32
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
    the longest row (`task_pipeline.trim_to_longest`) then pads each batch to about its rows' length,
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


def run_steps(x, batch_size, epochs, steps_per_epoch):
    """The steps a `fit` call runs (at least 1): epochs × batches per epoch, over a dataset
    (`steps_of`) or in-memory rows in batches of `batch_size`."""
    if isinstance(x, tf.data.Dataset):
        steps = steps_of(x, steps_per_epoch)
    else:
        steps = steps_per_epoch or -(-num_rows(x) // (batch_size or DEFAULT_BATCH_SIZE))
    return max(int(steps) * max(int(epochs), 1), 1)


def record_fit(task, x, y, history, epochs, batch_size, validation=None):
    """`Task.record_fit`: adds a finished `fit` to `task.model_card` (`model_card.record_fit`): the rows it
    trained on, its last epoch's metrics, a classifier's baseline and the call."""
    columns = None
    if not isinstance(x, tf.data.Dataset) and x is not None:
        columns = x if is_packed(x) else as_columns(x)
        batch_size = batch_size or DEFAULT_BATCH_SIZE
    classes = task.target_kind == "classes" and getattr(task, "num_classes", 2) != 1
    model_card.record_fit(task.model_card, columns, y, history, epochs, batch_size, validation,
                          getattr(task, "labels", None), classes)


# === The checks of in-memory inputs, before any graph ===
def check_sequence_length(task):
    """`Task.check_sequence_length`: raises if the preprocessor packs longer rows than the backbone has
    positions for."""
    length = getattr(task.preprocessor, "sequence_length", None)
    limit = getattr(getattr(task, "backbone", None), "max_sequence_length", None)
    if isinstance(length, int) and isinstance(limit, int) and length > limit:
        raise ValueError(
            f"The preprocessor's sequence_length={length} exceeds the backbone's max_sequence_length={limit} (its "
            f"position embeddings). Set `task.preprocessor.sequence_length` to at most {limit}.")


def checked_inputs(task, x, y=None, sample_weight=None, call="fit", names=("x", "y", "sample_weight"),
                   own_loss=True):
    """`(x, y, sample_weight)` checked before any graph: `y` mapped to ids where given as names.

    Args:
        task: the `Task` (its `preprocessor`, and `checked_targets` for `y`).
        x, y, sample_weight: as `fit` takes them.
        call: str. The method, for messages ("fit", "evaluate", "predict").
        names: the three arguments' names in messages (`validation_data[0]`, ...).
        own_loss: bool. Whether the task compiled with its own loss, whose targets it knows.

    Raises:
        ValueError: one line naming the argument, the row and the fix: texts that are not
            strings, no rows, rows that disagree, a label the task does not know.
    """
    if x is None or isinstance(x, tf.data.Dataset):
        return x, y, sample_weight
    if isinstance(y, tf.RaggedTensor):  # word labels as ragged rows: checked as lists
        y = y.to_list()
    elif tf.is_tensor(y) and tf.executing_eagerly():
        y = y.numpy()
    columns = None
    if task.preprocessor is not None and not is_packed(x):
        columns = keras.tree.flatten(as_columns(x, keep_items=True))
        checks.check_texts(columns, names[0])
    if columns is None or len(columns) == 1:
        counts = {f"`{names[0]}`": _rows(x) if columns is None else len(columns[0])}
    else:  # pairs (or a context and its endings): each column must have the rows of the first
        counts = {f"`{names[0]}` column {number}": len(column) for number, column in enumerate(columns, 1)}
    for name, value in ((names[1], y), (names[2], sample_weight)):
        if value is not None and _rows(value) is not None:
            counts[f"`{name}`"] = _rows(value)
    checks.check_rows(counts, call)
    if y is not None and columns is not None and own_loss:
        y = task.checked_targets(y, columns, names[1])
    return x, y, sample_weight


def checked_validation(task, validation_data):
    """`Task.checked_validation`: `fit`'s `validation_data` (an `(x, y[, sample_weight])` tuple) checked as
    `evaluate` checks."""
    if isinstance(validation_data, tf.data.Dataset) or not isinstance(validation_data, (tuple, list)):
        return validation_data
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(tuple(validation_data))
    names = tuple(f"validation_data[{i}]" for i in range(3))
    checked = task.checked_inputs(x, y, sample_weight, "fit's validation", names)
    return keras.utils.pack_x_y_sample_weight(*checked)


def checked_targets(task, y, columns, name="y"):
    """`Task.checked_targets`: `y` as the task's loss reads it (class ids, scores, word label ids, spans),
    checked row by row."""
    kind, task_name = task.target_kind, type(task).__name__
    labels = getattr(task, "labels", None)
    if kind == "word_labels":
        # Words per sentence, split as the token classifier's preprocessor splits them.
        words = split_words(tf.constant([_text(s) for s in np.asarray(columns[0], dtype=object).reshape(-1)]))[0]
        return checks.word_label_ids(y, words.row_lengths().numpy(), task.num_classes, labels, name, task_name)
    if kind == "spans":
        return checks.spans(y, [len(_text(c)) for c in columns[1]], name)
    if kind != "classes":
        return y
    if getattr(task, "num_classes", None) == 1:
        return checks.scores(y, name, task_name)
    if getattr(task, "num_classes", None) is not None:
        return checks.class_ids(y, task.num_classes, labels, name, "num_classes", task_name)
    if getattr(task, "num_choices", None) is not None:
        return checks.class_ids(y, task.num_choices, None, name, "num_choices", task_name)
    return y


def _rows(value):
    """Rows of an array-like, a tuple/dict of them (the first's), or None."""
    flat = keras.tree.flatten(value) if isinstance(value, (tuple, dict)) else [value]
    return len(flat[0]) if flat and hasattr(flat[0], "__len__") else None


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
