"""The files of a checkpoint directory: the `checkpoint` state file and the `ckpt-N.*` saves.

TensorFlow's `CheckpointManager` trusts the small `checkpoint` state file alone: without
it a directory of good saves looks empty, and a damaged one fails inside TensorFlow
(`UnicodeDecodeError`, "Invalid checkpoint state"). These helpers read the state file
without trusting it, find the complete saves by listing the files, and write a state
file that names them, so `TrainingCheckpoint` can resume from the files themselves.
"""

import os
import re
import shutil
import time

import tensorflow as tf

from keras_bert_zoo.utils.files import atomic_write_text

PREFIX = "ckpt"
STATE_FILE = "checkpoint"
_FILE = re.compile(rf"^{PREFIX}-(\d+)(?:\.index|\.data-(\d+)-of-(\d+)|(_temp.*))$")


def step_of(prefix):
    """The step number N of a checkpoint prefix `.../ckpt-N` (0 for a name without one)."""
    match = re.search(r"-(\d+)$", os.path.basename(prefix))
    return int(match.group(1)) if match else 0


def read_state(directory):
    """Reads the `checkpoint` state file of `directory` without trusting it.

    Args:
        directory: str. A checkpoint directory.

    Returns:
        `(prefixes, problem)`: the absolute prefixes the state file names, oldest first
        (None when the file is missing or unreadable), and a description of what is wrong
        with the file (None when it is missing or fine).
    """
    if not os.path.exists(os.path.join(directory, STATE_FILE)):
        return None, None
    try:
        state = tf.train.get_checkpoint_state(directory)
    except ValueError as error:  # "Invalid checkpoint state" (empty), UnicodeDecodeError (bad bytes)
        return None, f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
    if state is None:  # TensorFlow logged a text-format parse error and gave up
        return None, "not in the checkpoint-state text format"
    prefixes = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    return [p if os.path.isabs(p) else os.path.join(directory, p) for p in prefixes], None


def _saves_on_disk(directory):
    """`{step: (has_index, shard_numbers, shard_count)}` of the `ckpt-N` files in `directory`."""
    found = {}
    for name in os.listdir(directory) if os.path.isdir(directory) else ():
        match = _FILE.match(name)
        if match is None or match.group(4) is not None:
            continue
        has_index, shards, count = found.get(int(match.group(1)), (False, set(), None))
        if match.group(2) is None:
            has_index = True
        else:
            shards.add(int(match.group(2)))
            count = int(match.group(3))
        found[int(match.group(1))] = (has_index, shards, count)
    return found


def _is_complete(entry):
    has_index, shards, count = entry
    return has_index and count is not None and shards == set(range(count))


def complete_checkpoints(directory):
    """Prefixes of the saves in `directory` whose index and every data shard exist, oldest first.

    Only file names are checked; `validate_checkpoint` reads the contents.
    """
    found = _saves_on_disk(directory)
    return [os.path.join(directory, f"{PREFIX}-{step}") for step in sorted(found) if _is_complete(found[step])]


def write_state(directory, prefixes):
    """Writes (atomically) a `checkpoint` state file naming `prefixes` (oldest first).

    The timestamps are the index files' modification times, all later than the "last
    preserved" time, so `tf.train.CheckpointManager` adopts every one of them and rotates
    them out by `max_to_keep` exactly as it would its own.
    """
    names = [os.path.basename(p) for p in prefixes]
    stamps = [os.path.getmtime(p + ".index") for p in prefixes]
    lines = [f'model_checkpoint_path: "{names[-1]}"']
    lines += [f'all_model_checkpoint_paths: "{name}"' for name in names]
    lines += [f"all_model_checkpoint_timestamps: {stamp!r}" for stamp in stamps]
    lines.append(f"last_preserved_timestamp: {min(stamps + [time.time()]) - 1.0!r}")
    atomic_write_text(os.path.join(directory, STATE_FILE), "\n".join(lines) + "\n")


def remove_failed_saves(directory, kept, above_step):
    """Deletes what saves killed midway left behind, and nothing else.

    That is every `ckpt-N_temp*` entry (TensorFlow's scratch space during a save), and
    the files of an incomplete `ckpt-N` (no index, or a data shard missing) numbered above
    `above_step`, the newest step the directory held when this run started. Complete
    checkpoints are never deleted here: only `CheckpointManager` rotates them out, and only
    those its state file names.

    Args:
        directory: str. The checkpoint directory.
        kept: iterable of str. Prefixes of the checkpoints the manager keeps.
        above_step: int. Incomplete saves up to this step are left alone (not ours).
    """
    kept = {os.path.basename(p) for p in kept}
    found = _saves_on_disk(directory)
    for name in os.listdir(directory):
        match = _FILE.match(name)
        if match is None:
            continue
        step, scratch = int(match.group(1)), match.group(4) is not None
        if scratch or (f"{PREFIX}-{step}" not in kept and step > above_step and not _is_complete(found[step])):
            path = os.path.join(directory, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
