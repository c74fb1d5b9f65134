"""`TaskInputChecks`: the `Task` methods that check in-memory inputs of `fit`, `evaluate` and
`predict` before any graph is traced (`keras_bert_zoo.data.input_checks` holds the checks, which
the file readers share).

A `tf.data.Dataset` is not checked here (its rows exist only when the pipeline runs). Targets
are checked and mapped against the task's own loss (`compile(loss="auto")`, the default); with
a loss of the caller's (`compile(loss=...)`), only their rows are counted, since their meaning is
the caller's.
"""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.data import input_checks as checks
from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.text.token_classifier_preprocessor import split_words


def _rows(value):
    """Rows of an array-like, a tuple/dict of them (the first's), or None."""
    flat = keras.tree.flatten(value) if isinstance(value, (tuple, dict)) else [value]
    return len(flat[0]) if flat and hasattr(flat[0], "__len__") else None


class TaskInputChecks:
    """Mixin of `Task`: needs `self.preprocessor`; subclasses say what their targets are.

    `target_kind`: "classes" (one class per row: `num_classes` with `labels`, or `num_choices`;
    `num_classes=1` is a regression score), "word_labels" (a label per word of each sentence),
    "spans" (an answer's character span in each context) or None (rows counted only).
    """

    target_kind = "classes"

    def checked_inputs(self, x, y=None, sample_weight=None, call="fit", names=("x", "y", "sample_weight")):
        """`(x, y, sample_weight)` checked before any graph: `y` mapped to ids where given as names.

        Args:
            x, y, sample_weight: as `fit` takes them.
            call: str. The method, for messages ("fit", "evaluate", "predict").
            names: the three arguments' names in messages (`validation_data[0]`, ...).

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
        if self.preprocessor is not None and not inputs_lib.is_packed(x):
            columns = keras.tree.flatten(inputs_lib.as_columns(x, keep_items=True))
            checks.check_texts(columns, names[0])
        if columns is None or len(columns) == 1:
            counts = {f"`{names[0]}`": _rows(x) if columns is None else len(columns[0])}
        else:  # pairs (or a context and its endings): each column must have the rows of the first
            counts = {f"`{names[0]}` column {number}": len(column) for number, column in enumerate(columns, 1)}
        for name, value in ((names[1], y), (names[2], sample_weight)):
            if value is not None and _rows(value) is not None:
                counts[f"`{name}`"] = _rows(value)
        checks.check_rows(counts, call)
        if y is not None and columns is not None and self._own_loss():
            y = self.checked_targets(y, columns, names[1])
        return x, y, sample_weight

    def checked_validation(self, validation_data):
        """`fit`'s `validation_data` (an `(x, y[, sample_weight])` tuple) checked as `evaluate` checks."""
        if isinstance(validation_data, tf.data.Dataset) or not isinstance(validation_data, (tuple, list)):
            return validation_data
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(tuple(validation_data))
        names = tuple(f"validation_data[{i}]" for i in range(3))
        checked = self.checked_inputs(x, y, sample_weight, "fit's validation", names)
        return keras.utils.pack_x_y_sample_weight(*checked)

    def _own_loss(self):
        """Whether the task compiled with its own loss (`loss="auto"`), whose targets it knows."""
        arguments = getattr(self, "_compile_arguments", None)
        return isinstance(arguments, dict) and "loss" not in arguments

    def checked_targets(self, y, columns, name="y"):
        """`y` as the task's loss reads it (class ids, scores, word label ids, spans), checked row by row."""
        task = type(self).__name__
        labels = getattr(self, "labels", None)
        if self.target_kind == "word_labels":
            words = _word_counts(columns[0])
            return checks.word_label_ids(y, words, self.num_classes, labels, name, task)
        if self.target_kind == "spans":
            return checks.spans(y, [len(_text(c)) for c in columns[1]], name)
        if self.target_kind != "classes":
            return y
        if getattr(self, "num_classes", None) == 1:
            return checks.scores(y, name, task)
        if getattr(self, "num_classes", None) is not None:
            return checks.class_ids(y, self.num_classes, labels, name, "num_classes", task)
        if getattr(self, "num_choices", None) is not None:
            return checks.class_ids(y, self.num_choices, None, name, "num_choices", task)
        return y


def _word_counts(sentences):
    """Words per sentence, split as the token classifier's preprocessor splits them."""
    words = split_words(tf.constant([_text(s) for s in np.asarray(sentences, dtype=object).reshape(-1)]))[0]
    return words.row_lengths().numpy()


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
