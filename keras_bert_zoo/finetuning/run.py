"""`run_finetuning`: the core of `tools/finetune.py`, one fine-tuning run of any task.

The task's kind (`TaskKind`: `glue.py` for the GLUE tasks, `swag.py` for SWAG, `squad.py` for
SQuAD v1.1/v2.0, `tagging.py` for CoNLL NER; the task's row in `keras_bert_zoo.tasks` names it)
comes from `KINDS`, the table of the task names each kind serves; every run is then the same steps: read → build → fit → score the dev set →
write → export → `results.json` (written last). What each kind writes into `output_dir` is in
its module's docstring; every run also writes `tensorboard/` (TensorBoard logs: training loss,
learning rate and dev metrics per epoch), `curves.png` (the same as a figure, the baseline dashed)
and the preset's model card (`preset/README.md`: data files with rows and sha256, dev scores
beside the baseline, precision, versions, the command); with `export_dir`, the fine-tuned task is also exported there as a
SavedModel that answers raw strings (`export_finetuned`; results.json's `"export_dir"`).

Before anything is read or built, `check_outputs` checks where the run writes
(`keras_bert_zoo.utils.output_dirs`): both folders writable, neither inside the other, and an
`output_dir` that holds an earlier run refused unless `overwrite` (`--overwrite`) is given; then
that run's recorded files are removed, after the data was read and just before the model is
built, so a refused run changes nothing and old and new files are never mixed. `output_dir`'s
`run_files.json` lists what the run wrote.

The run holds `output_dir`'s lock (`utils/run_lock.FolderLock`) throughout: a second run into the
same folder is refused naming this one's process. A `--preset` or data file inside the folder is
never removed by `overwrite` (refused instead), and the file systems must have room for the
preset and the export (`check_run_space`) before the data is read. The trained model is saved as
`preset/` as soon as training ends, before it is scored, so a failure in scoring (or a full disk
later) keeps it; a save that fails writes it to a rescue folder and names it (`kind.save_or_rescue`).
"""

import logging
import os
import time

import keras

from keras_bert_zoo.finetuning.config import FinetuningConfig
from keras_bert_zoo.finetuning.glue import GlueKind
from keras_bert_zoo.finetuning.kind import (check_preset, checked_export_target, export_finetuned, save_or_rescue,
                                            write_results)
from keras_bert_zoo.finetuning.squad import SquadKind
from keras_bert_zoo.finetuning.swag import SwagKind
from keras_bert_zoo.finetuning.tagging import TaggingKind
from keras_bert_zoo.presets.config import get_preset_config, parameter_count
from keras_bert_zoo.presets.preset import open as open_preset
from keras_bert_zoo.training.distribute import get_strategy
from keras_bert_zoo.utils.disk_space import check_free_space
from keras_bert_zoo.utils.output_dirs import (check_run_dir, check_separate, claim_run_dir, finish_run_dir,
                                              lock_run_dir)

__all__ = ["FinetuningConfig", "KINDS", "check_outputs", "check_preset", "check_run_space", "export_finetuned",
           "run_finetuning", "task_kind"]

logger = logging.getLogger("keras_bert_zoo.training")
# What a run reads: never among the files --overwrite removes (`output_dirs.check_run_dir`).
INPUT_FIELDS = ("preset", "train_file", "dev_file", "test_file", "dev_mismatched_file", "tfds_data_dir")

# Task name -> its kind: a new task family adds its kind here (one file, one line).
KINDS = {task: kind for kind in (GlueKind, SwagKind, SquadKind, TaggingKind) for task in kind.tasks}


def task_kind(config, lowercase, detected, preset=None):
    """The `TaskKind` of `config.task`, for a run (`run_finetuning`) or a search (`run_tuning`);
    `preset`, `config.preset` opened (`presets.open`), is what it builds from where given."""
    kind = KINDS[config.task](config, lowercase, detected)
    if preset is not None:
        kind.preset = preset
    return kind


TOOL = "finetune"  # the run record's tool


def check_outputs(config, overwrite=False):
    """Checks `output_dir` and `export_dir` before anything runs (see the module docstring);
    returns the plan for `claim_run_dir`, with the export's folder as `plan["export_path"]`.
    Raises ValueError naming the flag, the folder and the fix."""
    check_separate([("--output-dir", config.output_dir), ("--export-dir", config.export_dir)])
    plan = check_run_dir(config.output_dir, "--output-dir", TOOL, overwrite=overwrite, inputs=run_inputs(config))
    if plan["note"]:
        logger.warning("%s", plan["note"])
    plan["export_path"] = checked_export_target(config.export_dir, "--export-dir", overwrite=overwrite)
    return plan


def run_inputs(config):
    """`(flag, path)` of what `config`'s run reads from disk (tfds splits are not paths)."""
    return [(f"--{name.replace('_', '-')}", getattr(config, name)) for name in INPUT_FIELDS
            if getattr(config, name) is not None and not (name.endswith("_file") and config.is_tfds(name))]


def check_run_space(config, export=None, export_flag="--export-dir", preset=None):
    """Refuses a run whose preset (in `output_dir`) and export would not fit on their file systems
    (`utils.disk_space`), from the preset's config alone (`preset`: `config.preset` opened, where
    the caller has it): nothing is allocated."""
    weights = 4 * parameter_count(get_preset_config(config.preset if preset is None else preset))
    check_free_space([("--output-dir", config.output_dir, weights, "the fine-tuned preset"),
                      (export_flag, export, weights, "the SavedModel export")])


def run_finetuning(config, overwrite=False):
    """Runs one fine-tuning run (see the module docstring, and the kind's, for what it writes).

    Args:
        config: `FinetuningConfig`.
        overwrite: bool. Whether an earlier run in `output_dir` (and an export in `export_dir`)
            may be replaced; without it such a folder is refused before anything runs.

    Returns:
        dict: the contents of `results.json`.
    """
    if not isinstance(config, FinetuningConfig):
        raise TypeError(f"`config` must be a FinetuningConfig. Received: {type(config).__name__}.")
    with lock_run_dir(config.output_dir, "--output-dir"):
        plan = check_outputs(config, overwrite)
        start = time.perf_counter()
        preset = open_preset(config.preset)  # once for the run: its checks and the kind's builds
        kind = task_kind(config, *check_preset(config, preset), preset)
        check_run_space(config, config.export_dir, preset=preset)
        kind.export_path, kind.export_overwrite = plan.pop("export_path"), overwrite
        kind.read()
        kind.settle_recipe()
        claim_run_dir(plan, planned=kind.output_names())
        return train_and_write(kind, config, start)


def train_and_write(kind, config, start):
    """The steps of a run once its folder is claimed: build, fit, save, score, write, export."""
    keras.utils.set_random_seed(config.seed)
    with get_strategy(config.strategy).scope():
        task = kind.build(kind.config.learning_rate)  # the kind's: CoNLL's is settled from the data read
    train_seconds = kind.fit(task)
    # Saved before scoring: a failure there (or in what follows) keeps the trained model; `write`
    # saves it again with what scoring set (SQuAD v2.0's null threshold).
    save_or_rescue(task, os.path.join(config.output_dir, "preset"))
    kind.score(task)
    os.makedirs(config.output_dir, exist_ok=True)
    kind.write(task)
    export_dir = kind.export(task)
    results = kind.results(task, train_seconds, start, export_dir)
    kind.write_curves(results)
    kind.write_card(task, results)
    write_results(config, results, kind.summary_label(results))
    finish_run_dir(config.output_dir, TOOL)
    return results

