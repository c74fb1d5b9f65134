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

logger = logging.getLogger(__name__)

_PREFIX = "ckpt"


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
    for layer in model._flatten_layers(include_self=True, recursive=True):
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


def _remove_orphans(manager):
    """Deletes files of saves that never completed (a run killed mid-save)."""
    kept = set(manager.checkpoints)
    directory = manager.directory
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        match = re.match(rf"^({re.escape(_PREFIX)}-\d+)(_temp.*|\.index|\.data-.*)$", name)
        if match and os.path.join(directory, match.group(1)) not in kept:
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)


class TrainingCheckpoint:
    """Model, optimizer, step, data iterator and seed states in one checkpoint, keep-N.

    Saves are atomic (TensorFlow writes temporary files and only then updates the
    `checkpoint` state file), so a run killed during a save restarts from the previous
    complete checkpoint. Restore validates every tensor before loading any, and falls
    back to the previous checkpoint when the newest is damaged.

    Args:
        directory: str. Where checkpoints live.
        model: `keras.Model`. Its optimizer must be built (variables created).
        optimizer: optimizer to save. Defaults to `model.optimizer`.
        iterator: a `tf.data` iterator (stateless ops), a dict of them, or None.
        max_to_keep: int. Checkpoints kept. Defaults to 3.
        fallback: bool. On a damaged newest checkpoint, restore the previous one
            (True, default) or raise `CheckpointCorruptError`.
        is_chief: bool. Only the chief writes into `directory`; other workers write to
            a private temporary directory that is removed after each save.
        worker: `(index, count)` of this worker. With more than one worker each holds
            its own input position, so the iterators go to a small per-worker data
            checkpoint (`data-worker-<index>/ckpt-<step>`, written before the main
            one); restore picks the newest step that the main checkpoint and every
            worker's data checkpoint have, so all workers agree. This needs a
            directory all workers can read (as Keras' `BackupAndRestore` does).

    Examples:
    >>> ckpt = TrainingCheckpoint("/tmp/run", model, iterator=iter(dataset))
    >>> start = ckpt.restore()   # 0 on a fresh run
    >>> ckpt.step.assign(10); ckpt.save()
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
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        parts = {"model": model, "optimizer": optimizer, "step": self.step,
                 "seed_states": seed_generator_states(model)}
        self.data_manager = None
        if iterator is not None and self.num_workers > 1:
            # One more kept than the main checkpoints: a kill between the two saves
            # leaves the data checkpoint of the previous main one in place.
            self.data_manager = tf.train.CheckpointManager(
                tf.train.Checkpoint(iterator=iterator), self._data_dir(self.worker_index),
                max_to_keep=max_to_keep + 1, checkpoint_name=_PREFIX)
        elif iterator is not None:
            parts["iterator"] = iterator
        self.checkpoint = tf.train.Checkpoint(**parts)
        write_dir = self.directory if self.is_chief else self._worker_dir()
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, write_dir, max_to_keep=max_to_keep, checkpoint_name=_PREFIX
        )

    def _data_dir(self, index):
        return os.path.join(self.directory, f"data-worker-{index}")

    def _worker_dir(self):
        return os.path.join(self.directory, f"_worker_tmp_{os.getpid()}")

    def save(self):
        """Writes a checkpoint numbered by the current step; returns its prefix."""
        step = int(self.step.numpy())
        if self.data_manager is not None:
            self.data_manager.save(checkpoint_number=step)
            _remove_orphans(self.data_manager)
        path = self.manager.save(checkpoint_number=step)
        if self.is_chief:
            _remove_orphans(self.manager)
        else:
            shutil.rmtree(self._worker_dir(), ignore_errors=True)
        return path

    def checkpoints(self):
        """Complete checkpoints in the directory, oldest first."""
        state = tf.train.get_checkpoint_state(self.directory)
        if state is None:
            return []
        return [p if os.path.isabs(p) else os.path.join(self.directory, p)
                for p in state.all_model_checkpoint_paths]

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
