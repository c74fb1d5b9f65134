"""The paper's two pretraining phases (128 then 512): settings, checks, global-step callbacks.

Used by `pretraining_run.run_pretraining`: phase 1 runs the first `steps - phase2_steps`
steps, phase 2 the rest on the same model at its own sequence length, checkpointing in
`<checkpoint_dir>/phase2`; callbacks report global steps across both.
"""

import math
import os

from keras_bert_zoo.training.callbacks import HeldOutEvaluation, ScalarLogger

PHASE2_KEYS = ("phase2_sequence_length", "phase2_max_predictions", "phase2_batch_size", "phase2_tfrecords")
PHASE2_SEED_OFFSET = 2  # phase 2 draws its data with seed + 2 (held-out batches use seed + 1)


def check_positive(a, names, allow_none=False):
    for name, value in ((n, a[n]) for n in names if not (allow_none and a[n] is None)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}.")


def check_phase2(a):
    steps2 = a["phase2_steps"]
    if not isinstance(steps2, int) or isinstance(steps2, bool) or not 0 <= steps2 < a["steps"]:
        raise ValueError(
            "`phase2_steps` counts the steps of phase 2 inside `steps`, so it must be an integer "
            f"in [0, steps). Received: phase2_steps={steps2!r}, steps={a['steps']!r}. For the paper's "
            "recipe use steps=N and phase2_steps=N // 10."
        )
    given = [k for k in PHASE2_KEYS if a[k] is not None]
    if steps2 == 0 and given:
        raise ValueError(f"{given} only apply to phase 2, which has no steps (phase2_steps=0). "
                         "Set `phase2_steps` or drop them.")
    check_positive(a, PHASE2_KEYS[:3], allow_none=True)
    if steps2 and a["tfrecords"] is not None:
        if a["phase2_tfrecords"] is None:
            raise ValueError("TFRecord input fixes the sequence length, so phase 2 needs its own records: "
                             "pass `phase2_tfrecords` (written at the phase-2 length). Received: None.")
        for name in ("phase2_sequence_length", "phase2_max_predictions"):
            if a[name] is not None:
                raise ValueError(f"`{name}` is for text input; TFRecords carry their own lengths. "
                                 f"Received: {name}={a[name]!r}. Drop it.")
    if a["phase2_tfrecords"] is not None and a["train_files"] is not None:
        raise ValueError("`phase2_tfrecords` needs TFRecord input (`tfrecords`); text input makes phase-2 "
                         f"batches itself. Received: phase2_tfrecords={a['phase2_tfrecords']!r}.")


def max_sequence_length(preset, size):
    if "max_sequence_length" in size:
        return size["max_sequence_length"]
    if preset is None:
        return 512  # BertBackbone's default
    from keras_bert_zoo.presets import get_preset_config

    return get_preset_config(preset)["max_sequence_length"]


def phase_settings(a, max_length):
    """Per-phase settings; `end` is the phase's last global step."""
    phase1 = dict(name="phase 1", offset=0, end=a["steps"] - a["phase2_steps"], batch_size=a["batch_size"],
                  sequence_length=a["sequence_length"], max_predictions=a["max_predictions"],
                  tfrecords=a["tfrecords"], seed=a["seed"], checkpoint_dir=a["checkpoint_dir"])
    phases = [phase1]
    if a["phase2_steps"]:
        length = a["phase2_sequence_length"] or max_length
        predictions = a["phase2_max_predictions"] or math.ceil(
            a["max_predictions"] * length / a["sequence_length"])
        phases.append(dict(name="phase 2", offset=phase1["end"], end=a["steps"],
                           batch_size=a["phase2_batch_size"] or a["batch_size"], sequence_length=length,
                           max_predictions=predictions, tfrecords=a["phase2_tfrecords"],
                           seed=a["seed"] + PHASE2_SEED_OFFSET,
                           checkpoint_dir=os.path.join(os.fspath(a["checkpoint_dir"]), "phase2")))
    if a["train_files"] is not None:
        for phase in phases:
            if phase["sequence_length"] > max_length:
                key = "sequence_length" if phase["offset"] == 0 else "phase2_sequence_length"
                raise ValueError(
                    f"`{key}`={phase['sequence_length']} is longer than the model's "
                    f"max_sequence_length={max_length} (its position table). Shorten it or build "
                    "the model with a larger `max_sequence_length` (size override).")
    return phases


def phase_callbacks(a, batches, offset):
    """TensorBoard and held-out callbacks of one phase, reporting global steps."""
    callbacks, evaluation = [], None
    if a["log_dir"]:
        callbacks.append(ScalarLogger(a["log_dir"], every_n_steps=max(1, a["save_every"] // 10), step_offset=offset))
    if batches:
        evaluation = HeldOutEvaluation(batches, a["eval_every"], log_dir=a["log_dir"], step_offset=offset)
        callbacks.append(evaluation)
    return callbacks, evaluation
