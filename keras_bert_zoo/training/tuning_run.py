"""`run_tuning`: the core of `tools/tune.py`, the paper's search over a `tools/finetune.py` run.

Every trial is the fine-tuning run that `run_finetuning` makes (same data readers, task,
default compile and official dev metrics), with the trial's learning rate, batch size,
epochs and restart seed. Writes into `output_dir`:

- `results.md` (every trial, the best marked) and `heatmap.png` (dev metric of the best
  restart over learning rate × batch size, one panel per epoch count);
- `results.json` (the same rows, plus the objective);
- `preset/`: the best trial's fine-tuned task (kept as the search goes, so a killed search
  keeps the best so far).
keras-tuner's own files go to `tuner_dir` (default `output_dir/tuner`): run the same command
again to resume.
"""

import dataclasses
import os

from keras_bert_zoo.training.finetuning_config import FinetuningConfig
from keras_bert_zoo.training.tuning import resolve_grid, tune
from keras_bert_zoo.training.tuning_report import write_search_report

# The paper's dev metric per task (§A.3 picks the best on dev; GLUE's official metric).
OBJECTIVES = {"cola": "matthews_corrcoef", "mrpc": "f1", "qqp": "f1", "stsb": "pearson"}


def task_objective(task):
    """The dev metric the search maximises for a task: MCC (CoLA), F1 (MRPC, QQP), Pearson (STS-B), else accuracy."""
    return OBJECTIVES.get(task, "accuracy")


def run_tuning(config, grid="paper", restarts=1, tuner_dir=None, objective=None):
    """Runs the paper's fine-tuning search for one task (see the module docstring).

    Args:
        config: `FinetuningConfig`. The task, files, preset and recipe; its `learning_rate`,
            `batch_size`, `epochs` and `seed` are replaced per trial (restart r: seed + r).
        grid: "paper", "small", a JSON string or a dict (`tuning.resolve_grid`).
        restarts: int. Random restarts per grid point. Defaults to 1.
        tuner_dir: str or None. keras-tuner's directory (default `<output_dir>/tuner`).
        objective: str or None. The dev metric to maximise (default: `task_objective`).

    Returns:
        dict: `objective`, `trials` (rows, grid order, `best` marked), `best`, `output_dir`.
    """
    from keras_bert_zoo.metrics.glue import TASK_METRICS
    from keras_bert_zoo.training import finetuning_run as ft

    if not isinstance(config, FinetuningConfig):
        raise TypeError(f"`config` must be a FinetuningConfig. Received: {type(config).__name__}.")
    grid = resolve_grid(grid)
    objective = objective or task_objective(config.task)
    if objective not in TASK_METRICS[config.task]:
        raise ValueError(f"Task {config.task!r} reports {TASK_METRICS[config.task]}, not the objective "
                         f"{objective!r}. Received: objective={objective!r}.")
    if not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 1:
        raise ValueError(f"`restarts` must be a positive int. Received: restarts={restarts!r}.")
    tuner_dir = tuner_dir or os.path.join(config.output_dir, "tuner")
    lowercase, detected = ft.check_preset(config)
    train_x, train_y, _ = ft._read(config, "train_file", labelled=True)
    if config.max_train_examples is not None:
        train_x, train_y = ft._head(train_x, config.max_train_examples), train_y[: config.max_train_examples]
    dev_x, dev_y, _ = ft._read(config, "dev_file", labelled=True)

    from keras_bert_zoo.metrics.glue import glue_metrics
    from keras_bert_zoo.training.distribute import get_strategy

    def build_task(learning_rate, seed):
        task = ft._build_task(dataclasses.replace(config, learning_rate=learning_rate, seed=seed), train_x)
        if lowercase != detected:
            task.preprocessor = ft._recased(task.preprocessor, config.preset, lowercase)
        return task

    def evaluate(task):
        return glue_metrics(config.task, dev_y, task.predict(dev_x, batch_size=config.batch_size, verbose=0))

    best_preset = os.path.join(config.output_dir, "preset")
    rows = tune(build_task, (train_x, train_y), evaluate, objective, tuner_dir, grid=grid, restarts=restarts,
                seed=config.seed, save_best=lambda task, values: task.save_to_preset(best_preset),
                distribution_strategy=get_strategy(config.strategy), progress=config.progress)
    write_search_report(rows, objective, config.output_dir, title=f"Fine-tuning search: {config.task}")
    from keras_bert_zoo.utils.files import atomic_write_json

    best = next(r for r in rows if r["best"])
    atomic_write_json(os.path.join(config.output_dir, "results.json"),
                      {"task": config.task, "preset": config.preset, "objective": objective, "grid": grid,
                       "restarts": restarts, "trials": rows, "best": best})
    return {"objective": objective, "trials": rows, "best": best, "output_dir": config.output_dir}
