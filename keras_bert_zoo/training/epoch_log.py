"""`EpochLog`: a run's per-epoch numbers kept in memory for its curves (`utils.plotting`)."""

import keras
import numpy as np


class EpochLog(keras.callbacks.Callback):
    """Keeps each epoch's logs (loss, metrics, and what callbacks before it added, such as
    `dev_accuracy`) with the learning rate at the epoch's end.

    Put it after the callbacks whose numbers it should see: Keras calls `on_epoch_end` in
    the list's order, on one `logs` dict.

    Attributes:
        history: list of dicts `{"epoch": 1, "loss": ..., "learning_rate": ..., ...}`.
    """

    def __init__(self):
        super().__init__()
        self.history = []

    def on_epoch_end(self, epoch, logs=None):
        entry = {"epoch": epoch + 1}
        for name, value in (logs or {}).items():
            try:
                entry[name] = float(value)
            except (TypeError, ValueError):
                continue  # not a number (a callback's own record): nothing to draw
        optimizer = getattr(self.model, "optimizer", None)
        optimizer = getattr(optimizer, "inner_optimizer", optimizer)  # a loss-scale wrapper's own
        if optimizer is not None and hasattr(optimizer, "learning_rate"):
            entry["learning_rate"] = float(np.asarray(keras.ops.convert_to_numpy(optimizer.learning_rate)))
        self.history.append(entry)
