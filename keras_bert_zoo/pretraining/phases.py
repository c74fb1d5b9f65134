"""The paper's two pretraining phases (128 then 512): settings and global-step callbacks.

Used by `pretraining_run.run_pretraining`: phase 1 runs the first `steps - phase2_steps`
steps, phase 2 the rest on the same model at its own sequence length, checkpointing in
`<checkpoint_dir>/phase2`; callbacks report global steps across both.
"""

import math
import os

from keras_bert_zoo.presets.config import get_preset_config
from keras_bert_zoo.training.callbacks import ScalarLogger
from keras_bert_zoo.training.held_out import HeldOutEvaluation, format_record

PHASE2_SEED_OFFSET = 2  # phase 2 draws its data with seed + 2 (held-out batches use seed + 1)


def backbone_shape(preset, size, vocabulary_size=None):
    """The backbone arguments a run builds with: the preset's config (or BertBackbone's
    defaults and `vocabulary_size`) with the `size` overrides over it."""
    if preset is None:
        shape = {"vocabulary_size": vocabulary_size, "max_sequence_length": 512}  # BertBackbone's default
    else:
        shape = dict(get_preset_config(preset))
    shape.update(size)
    return shape


def max_sequence_length(preset, size):
    if "max_sequence_length" in size:
        return size["max_sequence_length"]
    return backbone_shape(preset, size)["max_sequence_length"]


def phase_settings(config, max_length):
    """Per-phase settings of a `PretrainingConfig`; `end` is the phase's last global step."""
    c = config
    phase1 = dict(name="phase 1", offset=0, end=c.steps - c.phase2_steps, batch_size=c.batch_size,
                  sequence_length=c.sequence_length, max_predictions=c.max_predictions,
                  tfrecords=c.tfrecords, seed=c.seed, checkpoint_dir=c.checkpoint_dir)
    phases = [phase1]
    if c.phase2_steps:
        length = c.phase2_sequence_length or max_length
        predictions = c.phase2_max_predictions or math.ceil(c.max_predictions * length / c.sequence_length)
        phases.append(dict(name="phase 2", offset=phase1["end"], end=c.steps,
                           batch_size=c.phase2_batch_size or c.batch_size, sequence_length=length,
                           max_predictions=predictions, tfrecords=c.phase2_tfrecords,
                           seed=c.seed + PHASE2_SEED_OFFSET,
                           checkpoint_dir=os.path.join(os.fspath(c.checkpoint_dir), "phase2")))
    if c.train_files is not None:
        for phase in phases:
            if phase["sequence_length"] > max_length:
                key = "sequence_length" if phase["offset"] == 0 else "phase2_sequence_length"
                raise ValueError(
                    f"`{key}`={phase['sequence_length']} is longer than the model's "
                    f"max_sequence_length={max_length} (its position table). Shorten it or build "
                    "the model with a larger `max_sequence_length` (size override).")
    return phases


def _print_record(record):
    print("\n" + format_record(record), flush=True)


def phase_callbacks(config, evaluate, baselines, offset, time_budget):
    """TensorBoard and held-out callbacks of one phase, reporting global steps.

    Returns `(callbacks, evaluation)`: `evaluation` is the `HeldOutEvaluation` (held-out
    results and the time budget) or None when the phase has neither.
    """
    callbacks, evaluation = [], None
    if config.log_dir:
        callbacks.append(ScalarLogger(config.log_dir, every_n_steps=max(1, config.save_every // 10),
                                      step_offset=offset))
    if evaluate is not None or time_budget is not None:
        evaluation = HeldOutEvaluation(evaluate, config.eval_every or config.steps, time_budget=time_budget,
                                       baselines=baselines, log_dir=config.log_dir, step_offset=offset,
                                       progress=_print_record)
        callbacks.append(evaluation)
    return callbacks, evaluation
