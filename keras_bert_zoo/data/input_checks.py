"""The checks a task's inputs pass before any graph runs: one implementation for the Python
API (`Task.fit`/`evaluate`/`predict`, through `models/task_inputs.py`) and the file
readers (`read_glue`, `read_swag`, `encode_tags`), so a mistake gets the same answer both ways.

Each failure is one line: the argument (or the file and line), the row, what was received and
the fix. A label name is mapped through the task's `labels` (as keras-hub and HF map them
through the label names); a name outside them is refused naming the known ones; a class id
outside `[0, num_classes)`, a fractional or missing one, texts that are not strings, an empty
input and rows of `x`, `y` and `sample_weight` that do not agree are refused too. Without these,
the mistakes surfaced from inside the graph ("Cast string to float is not supported",
`InvalidArgumentError` on a label id, "Dimensions 2 and 1 are not compatible").
"""

import numbers

import numpy as np

MAX_SHOWN = 8  # label names listed in a message; more are counted


def _known(labels):
    labels = list(labels)
    shown = ", ".join(repr(label) for label in labels[:MAX_SHOWN])
    return f"[{shown}{f', ... ({len(labels)} in all)' if len(labels) > MAX_SHOWN else ''}]"


def label_index(value, labels, where, fix=""):
    """The id of the label name `value`: its place in `labels`.

    Args:
        value: str. A label as written (a file's token, a name passed to `fit`).
        labels: sequence of str. The names in id order.
        where: str. What the message names first ("`y` row 3", "train.tsv, line 4, column 2").
        fix: str. The sentence that ends the message (what to do instead).

    Raises:
        ValueError: `value` is not one of `labels`, naming them.
    """
    try:
        return list(labels).index(value)
    except ValueError:
        raise ValueError(f"{where}: label {value!r} is not one of {_known(labels)}.{' ' + fix if fix else ''}") from None


def _describe(value):
    return f"{value!r} ({type(value).__name__})"


def _class_id(value, size, size_name, labels, where, task):
    """One target -> its int id in `[0, size)` (a name through `labels`)."""
    ids = f"ids 0..{size - 1}"
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        if labels is None:
            raise ValueError(
                f"{where} is the label name {value!r}, but this {task} has no `labels` to map names to ids. "
                f"Pass {ids}, or build it with labels=[...] (one name per class, in id order).")
        return label_index(value, labels, where, "Fix the label, or build the task with `labels` that name "
                                                 "every class (in id order).")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ValueError(f"{where} is {_describe(value)}, not a class id. Pass {ids}"
                         f"{' or label names' if labels else ''}, one per row.")
    if not np.isfinite(value) or value != int(value):
        raise ValueError(f"{where} is {value!r}, not a class id (an integer). Pass {ids}; a regression task is "
                         f"built with num_classes=1.")
    value = int(value)
    if value < 0:
        raise ValueError(f"{where}: class id {value} is outside 0..{size - 1} ({size_name}={size}). Pass {ids}: "
                         "ids start at 0, and no value marks a row without a class.")
    if value >= size:
        raise ValueError(f"{where}: class id {value} is outside 0..{size - 1} ({size_name}={size}). Pass {ids}, or "
                         f"build the task with {size_name}={value + 1} or more.")
    return value


def class_ids(y, num_classes, labels=None, argument="y", size_name="num_classes", task="task"):
    """`y` (one class per row: ids, or names through `labels`) as an int32 array (rows,).

    Args:
        y: sequence or array, shape (rows,) or (rows, 1).
        num_classes: int. Ids run over `[0, num_classes)`.
        labels: sequence of str or None. The class names in id order.
        argument: str. The argument's name in messages ("y", "validation_data's y").
        size_name: str. What sets `num_classes` ("num_classes", "num_choices").
        task: str. The task's class name, for messages.

    Raises:
        ValueError: the first row that is no class of the task, naming it and the fix.
    """
    values, shape = _rows_of(y, argument, "one class per row")
    if values.dtype.kind in "iu" and values.size:  # the common case, checked without a Python loop
        bad = np.flatnonzero((values < 0) | (values >= num_classes))
        if not len(bad):
            return values.astype("int32").reshape(shape)
        row = int(bad[0])
        _class_id(values[row].item(), num_classes, size_name, labels, f"`{argument}` row {row}", task)
    return np.asarray([_class_id(v.item() if isinstance(v, np.generic) else v, num_classes, size_name, labels,
                                 f"`{argument}` row {i}", task) for i, v in enumerate(values)], "int32").reshape(shape)


def scores(y, argument="y", task="task"):
    """Regression targets (one finite number per row) as float32 (rows,)."""
    values, shape = _rows_of(y, argument, "one score per row")
    for i, value in enumerate(values):
        value = value.item() if isinstance(value, np.generic) else value
        if isinstance(value, (bool, str, bytes)) or not isinstance(value, numbers.Real) or not np.isfinite(value):
            raise ValueError(f"`{argument}` row {i} is {_describe(value)}, not a score: this {task} is a regression "
                             "(num_classes=1) and takes one finite number per row. Pass scores, or build it with "
                             "num_classes=2 or more for classes.")
    return values.astype("float32").reshape(shape)


def _rows_of(y, argument, what):
    """`(values, shape)`: `y` as one value per row (a (rows, 1) column flattened) and its shape,
    which the checked array keeps."""
    values = np.asarray(y, dtype=object if _ragged(y) else None)
    if values.dtype.kind in "US" and not isinstance(y, np.ndarray):
        values = np.asarray(y, dtype=object)  # NumPy turned a list's numbers into strings: keep each as given
    shape = values.shape
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(f"`{argument}` must hold {what}: shape (rows,). Received shape {values.shape}. Pass one "
                         "target per row of `x`.")
    return values, shape


def _ragged(y):
    return isinstance(y, (list, tuple)) and any(isinstance(row, (list, tuple, np.ndarray)) for row in y)


def word_label_ids(y, word_counts, num_classes, labels=None, argument="y", task="task"):
    """Per-word labels (ids, or names through `labels`; a list per sentence, or rows padded
    after each sentence's words) as int32 (rows, longest sentence), padded with -1.

    Row i must give a label to each of its `word_counts[i]` words; what follows them in a
    padded row is not read (as the preprocessor reads it).

    Raises:
        ValueError: a row with fewer labels than words, or a label that is no class.
    """
    if isinstance(y, np.ndarray) and not (y.ndim == 2 or (y.ndim == 1 and y.dtype == object)):
        raise ValueError(f"`{argument}` must hold a list of word labels per sentence (or rows padded after "
                         f"each sentence's words). Received shape {y.shape}.")
    rows = list(y)
    width = max([int(n) for n in word_counts] + [1])
    out = np.full((len(rows), width), -1, "int32")
    for i, (row, words) in enumerate(zip(rows, word_counts)):
        if isinstance(row, (str, bytes)) or not hasattr(row, "__len__"):
            raise ValueError(f"`{argument}` row {i} is {_describe(row)}, not a list of word labels. Pass one list "
                             "per sentence, a label per word.")
        if len(row) < words:
            raise ValueError(f"`{argument}` row {i} has {len(row)} label{'s' if len(row) != 1 else ''} for {words} "
                             f"words of `x` row {i}. Give one label per word (words are what whitespace separates).")
        for j in range(int(words)):
            value = row[j].item() if isinstance(row[j], np.generic) else row[j]
            out[i, j] = _class_id(value, num_classes, "num_classes", labels, f"`{argument}` row {i}, word {j}", task)
    return out


def check_texts(columns, argument="x"):
    """Raises unless every entry of the raw text `columns` (arrays from `as_columns`) is a string."""
    many = len(columns) > 1
    for number, column in enumerate(columns):
        if column.dtype.kind in "US" or not column.size:
            continue
        cells = np.ndenumerate(column) if column.dtype.kind == "O" else [(np.unravel_index(0, column.shape), column.flat[0])]
        for index, value in cells:
            if isinstance(value, (str, bytes)):
                continue
            value = value.item() if isinstance(value, np.generic) else value
            where = f"`{argument}` row {index[0]}" + (f" (column {number + 1} of {len(columns)})" if many else "")
            where += "".join(f", item {i}" for i in index[1:])
            raise ValueError(f"{where} is {_describe(value)}, not a string. Pass text: a list of strings (pairs: a "
                             "tuple of two lists, or a list of (a, b) tuples); a task with `preprocessor = None` "
                             "takes packed ids (a dict with `token_ids`).")


def check_rows(counts, call):
    """Raises unless every named input has the same number of rows, at least one.

    Args:
        counts: dict `{name: rows}` in the order to name them, `x` first; a name is shown as
            given ("`x`", "`x` column 2").
        call: str. The method ("fit", "evaluate", "predict").
    """
    (first, rows), *others = counts.items()
    for name, count in others:
        if count != rows:
            raise ValueError(f"{first} has {rows} rows but {name} has {count}: {call} needs one per row of {first}. "
                             f"Pass {name} with {rows} rows.")
    if rows == 0:
        raise ValueError(f"{first} is empty: {call} needs at least one row. Pass at least one example.")


def spans(y, context_lengths, argument="y"):
    """Answer spans `[start, end)` in characters of each context, or (-1, -1) for no answer,
    as int32 (rows, 2) (what `SquadData.y` gives)."""
    values = np.asarray(y)
    if values.ndim != 2 or values.shape[1] != 2 or values.dtype.kind not in "iu":
        raise ValueError(f"`{argument}` must hold one answer span per question: int (rows, 2) character offsets "
                         f"[start, end), (-1, -1) for no answer (`SquadData.y`). Received shape {values.shape} of "
                         f"{values.dtype}.")
    for i, ((start, end), length) in enumerate(zip(values.tolist(), context_lengths)):
        if (start, end) != (-1, -1) and not 0 <= start < end <= length:
            raise ValueError(f"`{argument}` row {i}: the span [{start}, {end}) is not inside its context of {length} "
                             "characters. Pass [start, end) character offsets into the context, or (-1, -1) for "
                             "no answer.")
    return values.astype("int32")
