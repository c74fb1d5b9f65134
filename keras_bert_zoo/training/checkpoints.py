"""`TrainingCheckpoint`: one `tf.train.Checkpoint` that makes a pretraining run resumable.

It holds the model, the optimizer (slots, iteration count, loss-scale state), the
global step, the data iterator and every random `SeedGenerator` state (dropout).
Keras saves the seed states neither in `save_weights` nor through
`tf.train.Checkpoint(model=...)`; without them a resumed run draws other dropout
masks and drifts from an uninterrupted one (see RELIABILITY.md).
"""

import logging
import os
import re
import shutil

import keras
import tensorflow as tf

from keras_bert_zoo.training.checkpoint_files import (
    PREFIX, STATE_FILE, complete_checkpoints, read_state, remove_failed_saves, step_of, write_state)
from keras_bert_zoo.utils import keras_internals

logger = logging.getLogger(__name__)


class CheckpointCorruptError(ValueError):
    """A checkpoint file cannot be read completely (truncated, bad checksum, missing)."""


class IncompleteSaveError(CheckpointCorruptError):
    """A multi-worker save stopped before every worker wrote its part (always skipped)."""


def seed_generator_states(model):
    """Returns `{path: state variable}` of every `keras.random.SeedGenerator` in `model`.

    Args:
        model: `keras.Model` (or layer).

    Returns:
        dict from a unique, stable name to the backend `tf.Variable` of each state.
    """
    states, seen = {}, set()
    # Keys follow the (deterministic) layer traversal order, not the global
    # `seed_generator_N` names, which depend on what else the process built.
    for layer in keras_internals.flatten_layers(model):
        for name, value in sorted(vars(layer).items()):
            if isinstance(value, keras.random.SeedGenerator) and id(value) not in seen:
                seen.add(id(value))
                key = re.sub(r"[^A-Za-z0-9_]", "_", f"seed_{len(states):03d}_{layer.name}_{name}")
                states[key] = value.state.value
    return states


def validate_checkpoint(prefix):
    """Reads every tensor of a checkpoint so a damaged file fails before any restore.

    TensorFlow's bundle reader checks each tensor's length and CRC32C on read, so
    reading them all proves the files are complete.

    Args:
        prefix: str. Checkpoint prefix (`.../ckpt-100`).

    Raises:
        CheckpointCorruptError: naming the file that could not be read.
    """
    index_file = prefix + ".index"
    try:
        reader = tf.train.load_checkpoint(prefix)
        dtypes = reader.get_variable_to_dtype_map()
        for key, dtype in dtypes.items():
            if dtype == tf.variant:
                continue  # Not readable by the Python reader; restored below by TF.
            reader.get_tensor(key)
    except (tf.errors.OpError, ValueError, OSError, IndexError, RuntimeError) as error:
        data_files = sorted(tf.io.gfile.glob(prefix + ".data-*")) or [prefix + ".data-*"]
        raise CheckpointCorruptError(
            f"Checkpoint {prefix!r} is damaged (files: {index_file}, {', '.join(data_files)}): "
            f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        ) from error


def adopt_saves_on_disk(directory, fallback=True):
    """Makes the `checkpoint` state file of `directory` name its complete saves, if it does not.

    A missing state file (saves copied without it, a run killed inside its first save)
    or a damaged one (bad bytes, empty, not in the text format) would make TensorFlow
    see no checkpoint, or fail; the state file is rewritten to name the complete
    `ckpt-N` saves found by listing the files, oldest first, so the run resumes from the
    newest and the manager rotates them out as its own. Saves are never deleted here.

    Args:
        directory: str. The checkpoint directory (this process may write to it).
        fallback: bool. On a damaged state file, rebuild it (True) or raise.

    Returns:
        int: the newest step the directory holds (0 if none).

    Raises:
        CheckpointCorruptError: the state file is damaged and `fallback` is False.
    """
    prefixes, problem = read_state(directory)
    if prefixes is not None:
        return max(map(step_of, prefixes))
    on_disk = complete_checkpoints(directory)
    names = [os.path.basename(p) for p in on_disk]
    path = os.path.join(directory, STATE_FILE)
    if problem is not None:
        message = f"Checkpoint state file {path} is damaged ({problem})."
        if not fallback:
            raise CheckpointCorruptError(
                f"{message} Delete it to resume from the newest complete checkpoint on disk "
                f"({names[-1] if names else 'none found'}), or pass fallback=True.")
        logger.warning("%s Rebuilding it from the complete checkpoints on disk: %s.", message, names or "none")
        if not on_disk:
            os.remove(path)  # names nothing readable; TensorFlow would fail on it
    elif on_disk:
        logger.warning("No checkpoint state file in %s; resuming from the complete checkpoints on disk: %s.",
                       directory, names)
    if on_disk:
        write_state(directory, on_disk)
    return step_of(on_disk[-1]) if on_disk else 0


class TrainingCheckpoint:
    """Model, optimizer, step, data iterator and seed states in one checkpoint, keep-N.

    Saves are atomic (TensorFlow writes temporary files and only then updates the
    `checkpoint` state file), so a run killed during a save restarts from the previous
    complete checkpoint. Restore validates every tensor before loading any, and falls
    back to the previous checkpoint when the newest is damaged. Without a readable
    `checkpoint` state file (missing, damaged, or `ckpt-N.*` files copied without it) the
    complete saves on disk are found by listing the files and adopted (see
    `adopt_saves_on_disk`); a save deletes only what killed saves left, never a complete
    checkpoint outside `max_to_keep`.

    Args:
        directory: str. Where checkpoints live.
        model: `keras.Model`. Its optimizer must be built (variables created).
        optimizer: optimizer to save. Defaults to `model.optimizer`.
        iterator: a `tf.data` iterator (stateless ops), a dict of them, or None.
        max_to_keep: int. Checkpoints kept. Defaults to 3.
        fallback: bool. On a damaged newest checkpoint, restore the previous one
            (True, default) or raise `CheckpointCorruptError`; likewise, on a damaged
            state file, rebuild it from the saves on disk or raise (here, naming it).
        is_chief: bool. Only the chief writes into `directory`; other workers write to
            a private temporary directory that is removed after each save.
        worker: `(index, count)` of this worker. With more than one worker each holds
            its own input position, so the iterators go to a small per-worker data
            checkpoint (`data-worker-<index>/ckpt-<step>`, written before the main
            one); restore picks the newest step that the main checkpoint and every
            worker's data checkpoint have, so all workers agree. This needs a
            directory all workers can read (as Keras' `BackupAndRestore` does).

    Examples:
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(optimizer="sgd", loss="mse")
    >>> model.optimizer.build(model.trainable_variables)
    >>> ckpt = keras_bert_zoo.TrainingCheckpoint("run", model)
    >>> ckpt.restore()   # 0 on a fresh run
    0
    >>> _ = ckpt.step.assign(10); path = ckpt.save()
    >>> keras_bert_zoo.TrainingCheckpoint("run", model).restore()
    10
    """

    def __init__(self, directory, model, optimizer=None, iterator=None, max_to_keep=3,
                 fallback=True, is_chief=True, worker=(0, 1)):
        if not isinstance(max_to_keep, int) or max_to_keep < 1:
            raise ValueError(
                f"`max_to_keep` must be a positive integer. Received: max_to_keep={max_to_keep!r}."
            )
        optimizer = optimizer if optimizer is not None else getattr(model, "optimizer", None)
        if optimizer is None:
            raise ValueError("`optimizer` is None and the model is not compiled. Compile it first.")
        if not optimizer.built:
            with model.distribute_strategy.scope():  # slots must be distributed too
                optimizer.build(model.trainable_variables)
        self.directory = os.path.abspath(os.fspath(directory))
        self.fallback = bool(fallback)
        self.is_chief = bool(is_chief)
        self.worker_index, self.num_workers = int(worker[0]), int(worker[1])
        # The newest step each directory we write held at the start: incomplete saves
        # above it are this run's killed saves, removed after the next save.
        self._start_steps = {}
        if self.is_chief:
            self._start_steps[self.directory] = adopt_saves_on_disk(self.directory, self.fallback)
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        parts = {"model": model, "optimizer": optimizer, "step": self.step,
                 "seed_states": seed_generator_states(model)}
        self.data_manager = None
        if iterator is not None and self.num_workers > 1:
            # One more kept than the main checkpoints: a kill between the two saves
            # leaves the data checkpoint of the previous main one in place.
            data_dir = self._data_dir(self.worker_index)
            self._start_steps[data_dir] = adopt_saves_on_disk(data_dir, self.fallback)
            self.data_manager = tf.train.CheckpointManager(
                tf.train.Checkpoint(iterator=iterator), data_dir, max_to_keep=max_to_keep + 1, checkpoint_name=PREFIX)
        elif iterator is not None:
            parts["iterator"] = iterator
        self.checkpoint = tf.train.Checkpoint(**parts)
        write_dir = self.directory if self.is_chief else self._worker_dir()
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, write_dir, max_to_keep=max_to_keep, checkpoint_name=PREFIX
        )

    def _data_dir(self, index):
        return os.path.join(self.directory, f"data-worker-{index}")

    def _worker_dir(self):
        return os.path.join(self.directory, f"_worker_tmp_{os.getpid()}")

    def save(self):
        """Writes a checkpoint numbered by the current step; returns its prefix.

        Then removes what killed saves left (scratch files, incomplete saves newer than
        the directory's newest at the start); complete checkpoints go only by `max_to_keep`.
        """
        step = int(self.step.numpy())
        managers = [self.data_manager] if self.data_manager is not None else []
        managers += [self.manager] if self.is_chief else []
        if self.data_manager is not None:
            self.data_manager.save(checkpoint_number=step)
        path = self.manager.save(checkpoint_number=step)
        for manager in managers:
            remove_failed_saves(manager.directory, manager.checkpoints, self._start_steps[manager.directory])
        if not self.is_chief:
            shutil.rmtree(self._worker_dir(), ignore_errors=True)
        return path

    def checkpoints(self):
        """Checkpoints in the directory, oldest first: those the state file names, or
        (without a readable state file) the complete `ckpt-N` saves found on disk."""
        prefixes, _ = read_state(self.directory)
        return prefixes if prefixes is not None else complete_checkpoints(self.directory)

    def restore(self):
        """Restores the newest readable checkpoint; returns the restored step (0 if none).

        Raises:
            CheckpointCorruptError: the newest checkpoint is damaged and `fallback`
                is False, or every checkpoint is damaged.
        """
        candidates = self.checkpoints()
        errors = []
        for prefix in reversed(candidates):
            try:
                validate_checkpoint(prefix)
                data_prefix = self._data_prefixes(prefix)
            except CheckpointCorruptError as error:
                if not self.fallback and not isinstance(error, IncompleteSaveError):
                    raise
                logger.warning("%s Falling back to the previous checkpoint.", error)
                errors.append(str(error))
                continue
            self.checkpoint.restore(prefix).assert_existing_objects_matched().expect_partial()
            if data_prefix is not None:
                self.data_manager.checkpoint.restore(data_prefix).assert_existing_objects_matched()
            logger.info("Restored %s at step %d.", prefix, int(self.step.numpy()))
            return int(self.step.numpy())
        if errors:
            raise CheckpointCorruptError("No readable checkpoint: " + " | ".join(errors))
        return 0

    def _data_prefixes(self, prefix):
        """This worker's data checkpoint for main checkpoint `prefix`, after checking that
        every worker has a complete one for the same step (None with one worker).

        Raises:
            IncompleteSaveError: a worker's data checkpoint is missing.
            CheckpointCorruptError: a worker's data checkpoint is damaged.
        """
        if self.data_manager is None:
            return None
        name = os.path.basename(prefix)
        prefixes = [os.path.join(self._data_dir(w), name) for w in range(self.num_workers)]
        for worker, data_prefix in enumerate(prefixes):
            if not tf.io.gfile.exists(data_prefix + ".index"):
                raise IncompleteSaveError(
                    f"Checkpoint {prefix!r} has no input-position checkpoint of worker {worker} "
                    f"({data_prefix}); that worker stopped before saving it."
                )
            validate_checkpoint(data_prefix)
        return prefixes[self.worker_index]
