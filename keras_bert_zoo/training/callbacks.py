"""Callbacks for step-exact, resumable pretraining with `model.fit`.

`StepCheckpointer` feeds `fit` from an iterator that a `TrainingCheckpoint` owns and
saves every N steps; `NonFiniteGuard` stops on a NaN/inf loss or weight naming the
step; `ScalarLogger` writes training scalars for TensorBoard; `BuildAwareProgbar` is
Keras' progress bar without the graph build in its rate and ETA (`with_progress_bar` adds it
to `Task.fit`'s callbacks). (Held-out evaluation:
`pretraining_eval.HeldOutEvaluation`.)
"""

import logging
import time

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.training.held_out import write_scalar
from keras_bert_zoo.training.replica_steps import replica_step_function
from keras_bert_zoo.utils.precision import model_precision_line


class NonFiniteError(FloatingPointError):
    """Training produced a NaN or infinite loss or weight."""


def _finite_flags(variables):
    return [tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(v)))
            for v in variables if tf.as_dtype(v.dtype).is_floating]


def _all_finite(variables):
    flags = _finite_flags(variables)
    return bool(tf.reduce_all(flags)) if flags else True


def finite_check(variables):
    """`_all_finite(variables)` as one traced function: a graph call per step, not two eager
    ops per variable, which for a small model cost a noticeable share of each step."""
    check = tf.function(lambda: tf.reduce_all(_finite_flags(variables)), autograph=False)
    return lambda: bool(check())


class StepCheckpointer(keras.callbacks.Callback):
    """Makes `fit` draw batches from `checkpoint`'s iterator and saves every N steps.

    Keras' own iterator cannot be checkpointed (fit creates it internally), so while
    training this callback swaps `model.train_function` for one that takes the next
    batch from `iterator`, the one the checkpoint holds, and runs `model.train_step`
    on every replica; fit's own dataset is unused.
    An element may be `(x, y)` or `(x, y, example_ids)`; ids go to `on_batch`.

    Args:
        checkpoint: `TrainingCheckpoint` holding `iterator`.
        iterator: the (distributed) iterator of training batches.
        save_every: int. Save after every `save_every` steps (and at the end).
        on_batch: callable `(step, example_ids) -> None` or None. Observes what each
            step trains on (used by tests to prove nothing is replayed or skipped).
    """

    def __init__(self, checkpoint, iterator, save_every, on_batch=None):
        super().__init__()
        if not isinstance(save_every, int) or save_every < 1:
            raise ValueError(
                f"`save_every` must be a positive integer. Received: save_every={save_every!r}."
            )
        self.checkpoint = checkpoint
        self.iterator = iterator
        self.save_every = save_every
        self.on_batch = on_batch
        self._original = None
        self.last_saved_step = None

    def _make_step_function(self):
        """`train_step` on every replica, logs averaged over replicas and workers (`replica_steps`)."""
        return replica_step_function(self.model, self.model.train_step)

    def on_train_begin(self, logs=None):
        self._original = self.model.train_function
        strategy = self.model.distribute_strategy
        step_function = self._make_step_function()

        def train_function(_unused_keras_iterator):
            batch = next(self.iterator)
            if len(batch) == 3:
                x, y, ids = batch
                if self.on_batch is not None:
                    local = strategy.experimental_local_results(ids)
                    ids = np.concatenate([np.asarray(t) for t in local])
                    self.on_batch(int(self.checkpoint.step.numpy()) + 1, ids)
                batch = (x, y)
            return step_function(batch)

        self.model.train_function = train_function

    def on_train_batch_end(self, batch, logs=None):
        self.checkpoint.step.assign_add(1)
        if int(self.checkpoint.step.numpy()) % self.save_every == 0:
            self.save()

    def save(self):
        """Saves unless this step is already saved."""
        step = int(self.checkpoint.step.numpy())
        if step != self.last_saved_step:
            self.checkpoint.save()
            self.last_saved_step = step

    def on_train_end(self, logs=None):
        self.restore_train_function()
        self.save()

    def restore_train_function(self):
        if self._original is not None:
            self.model.train_function = self._original
            self._original = None


class NonFiniteGuard(keras.callbacks.Callback):
    """Stops training with an error naming the step on a NaN/inf loss or weight.

    Put it before `StepCheckpointer` so a non-finite state is never saved: weights
    are checked at every `check_weights_every` steps (and always the loss).

    Args:
        step: `tf.Variable`. The global step (`TrainingCheckpoint.step`), read
            before `StepCheckpointer` increments it.
        check_weights_every: int. Defaults to 1.
    """

    def __init__(self, step, check_weights_every=1):
        super().__init__()
        self.step = step
        self.check_weights_every = check_weights_every
        self._check = None

    def on_train_begin(self, logs=None):
        self._check = None  # this fit's model and weights: built at its first step

    def on_train_batch_end(self, batch, logs=None):
        step = int(self.step.numpy()) + 1  # the step that just ran (1-based)
        loss = None if logs is None else logs.get("loss")
        if loss is not None and not np.isfinite(float(loss)):
            raise NonFiniteError(
                f"Non-finite loss {float(loss)} at step {step}. Training stopped; the "
                "checkpoint directory is kept and its newest checkpoint is finite. Lower "
                "the learning rate or check the data, then resume."
            )
        if self._check is None:
            self._check = finite_check(self.model.weights)
        if step % self.check_weights_every == 0 and not self._check():
            bad = [v.path for v in self.model.weights if not _all_finite([v])]
            raise NonFiniteError(
                f"Non-finite weights at step {step}: {bad[:5]}. Training stopped; the "
                "checkpoint directory is kept and its newest checkpoint is finite."
            )


class ScalarLogger(keras.callbacks.Callback):
    """Writes the training logs (loss, accuracies) to TensorBoard at the global step.

    Works without the `tensorboard` package (core `tf.summary.write`); unlike
    `keras.callbacks.TensorBoard`, steps continue across restarts.

    Args:
        log_dir: str. Events go to `<log_dir>/train`.
        every_n_steps: int. Defaults to 10.
        step: `tf.Variable` global step, or None (`fit_resumable` sets it).
        step_offset: int. Added to `step` (steps of earlier training phases).
    """

    def __init__(self, log_dir, every_n_steps=10, step=None, step_offset=0):
        super().__init__()
        self.every_n_steps = max(1, int(every_n_steps))
        self.step = step
        self.step_offset = step_offset
        self._writer = tf.summary.create_file_writer(log_dir + "/train")

    def on_train_batch_end(self, batch, logs=None):
        step = (int(self.step.numpy()) if self.step is not None else batch + 1) + self.step_offset
        if step % self.every_n_steps or not logs:
            return
        with self._writer.as_default():
            for key, value in logs.items():
                value = float(value)
                if np.isfinite(value):
                    write_scalar(f"train/{key}", value, step)
            learning_rate = self.model.optimizer.learning_rate
            write_scalar("train/learning_rate", float(keras.ops.convert_to_numpy(learning_rate)), step)
        self._writer.flush()


class BuildAwareProgbar(keras.callbacks.ProgbarLogger):
    """Keras' progress bar, whose rate and ETA leave out the first step of a fit.

    A fit's first step also traces and builds the training graph, which for BERT takes as
    long as many steps. Keras' bar shows step 1 with that time per step, so its first ETA
    (that time, times the steps left) overstates the epoch many times over. This bar says
    "Building the training graph" when the first step starts and how long it took when it
    ends, then starts its clock: step 1 is shown with no ETA and the rate counts from it.
    Pass it in `fit(callbacks=...)`; Keras then adds no bar of its own (`fit_resumable` does).

    Args:
        announce: str or None. A line said when training starts, before the graph build's
            (`Task.fit` names the precision it trains in).

    Attributes:
        build_seconds: float or None. How long the fit's first step took (None before it ends).
    """

    def __init__(self, announce=None):
        super().__init__()
        self.announce = announce
        self.build_seconds = None
        self._build_started = None

    def _say(self, message):
        if not self.verbose:
            return
        if keras.config.is_interactive_logging_enabled():
            print(message, flush=True)
        else:  # Keras writes its own lines to logging then; so does this bar
            logging.getLogger("keras_bert_zoo.training").info(message)

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.build_seconds = None
        self._build_started = None
        if self.announce:
            self._say(self.announce)

    def on_train_batch_begin(self, batch, logs=None):
        if self.build_seconds is None and self._build_started is None:
            self._say("Building the training graph (the first step)...")
            self._build_started = time.time()

    def on_train_batch_end(self, batch, logs=None):
        if self.build_seconds is not None or self._build_started is None:
            super().on_train_batch_end(batch, logs)
            return
        self.build_seconds = time.time() - self._build_started
        self._say(f"Built the training graph in {self.build_seconds:.1f}s; the ETA counts the steps after it.")
        # A new bar from here: its first update records this moment as "after the first step"
        # without drawing (Keras' Progbar then counts the rate from it); later ones draw as usual.
        self.progbar = keras.utils.Progbar(target=self.target, verbose=0, unit_name="step",
                                           stateless_metrics=set())
        self.seen = batch + 1
        self.progbar.update(self.seen, list((logs or {}).items()), finalize=False)
        self.progbar.verbose = self.verbose


def with_progress_bar(callbacks, verbose, policy):
    """`Task.fit`'s callbacks: with a progress bar (verbose) and none of the caller's, ours, which
    says the graph build apart (kept out of the ETA) after a line naming the precision (`policy`,
    the model's dtype policy's name) it trains in."""
    callbacks = list(callbacks or [])
    if verbose != 0 and not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks):
        callbacks.append(BuildAwareProgbar(announce=model_precision_line(policy)))
    return callbacks
