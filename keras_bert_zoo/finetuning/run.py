"""`run_finetuning`: the core of `tools/finetune.py`, one fine-tuning run of any task.

The task's kind (`TaskKind`: `glue.py` for the GLUE tasks and SWAG, `squad.py` for SQuAD
v1.1/v2.0, `tagging.py` for CoNLL NER) comes from `KINDS`, the table of the task names each
kind serves; every run is then the same steps: read → build → fit → score the dev set →
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
"""

import os
import time

import keras

from keras_bert_zoo.finetuning.config import FinetuningConfig
from keras_bert_zoo.finetuning.glue import GlueKind
from keras_bert_zoo.finetuning.kind import check_preset, checked_export_target, export_finetuned, write_results
from keras_bert_zoo.finetuning.squad import SquadKind
from keras_bert_zoo.finetuning.tagging import TaggingKind
from keras_bert_zoo.training.distribute import get_strategy
from keras_bert_zoo.utils.output_dirs import check_run_dir, check_separate, claim_run_dir, finish_run_dir

__all__ = ["FinetuningConfig", "KINDS", "check_outputs", "check_preset", "export_finetuned", "run_finetuning",
           "task_kind"]

# Task name -> its kind: a new task family adds its kind here (one file, one line).
KINDS = {task: kind for kind in (GlueKind, SquadKind, TaggingKind) for task in kind.tasks}


def task_kind(config, lowercase, detected):
    """The `TaskKind` of `config.task`, for a run (`run_finetuning`) or a search (`run_tuning`)."""
    return KINDS[config.task](config, lowercase, detected)


TOOL = "finetune"  # the run record's tool


def check_outputs(config, overwrite=False):
    """Checks `output_dir` and `export_dir` before anything runs (see the module docstring);
    returns the plan for `claim_run_dir`, with the export's folder as `plan["export_path"]`.
    Raises ValueError naming the flag, the folder and the fix."""
    check_separate([("--output-dir", config.output_dir), ("--export-dir", config.export_dir)])
    plan = check_run_dir(config.output_dir, "--output-dir", TOOL, overwrite=overwrite)
    plan["export_path"] = checked_export_target(config.export_dir, "--export-dir", overwrite=overwrite)
    return plan


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
    plan = check_outputs(config, overwrite)
    start = time.perf_counter()
    kind = task_kind(config, *check_preset(config))
    kind.export_path, kind.export_overwrite = plan.pop("export_path"), overwrite
    kind.read()
    kind.settle_recipe()
    claim_run_dir(plan)
    keras.utils.set_random_seed(config.seed)
    with get_strategy(config.strategy).scope():
        task = kind.build(kind.config.learning_rate)  # the kind's: CoNLL's is settled from the data read
    train_seconds = kind.fit(task)
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

