"""The paper's fine-tuning search (§A.3) on keras-tuner: a grid × random restarts, resumable.

The paper fine-tunes each task with every learning rate {5e-5, 4e-5, 3e-5, 2e-5} × batch size
{16, 32} × epochs {2, 3, 4} and keeps the best on the dev set; on small data sets it also
re-runs the same checkpoint with other random restarts (data shuffling and head
initialisation) and keeps the best restart, not the mean. `tune` runs that search on
keras-tuner with two fixes of our own, each tested:

- `GridRestartsOracle` walks the grid × restarts in one fixed order and skips every point
  already started, so a search killed (even by SIGKILL) and run again re-runs only the
  interrupted trial, from its start, and then goes on (keras-tuner's `GridSearch` stops with no
  new trial after a reload, keras-tuner#1055).
- A trial is scored by its dev metric **at the end of its run** (the paper's rule), computed by
  the task's own evaluation over the whole dev set — not by the best epoch, keras-tuner's rule.

A rerun resumes only the same experiment: the tuner folder's `experiment.json` records what
defines it (the caller's data files and settings, plus the grid, restarts and objective), and
`check_tuner_dir`, before the first trial, refuses a folder of another experiment naming what
changed, and names any study file (oracle, trial, best.json) that does not read; with `overwrite`
the old study is removed and a new one starts. keras-tuner's own errors on such files name none.
"""

import contextlib
import itertools
import json
import os
import re
import shutil
import time

import keras
import keras_tuner as kt

from keras_bert_zoo.utils.files import atomic_write_json, atomic_write_text, read_json
from keras_bert_zoo.utils.output_dirs import check_writable

PAPER_GRID = {"learning_rate": [5e-5, 4e-5, 3e-5, 2e-5], "batch_size": [16, 32], "epochs": [2, 3, 4]}
SMALL_GRID = {"learning_rate": [5e-5, 3e-5], "batch_size": [32], "epochs": [2]}
GRIDS = {"paper": PAPER_GRID, "small": SMALL_GRID}
GRID_KEYS = ("learning_rate", "batch_size", "epochs")
EXPERIMENT_FILE = "experiment.json"
# What keras-tuner and `tune` write in a tuner folder (with atomic writes' `.tmp-`/`.old-` leftovers).
STUDY_FILE = re.compile(r"(oracle\.json|tuner\d+\.json|best\.json|experiment\.json|trial_\d+|\.(tmp|old)-.+)")
RESTART_HINT = "pass --overwrite to start a new search there (its trials are removed)"


def resolve_grid(grid):
    """A grid as `{"learning_rate": [...], "batch_size": [...], "epochs": [...]}`, validated.

    Args:
        grid: "paper", "small", a JSON string or a dict with exactly the keys `GRID_KEYS`, each a
            non-empty list (learning rates positive numbers, batch sizes and epochs positive ints).
    """
    if isinstance(grid, str):
        if grid in GRIDS:
            return {k: list(v) for k, v in GRIDS[grid].items()}
        try:
            grid = json.loads(grid)
        except json.JSONDecodeError as e:
            raise ValueError(f"`grid` must be 'paper', 'small', a JSON object or a dict. Received: grid={grid!r} "
                             f"({e.msg}).") from None
    if not isinstance(grid, dict) or set(grid) != set(GRID_KEYS):
        keys = sorted(grid) if isinstance(grid, dict) else type(grid).__name__
        raise ValueError(f"`grid` must have exactly the keys {list(GRID_KEYS)}. Received: {keys}.")
    for key in GRID_KEYS:
        values = grid[key]
        integer = key != "learning_rate"
        ok = isinstance(values, list) and values and all(
            (isinstance(v, int) if integer else isinstance(v, (int, float))) and not isinstance(v, bool) and v > 0
            for v in values)
        if not ok:
            kind = "positive ints" if integer else "positive numbers"
            raise ValueError(f"`grid[{key!r}]` must be a non-empty list of {kind}. Received: {values!r}.")
        if len(set(values)) != len(values):
            raise ValueError(f"`grid[{key!r}]` repeats a value. Received: {values!r}.")
    return {k: list(grid[k]) for k in GRID_KEYS}


def grid_points(grid, restarts):
    """Every trial's values, in the search's fixed order (restarts innermost)."""
    return [dict(learning_rate=lr, batch_size=bs, epochs=ep, restart=r)
            for lr, bs, ep in itertools.product(*(grid[k] for k in GRID_KEYS)) for r in range(restarts)]


class GridRestartsOracle(kt.Oracle):
    """Walks the grid × restarts in a fixed order; resumes after a kill without repeating a point.

    Args:
        grid: dict from `resolve_grid`.
        restarts: int. Random restarts per grid point.
        objective: str. The dev metric to maximise.
    """

    def __init__(self, grid, restarts, objective, **kwargs):
        hp = kt.HyperParameters()
        hp.Choice("learning_rate", grid["learning_rate"])
        hp.Choice("batch_size", grid["batch_size"])
        hp.Choice("epochs", grid["epochs"])
        hp.Choice("restart", list(range(restarts)))
        self.points = grid_points(grid, restarts)
        super().__init__(objective=kt.Objective(objective, "max"), hyperparameters=hp,
                         max_trials=len(self.points), allow_new_entries=False, tune_new_entries=False, **kwargs)

    def populate_space(self, trial_id):
        for values in self.points:
            if not self._duplicate(values):
                return {"status": kt.engine.trial.TrialStatus.RUNNING, "values": dict(values)}
        return {"status": kt.engine.trial.TrialStatus.STOPPED}


class FinetuningHyperModel(kt.HyperModel):
    """Builds the task for a trial and fine-tunes it; returns the final dev metrics.

    Args:
        build_task: callable `(learning_rate, seed) -> compiled task`.
        evaluate: callable `(task) -> dict` of dev metrics over the whole dev set.
        objective: str. The metric `evaluate` must return.
        seed: int. Restart `r` uses seed `seed + r` for head initialisation and shuffling.
        on_trial: callable `(values, metrics, task)` called after each trial (progress, best model).
    """

    def __init__(self, build_task, evaluate, objective, seed=0, on_trial=None):
        super().__init__(name="finetuning")
        self.build_task, self.evaluate, self.objective = build_task, evaluate, objective
        self.seed, self.on_trial = seed, on_trial

    def build(self, hp):
        seed = self.seed + hp.get("restart")
        keras.utils.set_random_seed(seed)  # head initialisation
        return self.build_task(hp.get("learning_rate"), seed)

    def fit(self, hp, model, x=None, y=None, **kwargs):
        start = time.time()
        kwargs.pop("callbacks", None)  # keras-tuner's best-epoch checkpoints: the paper uses the end
        kwargs.pop("verbose", None)
        model.fit(x, y, batch_size=hp.get("batch_size"), epochs=hp.get("epochs"), verbose=0, **kwargs)
        metrics = dict(self.evaluate(model))
        if self.objective not in metrics:
            raise ValueError(f"The evaluation returned {sorted(metrics)}, not the objective {self.objective!r}.")
        metrics = {k: float(v) for k, v in metrics.items()}
        metrics["seconds"] = time.time() - start
        if self.on_trial:
            self.on_trial(dict(hp.values), metrics, model)
        return metrics


class _Tuner(kt.Tuner):
    def _populate_initial_space(self):
        # keras-tuner builds the hypermodel once at start-up to discover conditional
        # hyperparameters (for us: a whole BERT from its preset, for nothing). The oracle
        # declares the whole space, so there is nothing to discover. keras-tuner documents this
        # method as the one to override for that (AutoKeras does).
        pass

    def run_trial(self, trial, *args, **kwargs):
        hp = trial.hyperparameters
        strategy = self.distribution_strategy
        with strategy.scope() if strategy is not None else contextlib.nullcontext():
            model = self.hypermodel.build(hp)
        return self.hypermodel.fit(hp, model, *args, **kwargs)


def study_experiment(experiment, grid, restarts, objective):
    """The experiment a tuner folder records: the caller's `experiment` dict plus the grid,
    restarts and objective, as JSON reads it back (tuples as lists)."""
    return json.loads(json.dumps(dict(experiment or {}, grid=grid, restarts=restarts, objective=objective)))


def _brief(value):
    if isinstance(value, dict) and "sha256" in value:  # a data file: its name and the start of its hash
        return f"{value.get('name')} (sha256 {str(value['sha256'])[:12]})"
    return json.dumps(value)


def check_tuner_dir(tuner_dir, experiment, overwrite=False, flag="--tuner-dir"):
    """Checks keras-tuner's folder before the first trial; changes nothing.

    Args:
        tuner_dir: str. The folder.
        experiment: dict from `study_experiment`.
        overwrite: bool. Whether an existing search there may be removed for a new one.
        flag: str. What names the folder to the user.

    Returns:
        "new" (nothing there), "resume" (the same experiment, its files read) or "restart"
        (`overwrite`: the old search is removed by `start_study`).

    Raises:
        ValueError: the folder cannot be written or holds other files; it holds a search of another
            experiment or of none recorded (without `overwrite`); a study file does not read.
            Each names the folder or file and the fix.
    """
    path = os.path.abspath(tuner_dir)
    check_writable(path, flag)
    names = sorted(os.listdir(path)) if os.path.isdir(path) else []  # the probe leaves no folder
    if not names:
        return "new"
    foreign = [n for n in names if not STUDY_FILE.fullmatch(n)]
    if foreign:
        raise ValueError(f"{flag} {path} holds files that are not a search's ({', '.join(foreign[:6])}): they would "
                         "be mixed with its files, and --overwrite removes only a search's. Pass a new or empty "
                         "folder, or move those files away yourself.")
    stored_path = os.path.join(path, EXPERIMENT_FILE)
    if overwrite:
        return "restart"
    if not os.path.isfile(stored_path):
        raise ValueError(f"{flag} {path} holds a search that recorded no experiment (no {EXPERIMENT_FILE}: made by "
                         "an older version, or interrupted as it started), so this run cannot tell whether it is "
                         f"the same one. To resume it, use the version that made it; else {RESTART_HINT}, or "
                         f"give another {flag}.")
    stored = _study_json(stored_path, dict)
    changed = [f"{key}: {_brief(stored.get(key))} -> {_brief(experiment.get(key))}"
               for key in sorted(set(stored) | set(experiment)) if stored.get(key) != experiment.get(key)]
    if changed:
        raise ValueError(f"{flag} {path} holds a search of another experiment: {'; '.join(changed)} (the search's "
                         f"-> this run's). Run with the search's settings to resume it, or {RESTART_HINT}, or "
                         f"give another {flag}.")
    check_study_files(path, experiment["objective"])
    return "resume"


def _study_json(path, kind, check=lambda obj: True, what="a JSON object"):
    try:
        obj = read_json(path)
    except (ValueError, OSError) as e:
        raise ValueError(f"{e} The search cannot resume from it: restore it, or {RESTART_HINT}.") from e
    if not isinstance(obj, kind) or not check(obj):
        raise ValueError(f"{path} is not {what}, so the search cannot resume from it: restore it, or {RESTART_HINT}.")
    return obj


def check_study_files(tuner_dir, objective):
    """Reads every file a resume reads (oracle, tuner, each trial, best.json), naming the first
    that is not valid, before any trial runs (keras-tuner's errors name none; a bad best.json
    failed only after the first new trial)."""
    names = sorted(os.listdir(tuner_dir))
    for name in names:
        path = os.path.join(tuner_dir, name)
        if re.fullmatch(r"oracle\.json|tuner\d+\.json", name):
            _study_json(path, dict)
        elif re.fullmatch(r"trial_\d+", name) and os.path.isfile(os.path.join(path, "trial.json")):
            _study_json(os.path.join(path, "trial.json"), dict,
                        lambda t: set(GRID_KEYS) <= set(t.get("hyperparameters", {}).get("values", {})),
                        f"a trial (its hyperparameters' values hold {list(GRID_KEYS)} and restart)")
    best = os.path.join(tuner_dir, "best.json")
    if os.path.exists(best):
        _study_json(best, dict, lambda b: isinstance(b.get("values"), dict) and isinstance(
            b.get("metrics", {}).get(objective), (int, float)), f"a best trial (values, and metrics with {objective!r})")


def start_study(tuner_dir, experiment, state):
    """Makes the tuner folder ready for `tune`: a "restart" (see `check_tuner_dir`) removes the old
    search's files; the experiment is recorded."""
    path = os.path.abspath(tuner_dir)
    if state == "restart":
        for name in os.listdir(path):
            target = os.path.join(path, name)
            if os.path.isdir(target) and not os.path.islink(target):
                shutil.rmtree(target)
            else:
                os.remove(target)
    if state != "resume":
        atomic_write_json(os.path.join(path, EXPERIMENT_FILE), experiment)


def tune(build_task, train, dev_evaluate, objective, tuner_dir, grid="paper", restarts=1, seed=0,
         save_best=None, distribution_strategy=None, progress=True, experiment=None, overwrite=False):
    """Runs the paper's fine-tuning search; resumable; returns the trials, best first marked.

    Args:
        build_task: callable `(learning_rate, seed) -> compiled task` (e.g. a `from_preset`
            call whose default compile takes the trial's learning rate).
        train: tuple `(x, y)` of training data for `task.fit` (raw strings and labels).
        dev_evaluate: callable `(task) -> dict` of the task's official dev metrics, over the
            whole dev set.
        objective: str. The dev metric to maximise (e.g. "matthews_corrcoef" for CoLA, "f1"
            for MRPC, "pearson" for STS-B, "accuracy").
        tuner_dir: str. keras-tuner's project directory; run the same call again to resume.
        grid: "paper", "small", a JSON string or dict (see `resolve_grid`). Defaults to "paper".
        restarts: int. Random restarts per grid point (the paper's remedy for unstable small
            data sets; the best restart is kept). Defaults to 1.
        seed: int. Restart `r` uses `seed + r`. Defaults to 0.
        save_best: callable `(task, trial)` or None. Called when a trial beats every earlier one
            (e.g. `task.save_to_preset`), so the best model is kept without storing each trial's.
        distribution_strategy: a `tf.distribute` strategy (`keras_bert_zoo.get_strategy()`) or None.
        progress: bool. One line per trial on stdout. Defaults to True.
        experiment: dict or None. What else defines the search (data files and their sha256, the
            settings that change the score), recorded in the tuner folder (`check_tuner_dir`).
        overwrite: bool. Start a new search where `tuner_dir` holds one. Defaults to False.

    Returns:
        list of dicts, one per trial in grid order: the hyperparameters, `restart`, the dev
        metrics, `seconds` and `best` (True for the chosen trial).
    """
    grid = resolve_grid(grid)
    if not isinstance(restarts, int) or isinstance(restarts, bool) or restarts < 1:
        raise ValueError(f"`restarts` must be a positive int. Received: restarts={restarts!r}.")
    if not isinstance(objective, str) or not objective:
        raise ValueError(f"`objective` must be a metric name. Received: objective={objective!r}.")
    total = len(grid_points(grid, restarts))
    experiment = study_experiment(experiment, grid, restarts, objective)
    start_study(tuner_dir, experiment, check_tuner_dir(tuner_dir, experiment, overwrite))
    best_file = os.path.join(tuner_dir, "best.json")

    def on_trial(values, metrics, task):
        done = sum(1 for t in tuner.oracle.trials.values() if t.status == "COMPLETED") + 1
        best = read_json(best_file) if os.path.exists(best_file) else None
        improved = best is None or metrics[objective] > best["metrics"][objective]
        if improved:
            if save_best is not None:
                save_best(task, values)
            atomic_write_text(best_file, json.dumps({"values": values, "metrics": metrics}))
        if progress:
            print(f"[tune] trial {done}/{total} lr={values['learning_rate']:g} batch={values['batch_size']} "
                  f"epochs={values['epochs']} restart={values['restart']}: {objective}={metrics[objective]:.4f} "
                  f"({metrics['seconds']:.0f}s){' best so far' if improved else ''}", flush=True)

    hypermodel = FinetuningHyperModel(build_task, dev_evaluate, objective, seed, on_trial)
    # A failing trial stops the search at once with its error (keras-tuner would try 3).
    oracle = GridRestartsOracle(grid, restarts, objective, max_consecutive_failed_trials=1)
    tuner = _Tuner(oracle=oracle, hypermodel=hypermodel, directory=os.path.dirname(os.path.abspath(tuner_dir)),
                   project_name=os.path.basename(os.path.abspath(tuner_dir)),
                   distribution_strategy=distribution_strategy)
    x, y = train
    tuner.search(x, y, verbose=0)
    return trial_table(tuner.oracle, objective)


def trial_table(oracle, objective):
    """The finished trials in grid order, with `best` on the highest final dev metric."""
    order = {tuple(sorted(p.items())): i for i, p in enumerate(oracle.points)}
    rows = []
    for trial in oracle.trials.values():
        if trial.status != "COMPLETED":
            continue
        values = dict(trial.hyperparameters.values)
        metrics = {name: trial.metrics.get_last_value(name) for name in trial.metrics.metrics}
        rows.append(dict(values, **metrics, best=False))
    rows.sort(key=lambda r: order[tuple(sorted((k, r[k]) for k in ("learning_rate", "batch_size", "epochs",
                                                                     "restart")))])
    if rows:
        max(rows, key=lambda r: r[objective])["best"] = True  # the first of equal scores in grid order
    return rows

