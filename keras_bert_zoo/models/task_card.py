"""`TaskCard`: the `Task` side of the model card (`presets/model_card.py`): what a task knows of
itself, kept as `task.model_card` and written as the `README.md` of every preset it saves.

`from_preset` starts the facts (the preset it came from, or that preset's own card); each `fit`
on in-memory rows adds what it trained on (rows and their sha256), its last epoch's metrics and,
for a classifier, the score of always answering the commonest training label; `save_to_preset`
adds the task, labels, precision and versions. `tools/finetune.py` rewrites the card with the
run's data files, dev scores and baseline, and its command.
"""

import hashlib

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.utils.versions import package_versions


def rows_sha256(columns, y=None):
    """The sha256 of in-memory rows: each text (UTF-8, NUL-terminated) column by column, then the
    targets' bytes; what a card gives for data that came from no file."""
    digest = hashlib.sha256()
    for column in keras.tree.flatten(columns):
        for value in np.asarray(column, dtype=object).reshape(-1):
            digest.update((value if isinstance(value, bytes) else str(value).encode("utf-8")) + b"\0")
    if y is not None:
        digest.update(np.ascontiguousarray(np.asarray(y)).tobytes())
    return digest.hexdigest()


def _final(history):
    return {name: float(values[-1]) for name, values in (history or {}).items() if values}


class TaskCard:
    """Mixin of `Task`: `model_card`, `card_facts()` and `record_fit(...)`."""

    @property
    def model_card(self):
        """dict: the facts the next `save_to_preset` writes into the preset's `README.md` (edit it
        to add your own, e.g. `task.model_card["intended_use"] = "..."`)."""
        card = self.__dict__.get("_model_card")
        if card is None:
            card = {}
            object.__setattr__(self, "_model_card", card)  # not a tracked Keras attribute
        return card

    def card_facts(self):
        """`model_card` with what the task says of itself now: class, labels, precision, versions."""
        facts = {k: v for k, v in self.model_card.items() if k != "loaded_from"}  # this session's, not the model's
        facts.update(task=type(self).__name__, labels=getattr(self, "labels", None),
                     precision=self.backbone.dtype_policy.name, versions=package_versions())
        return facts

    def record_fit(self, x, y, history, epochs, batch_size, validation=None):
        """Adds a finished `fit` to `model_card`: the rows it trained on, its last epoch's metrics,
        a classifier's baseline and the call."""
        card = self.model_card
        if card.get("loaded_from") is not None:
            card["source_preset"] = card["loaded_from"]  # these weights started from the loaded preset
        if isinstance(x, tf.data.Dataset) or x is None:
            entry = {"name": "fit(x): a tf.data.Dataset", "rows": None, "sha256": None}
            rows = "a dataset"
        else:
            columns = x if inputs_lib.is_packed(x) else inputs_lib.as_columns(x)
            rows = inputs_lib.num_rows(columns)
            batch_size = batch_size or inputs_lib.DEFAULT_BATCH_SIZE
            entry = {"name": "fit(x, y): in-memory rows", "rows": rows, "sha256": rows_sha256(columns, y)}
        card["data"] = list(card.get("data") or []) + [entry]
        card["metrics"] = _final(history)
        card["baseline"] = self._majority_baseline(y, validation)
        code = list((card.get("made_by") or {}).get("code") or [])
        code.append(f"task.fit(x, y)  # {rows} rows, epochs={epochs}, batch_size={batch_size}")
        card["made_by"] = {"code": code}

    def _majority_baseline(self, y, validation):
        """Accuracy of always answering the commonest training class (train and validation rows),
        for a task whose targets are class ids; None otherwise."""
        if self.target_kind != "classes" or y is None or getattr(self, "num_classes", 2) == 1:
            return None
        y = np.asarray(y).reshape(-1)
        if y.dtype.kind not in "iu" or not y.size:
            return None
        common = int(np.bincount(y).argmax())
        labels = getattr(self, "labels", None)
        name = repr(labels[common]) if labels else str(common)
        metrics = {"accuracy": float(np.mean(y == common))}
        if validation is not None:
            held_out = np.asarray(validation).reshape(-1)
            metrics["val_accuracy"] = float(np.mean(held_out == common))
        return {"predicts": f"always the commonest training class, {name}", "metrics": metrics}
