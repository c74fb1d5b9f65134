"""Checks `run_pretraining` makes before its first step: where it writes, what it reads,
and whether a checkpoint directory it resumes belongs to the same run.

A run that would fail at its end (an output directory it may not replace) or train on
nothing (an empty corpus) fails here instead, naming the path; a resumed run whose
model or data settings changed names the setting, its old and its new value.
"""

import os

import numpy as np

from keras_bert_zoo.data.documents import resolve_files
from keras_bert_zoo.presets.preset_format import is_preset_dir
from keras_bert_zoo.pretraining.phases import backbone_shape
from keras_bert_zoo.utils import files
from keras_bert_zoo.utils.output_dirs import check_writable, inside

SETTINGS_FILE = "run_settings.json"
# Settings a resumed run must share with the run that wrote its checkpoints: the model's
# shapes and the data pipeline's (others, such as `steps` or `learning_rate`, may change).
BACKBONE_SETTINGS = ("vocabulary_size", "num_layers", "num_heads", "hidden_dim", "intermediate_dim",
                     "max_sequence_length")
RUN_SETTINGS = ("nsp", "objective", "precision", "batch_size", "phase2_steps", "phase2_batch_size", "bias_correction")
TEXT_SETTINGS = ("sequence_length", "max_predictions", "phase2_sequence_length", "phase2_max_predictions",
                 "masked_lm_prob", "whole_word_masking")


def _flag(name):
    return "--vocabulary / --preset" if name == "vocabulary_size" else "--" + name.replace("_", "-")


def check_output_paths(config):
    """Refuses output paths the run could not write at its end, before anything runs.

    Raises:
        ValueError: naming the argument and the path.
    """
    paths = {"output_dir": config.output_dir, "checkpoint_dir": config.checkpoint_dir, "log_dir": config.log_dir}
    for name, path in paths.items():
        if path is not None:  # made, written and cleaned up by a probe (utils/output_dirs.py)
            check_writable(path, f"`{name}`")
    out = os.fspath(config.output_dir)
    if os.path.isdir(out) and os.listdir(out) and not is_preset_dir(out):
        raise ValueError(f"`output_dir` exists and is not a keras_bert_zoo preset, so the run could not write "
                         f"its result there. Received: output_dir={out!r}. Pass a new or empty directory "
                         "(a preset directory is replaced as a whole).")
    for name in ("checkpoint_dir", "log_dir"):
        if paths[name] is not None and (inside(out, paths[name]) or inside(paths[name], out)):
            raise ValueError(f"`output_dir` and `{name}` overlap: the preset directory is replaced as a whole. "
                             f"Received: output_dir={out!r}, {name}={os.fspath(paths[name])!r}. "
                             "Pass separate directories.")


def _file_list(pattern):
    names = resolve_files(pattern)
    return names if len(names) <= 5 else names[:5] + [f"... ({len(names)} files)"]


def check_corpus(config, phases, dataset_fn, sample_batches=1):
    """Reads each phase's data once up to its first batch; returns phase 1's first batches.

    Args:
        config: `PretrainingConfig`.
        phases: `phase_settings(config, ...)`.
        dataset_fn: callable `(phase, batch_size) -> tf.data.Dataset` of one pass over
            the phase's data, not dropping a last partial batch.
        sample_batches: int. Phase-1 batches to return (numpy), at most one pass.

    Raises:
        ValueError: a phase's data holds fewer instances than one batch (naming the files).
    """
    sample = []
    for phase in phases:
        batches = [b for b in dataset_fn(phase, phase["batch_size"]).take(sample_batches if not sample else 1)]
        count = int(np.shape(batches[0][1]["nsp_labels"])[0]) if batches else 0
        if count < phase["batch_size"]:
            source = config.train_files if config.train_files is not None else phase["tfrecords"]
            raise ValueError(
                f"The training data of {phase['name']} yields {count} instance(s) in a whole pass, fewer "
                f"than one batch of {phase['batch_size']}, so there is nothing to train on. Files: "
                f"{_file_list(source)}. Add text (documents of two or more sentences), or lower the "
                "batch size (--batch-size)" + (" or the sequence length." if config.train_files else "."))
        if not sample:
            sample = [tuple({k: np.asarray(v) for k, v in part.items()} for part in b[:2]) for b in batches]
    return sample


def run_settings(config, vocabulary_size):
    """The settings a resumed run must share with the one that wrote its checkpoints."""
    shape = backbone_shape(config.preset, config.size, vocabulary_size)
    settings = {key: shape.get(key) for key in BACKBONE_SETTINGS}
    settings.update({key: getattr(config, key) for key in RUN_SETTINGS})
    if config.train_files is not None:  # TFRecords carry their own lengths
        settings.update({key: getattr(config, key) for key in TEXT_SETTINGS})
    return settings


def check_run_settings(config, vocabulary_size, write=False):
    """Compares the run's settings with those stored in its checkpoint directory (before any
    model is built); with `write`, stores them.

    Raises:
        ValueError: a setting differs from the stored run's, naming each (flag, old, new).
    """
    settings = run_settings(config, vocabulary_size)
    directory = os.fspath(config.checkpoint_dir)
    path = os.path.join(directory, SETTINGS_FILE)
    if os.path.isfile(path):
        stored = files.read_json(path).get("settings", {})
        changed = [f"{key} ({_flag(key)}): {stored[key]!r} -> {value!r}"
                   for key, value in settings.items() if key in stored and stored[key] != value]
        if changed:
            raise ValueError(
                f"The checkpoint directory {directory} holds a run with other settings, so it cannot be "
                f"resumed: {'; '.join(changed)} (checkpoint's value -> this run's). Run again with the "
                "checkpoint's values to resume, or pass a new --checkpoint-dir to start another run.")
    if write:
        os.makedirs(directory, exist_ok=True)
        files.atomic_write_json(path, {"format": 1, "settings": settings})
