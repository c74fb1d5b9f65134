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
        iterator: a `tf.data` or distributed iterator with stateless ops, or None.
        max_to_keep: int. Checkpoints kept. Defaults to 3.
        fallback: bool. On a damaged newest checkpoint, restore the previous one
            (True, default) or raise `CheckpointCorruptError`.
        is_chief: bool. Only the chief writes into `directory`; other workers write to
            a private temporary directory that is removed after each save.

    Examples:
    >>> ckpt = TrainingCheckpoint("/tmp/run", model, iterator=iter(dataset))
    >>> start = ckpt.restore()   # 0 on a fresh run
    >>> ckpt.step.assign(10); ckpt.save()
    """

    def __init__(self, directory, model, optimizer=None, iterator=None, max_to_keep=3,
                 fallback=True, is_chief=True):
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
        self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        parts = {"model": model, "optimizer": optimizer, "step": self.step,
                 "seed_states": seed_generator_states(model)}
        if iterator is not None:
            parts["iterator"] = iterator
        self.checkpoint = tf.train.Checkpoint(**parts)
        write_dir = self.directory if self.is_chief else self._worker_dir()
        self.manager = tf.train.CheckpointManager(
            self.checkpoint, write_dir, max_to_keep=max_to_keep, checkpoint_name=_PREFIX
        )

    def _worker_dir(self):
        return os.path.join(self.directory, f"_worker_tmp_{os.getpid()}")

    def save(self):
        """Writes a checkpoint numbered by the current step; returns its prefix."""
        path = self.manager.save(checkpoint_number=int(self.step.numpy()))
        if self.is_chief:
            self._remove_orphans()
        else:
            shutil.rmtree(self._worker_dir(), ignore_errors=True)
        return path

    def _remove_orphans(self):
        """Deletes files of saves that never completed (a run killed mid-save)."""
        kept = set(self.manager.checkpoints)
        for name in os.listdir(self.directory):
            path = os.path.join(self.directory, name)
            match = re.match(rf"^({re.escape(_PREFIX)}-\d+)(_temp.*|\.index|\.data-.*)$", name)
            if match and os.path.join(self.directory, match.group(1)) not in kept:
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)

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
            except CheckpointCorruptError as error:
                if not self.fallback:
                    raise
                logger.warning("%s Falling back to the previous checkpoint.", error)
                errors.append(str(error))
                continue
            self.checkpoint.restore(prefix).assert_existing_objects_matched().expect_partial()
            logger.info("Restored %s at step %d.", prefix, int(self.step.numpy()))
            return int(self.step.numpy())
        if errors:
            raise CheckpointCorruptError("No readable checkpoint: " + " | ".join(errors))
        return 0
