"""`run_tuning`: the core of `tools/tune.py`, the paper's search over a `tools/finetune.py` run.

Every trial is the fine-tuning run that `run_finetuning` makes (same data readers, task,
default compile and official dev metrics), with the trial's learning rate, batch size,
epochs and restart seed. Writes into `output_dir`:

- `results.md` (every trial, the best marked) and `heatmap.png` (dev metric of the best
  restart over learning rate × batch size, one panel per epoch count);
- `results.json` (the same rows, plus the objective);
- `preset/`: the best trial's fine-tuned task (kept as the search goes, so a killed search
  keeps the best so far);
- with `export`: the best model as a SavedModel (`keras_bert_zoo.serving.export`), written at the end.

What differs per task kind (GLUE/SWAG, SQuAD, CoNLL NER: data, task, dev metric) is the kind's
(`keras_bert_zoo.finetuning.kind.TaskKind`, picked from `finetuning.run.KINDS` as a run does).
keras-tuner's own files go to `tuner_dir` (default `output_dir/tuner`): run the same command
again to resume.

Before the data is read, `check_search_outputs` checks the folders (`keras_bert_zoo.utils.output_dirs`):
all writable; the export apart from both others; the tuner folder inside `output_dir` or apart
from it. A rerun resumes only the same experiment (`search_experiment`: the task, the data files'
names and sha256, every setting that changes a score, the grid, restarts and objective, recorded
in the tuner folder and in results.json); a folder of another experiment, or of a fine-tuning run,
is refused naming what differs, unless `overwrite` starts a new search (the old one's recorded
files are removed after every check, before the first trial).
"""

import os

from keras_bert_zoo.finetuning.config import FinetuningConfig
from keras_bert_zoo.finetuning.kind import check_preset, checked_export_target, save_or_rescue
from keras_bert_zoo.finetuning.run import KINDS, check_run_space, run_inputs, task_kind
from keras_bert_zoo.finetuning.search.report import write_search_report
from keras_bert_zoo.finetuning.search.tuner import check_tuner_dir, resolve_grid, study_experiment, tune
from keras_bert_zoo.presets.preset import open as open_preset
from keras_bert_zoo.serving.export import export as export_saved_model
from keras_bert_zoo.training.distribute import get_strategy
from keras_bert_zoo.utils.files import atomic_write_json, sha256_file
from keras_bert_zoo.utils.output_dirs import (check_run_dir, check_separate, claim_run_dir,
                                              finish_run_dir, inside, lock_run_dir)

TOOL = "tune"  # the run record's tool
# The `FinetuningConfig` fields that change a trial's score, besides the grid's own (learning rate,
# batch size, epochs) and the data files (hashed). Not `strategy` or `progress`: a search may
# resume on other hardware or quietly.
SCORE_SETTINGS = ("task", "preset", "lowercase", "sequence_length", "doc_stride", "max_query_length",
                  "max_answer_length", "rules", "feature_based", "lstm_units", "max_train_examples", "warmup_ratio",
                  "dropout", "precision", "seed", "skip_malformed", "tfds_data_dir")
DATA_FILES = ("train_file", "dev_file")  # what a trial trains on and is scored on


def task_objective(task):
    """The dev metric the search maximises: MCC (CoLA), F1 (MRPC, QQP, SQuAD, NER), Pearson (STS-B), else accuracy."""
    return KINDS[task].objective_for(task)


def search_experiment(config, preset=None):
    """What defines a search besides its grid: `SCORE_SETTINGS`, the preset's content
    (`Preset.fingerprint`: a folder replaced under the same name is another experiment) and each
    data file's name and sha256 (a tfds split: its name). `preset`: `config.preset` opened."""
    experiment = {key: getattr(config, key) for key in SCORE_SETTINGS}
    experiment["preset_content"] = {"name": os.path.basename(os.path.normpath(str(config.preset))),
                                    "sha256": open_preset(config.preset if preset is None else preset).fingerprint()}
    for name in DATA_FILES:
        source = getattr(config, name)
        experiment[name] = ({"tfds": source} if config.is_tfds(name) else
                            {"name": os.path.basename(source), "sha256": sha256_file(source)})
    return experiment


def check_search_outputs(config, tuner_dir, export, experiment, overwrite=False):
    """Checks the search's folders before anything is read (see the module docstring); changes
    nothing. Returns the plan for `claim_run_dir`. Raises ValueError naming the flag, folder and fix."""
    out, tuner_path = os.path.abspath(config.output_dir), os.path.abspath(tuner_dir)
    check_separate([("--output-dir", out), ("--export", export)])
    check_separate([("--tuner-dir", tuner_path), ("--export", export)])
    if inside(out, tuner_path):
        how = "are the same folder" if out == tuner_path else "overlap (--output-dir is inside --tuner-dir)"
        raise ValueError(f"--output-dir and --tuner-dir {how}: the search's files would be mixed with "
                         f"keras-tuner's. Received: "
                         f"--output-dir={out!r}, --tuner-dir={tuner_path!r}. Leave --tuner-dir out (OUTPUT_DIR/tuner), "
                         "or pass a folder apart from --output-dir.")
    state = check_tuner_dir(tuner_path, experiment, overwrite)

    def same_search(record):
        return record.get("tool") == TOOL and record.get("tuner_dir") == tuner_path and state == "resume"

    plan = check_run_dir(out, "--output-dir", TOOL, overwrite=overwrite, resume=same_search,
                         inputs=run_inputs(config))
    previous_export = (plan["previous"] or {}).get("export")
    own = plan["resume"] and export is not None and previous_export == os.path.abspath(export)
    # A resumed search writes its export again (from preset/, the best trial's).
    plan["export_path"] = checked_export_target(export, "--export", overwrite=overwrite or own)
    plan["export_overwrite"] = overwrite or own
    return plan


def run_tuning(config, grid="paper", restarts=1, tuner_dir=None, objective=None, export=None, overwrite=False):
    """Runs the paper's fine-tuning search for one task (see the module docstring).

    Args:
        config: `FinetuningConfig`. The task, files, preset and recipe; its `learning_rate`,
            `batch_size`, `epochs` and `seed` are replaced per trial (restart r: seed + r).
        grid: "paper", "small", a JSON string or a dict (`tuning.resolve_grid`).
        restarts: int. Random restarts per grid point. Defaults to 1.
        tuner_dir: str or None. keras-tuner's directory (default `<output_dir>/tuner`).
        objective: str or None. The dev metric to maximise (default: `task_objective`).
        export: str or None. Where `keras_bert_zoo.serving.export` writes the best model as a
            SavedModel at the end of the search (atomic; a resumed search writes it again
            from `preset/`, so it always matches the best trial).
        overwrite: bool. Start a new search where `output_dir` or `tuner_dir` holds another one (or
            a fine-tuning run); without it those are refused, and only the same experiment resumes.

    Returns:
        dict: `objective`, `trials` (rows, grid order, `best` marked), `best`, `output_dir`, `export`.
    """
    if not isinstance(config, FinetuningConfig):
        raise TypeError(f"`config` must be a FinetuningConfig. Received: {type(config).__name__}.")
    grid = resolve_grid(grid)
    if not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 1:
        raise ValueError(f"`restarts` must be a positive int. Received: restarts={restarts!r}.")
    if export is not None and (not isinstance(export, str) or not export):
        raise ValueError(f"`export` must be a directory path or None. Received: export={export!r}.")
    if config.export_dir is not None:  # each trial would overwrite it: the search exports its best
        raise ValueError(f"`config.export_dir` is one run's export; a search exports its best trial with "
                         f"`export` (tools/tune.py --export). Received: export_dir={config.export_dir!r}.")
    preset = open_preset(config.preset)  # once for the search: its checks, its fingerprint, every trial's build
    kind = task_kind(config, *check_preset(config, preset), preset)
    objective = objective or kind.default_objective
    if objective not in kind.objectives:
        raise ValueError(f"Task {config.task!r} reports {tuple(kind.objectives)}, not the objective "
                         f"{objective!r}. Received: objective={objective!r}.")
    kind.check_searchable()
    tuner_dir = os.path.abspath(tuner_dir or os.path.join(config.output_dir, "tuner"))
    with lock_run_dir(config.output_dir, "--output-dir"):
        experiment = study_experiment(search_experiment(config, preset), grid, restarts, objective)
        plan = check_search_outputs(config, tuner_dir, export, experiment, overwrite)
        check_run_space(config, export, "--export")
        train, _ = kind.read()
        recorded = {"tuner_dir": tuner_dir, "export": os.path.abspath(export) if export is not None else None}
        planned = ["preset", "results.json", "results.md", "heatmap.png"]
        if inside(tuner_dir, config.output_dir):
            planned.append(os.path.relpath(tuner_dir, os.path.abspath(config.output_dir)).split(os.sep)[0])
        claim_run_dir(plan, planned=planned, **recorded)
        return search(kind, config, train, plan, objective, grid, restarts, tuner_dir, experiment, export,
                      overwrite, recorded)


def search(kind, config, train, plan, objective, grid, restarts, tuner_dir, experiment, export, overwrite,
           recorded):
    """The search once its folder is claimed: the trials, the report, results.json, the export."""
    plan.pop("export_path")
    export_overwrite = plan.pop("export_overwrite")
    best_preset = os.path.join(config.output_dir, "preset")
    rows = tune(kind.build, train, kind.evaluate, objective, tuner_dir, grid=grid, restarts=restarts,
                seed=config.seed, save_best=lambda task, values: save_or_rescue(task, best_preset),
                distribution_strategy=get_strategy(config.strategy), progress=config.progress,
                experiment=experiment, overwrite=overwrite)
    write_search_report(rows, objective, config.output_dir, title=f"Fine-tuning search: {config.task}")
    best = next(r for r in rows if r["best"])
    atomic_write_json(os.path.join(config.output_dir, "results.json"),
                      {"task": config.task, "preset": config.preset, "precision": config.precision,
                       "objective": objective, "grid": grid,
                       "restarts": restarts, "experiment": experiment, "trials": rows, "best": best})
    if export is not None:
        # Into the folder checked before the search (`export_path` was where it would have gone then):
        # a model folder's next version is taken when the export is published.
        export = export_best(kind, best_preset, export, dtype=config.precision, overwrite=export_overwrite)
    finish_run_dir(config.output_dir, TOOL, **recorded)
    return {"objective": objective, "trials": rows, "best": best, "output_dir": config.output_dir,
            "export": export}


def export_best(kind, preset, path, dtype=None, overwrite=False):
    """Exports the best trial's task, reloaded from its preset, as a SavedModel at `path`
    (`overwrite`: replacing an earlier export there).

    `dtype`: the policy the trials ran in (a preset keeps none; without it a bf16 CPU would
    export bf16 graphs of a model scored in float32)."""
    task = kind.task_class.from_preset(preset, dtype=dtype)  # the preset keeps the casing the search tokenized with
    return export_saved_model(task, path, text_inputs=kind.text_inputs, overwrite=overwrite)
