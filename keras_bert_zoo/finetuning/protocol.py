"""The fair protocol for comparing starting weights (pretrained or random) on a labelled task.

A start is judged only after it had its own best learning rate, picked the same way for
every start, and on rows that picked nothing:

1. the same learning-rate grid for each start, on the first seed, scored on **dev**;
2. the rate with the best dev score is kept (ties: the smaller rate);
3. every seed trains at that rate and is scored once on **test**; the start's figure is
   the mean and standard deviation over the seeds.

The grid's runs are scored on dev only; the first seed's model at the picked rate is kept in
memory and scored on test after the pick (an interrupted protocol that resumes after the pick
trains that run again). `Ledger` keeps each finished run as a line of JSON, so a rerun skips
what is done.
"""

import dataclasses
import json
import os
import time

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.utils.files import atomic_write_text


@dataclasses.dataclass(frozen=True)
class ProtocolConfig:
    """The fine-tuning recipe each start gets, and the protocol's grid and seeds."""

    learning_rates: tuple = (1e-4, 3e-4, 1e-3)  # the grid, the same for every start
    seeds: tuple = (0, 1, 2)  # the first picks the rate; all are scored on test
    epochs: int = 3
    batch_size: int = 32
    warmup_ratio: float = 0.1  # the paper's recipe: linear warm-up, then linear decay

    def __post_init__(self):
        rates, seeds = tuple(self.learning_rates), tuple(self.seeds)
        if not rates or any(not isinstance(r, float) or r <= 0 for r in rates):
            raise ValueError(f"`learning_rates` must be positive floats. Received: {self.learning_rates!r}.")
        if len(seeds) < 2 or len(set(seeds)) != len(seeds) or any(not isinstance(s, int) for s in seeds):
            raise ValueError(f"`seeds` must be at least two distinct ints (a spread needs two). Received: {self.seeds!r}.")
        for name in ("epochs", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}.")
        object.__setattr__(self, "learning_rates", rates)
        object.__setattr__(self, "seeds", seeds)


class Ledger:
    """Finished runs, one JSON line each, keyed by (start, task, learning rate, seed).

    Args:
        path: str or None. The JSON Lines file (appended to, read back on a rerun); None
            keeps the runs in memory only.
    """

    def __init__(self, path=None):
        self.path = path
        self.runs = {}
        if path and os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                for number, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        run = json.loads(line)
                    except json.JSONDecodeError:
                        raise ValueError(f"{path}, line {number}: not JSON (an interrupted write?). Delete that "
                                         "line to run it again.") from None
                    self.runs[self.key(run)] = run

    @staticmethod
    def key(run):
        return run["start"], run["task"], float(run["learning_rate"]), int(run["seed"])

    def get(self, start, task, learning_rate, seed):
        return self.runs.get((start, task, float(learning_rate), int(seed)))

    def add(self, run):
        self.runs[self.key(run)] = run
        if self.path:
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(run) + "\n")


def _score(model, x, y, batch_size):
    return float(model.evaluate(x, y, batch_size=batch_size, verbose=0, return_dict=True)["accuracy"])


def train_once(build, data, learning_rate, seed, config, test=True):
    """One run: `build(seed)` → fit on train at `learning_rate` → accuracy on dev (and test).

    `build` returns a task (compiled or not) for the seed; the model's initial head, the
    dropout masks and the order of the training rows all follow the seed.

    Returns:
        `(record, model)`: the record has `learning_rate`, `seed`, `seconds` (of `fit`),
        `train_loss`, `dev` and, with `test`, `test`.
    """
    keras.utils.set_random_seed(seed)
    model = build(seed)
    model.compile(learning_rate=learning_rate, warmup_ratio=config.warmup_ratio)
    (x, y) = data["train"]
    started = time.perf_counter()
    history = model.fit(x, y, batch_size=config.batch_size, epochs=config.epochs, shuffle=True, verbose=0)
    seconds = time.perf_counter() - started
    record = {"learning_rate": float(learning_rate), "seed": int(seed), "seconds": round(seconds, 2),
              "train_loss": float(history.history["loss"][-1]), "dev": _score(model, *data["dev"], 256)}
    if test:
        record["test"] = _score(model, *data["test"], 256)
    return record, model


def run_protocol(start, task, build, data, config, ledger=None, log=print, on_pick=None):
    """Runs the protocol for one start on one task (see the module docstring).

    Args:
        start: str. The start's name (ledger key and log lines).
        task: str. The task's name.
        build: callable `seed -> Task`, the start's model with a fresh head.
        data: dict `train`/`dev`/`test` -> `(x, y)`.
        config: `ProtocolConfig`.
        ledger: `Ledger` or None (a fresh in-memory one).
        log: callable taking one line.
        on_pick: callable or None. Called with the first seed's model at the picked rate
            when this call has it in memory (to save or serve it); not when the ledger
            already held that run's test score.

    Returns:
        dict: `grid` (the first seed's dev score per rate), `learning_rate` (the pick),
        `runs` (every seed at the pick: dev, test, seconds), `test_mean`, `test_std`,
        `dev_mean`.
    """
    ledger = ledger if ledger is not None else Ledger()
    kept = {}  # the grid's best model so far: scored on test once the pick is made

    def run(learning_rate, seed, test):
        done = ledger.get(start, task, learning_rate, seed)
        if done is not None and (not test or "test" in done):
            return done
        if done is not None and kept.get("rate") == learning_rate:  # the pick, trained in the grid
            model = kept.pop("model")
            done = dict(done, test=_score(model, *data["test"], 256))
        else:
            record, model = train_once(build, data, learning_rate, seed, config, test=test)
            done = dict(record, start=start, task=task)
            log(f"{task} · {start}: lr {learning_rate:g}, seed {seed}: dev {done['dev']:.3f} "
                f"({done['seconds']:.0f}s)")
            if not test and done["dev"] > kept.get("dev", -1.0):
                kept.update(rate=learning_rate, dev=done["dev"], model=model)
        ledger.add(done)
        if test and seed == config.seeds[0] and on_pick is not None:
            on_pick(model)
        return done

    first = config.seeds[0]
    grid = {rate: run(rate, first, test=False)["dev"] for rate in config.learning_rates}
    best = max(config.learning_rates, key=lambda rate: (grid[rate], -rate))
    if kept.get("rate") != best:
        kept.clear()
    runs = [run(best, seed, test=True) for seed in config.seeds]
    tests = np.asarray([r["test"] for r in runs])
    return {"grid": {f"{rate:g}": score for rate, score in grid.items()}, "learning_rate": best, "runs": runs,
            "test_mean": float(tests.mean()), "test_std": float(tests.std(ddof=1)),
            "dev_mean": float(np.mean([r["dev"] for r in runs]))}


def majority_accuracy(train_labels, test_labels):
    """Test accuracy of always answering the training set's most frequent label."""
    values, counts = np.unique(np.asarray(train_labels), return_counts=True)
    return float(np.mean(np.asarray(test_labels) == values[np.argmax(counts)]))


def write_json(path, value):
    """Writes `value` as indented JSON, atomically."""
    atomic_write_text(path, json.dumps(value, indent=1, default=float) + "\n")


def deterministic():
    """Seeded runs give the same numbers on a rerun, whatever the thread scheduling."""
    tf.config.experimental.enable_op_determinism()
