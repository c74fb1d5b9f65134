"""Issue 45: a search resumes only the same experiment, and its folder is checked before the first trial.

- A rerun with other data or settings reused the old trials; now the tuner folder's
  experiment.json names what changed (the search's -> this run's), and `overwrite` starts anew.
- A changed grid gave a bare KeyError, a corrupt oracle/trial file a JSONDecodeError naming no
  file, a corrupt best.json failed only after a whole trial; now each is refused before any
  trial, naming the file.

The model is a small dense classifier on fixed data, as in run_tiny_search.py: the folder's
machinery is what is tested.
"""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert_zoo.finetuning.search.tuner import EXPERIMENT_FILE, tune

GRID = {"learning_rate": [0.1], "batch_size": [16], "epochs": [1]}
DATA = {"train_file": {"name": "train.tsv", "sha256": "a" * 64}, "sequence_length": 128}


class Search:
    """`tune` on a dense model; counts the trials built."""

    def __init__(self):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(48, 4)).astype("float32")
        self.train, self.dev = (x[:32], (x[:32, 0] > 0).astype("int32")), (x[32:], (x[32:, 0] > 0).astype("int32"))
        self.built, self.fail_at = 0, None

    def build(self, learning_rate, seed):
        self.built += 1
        if self.built == self.fail_at:
            raise RuntimeError("stopped")
        model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        model.compile(keras.optimizers.SGD(learning_rate),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    def evaluate(self, model):
        return {"accuracy": float(np.mean(np.argmax(model.predict(self.dev[0], verbose=0), -1) == self.dev[1]))}

    def __call__(self, tuner_dir, grid=GRID, experiment=DATA, **kwargs):
        return tune(self.build, self.train, self.evaluate, "accuracy", str(tuner_dir), grid=grid,
                    experiment=experiment, progress=False, **kwargs)


def test_a_rerun_of_another_experiment_is_refused_naming_what_changed(tmp_path):
    search = Search()
    rows = search(tmp_path / "t")
    assert search.built == 1 and len(rows) == 1
    stored = json.load(open(tmp_path / "t" / EXPERIMENT_FILE))
    assert stored["train_file"]["sha256"] == "a" * 64 and stored["grid"] == GRID and stored["restarts"] == 1
    assert search(tmp_path / "t") == rows and search.built == 1  # the same experiment resumes: nothing re-run
    other = dict(DATA, train_file={"name": "other.tsv", "sha256": "b" * 64}, sequence_length=32)
    with pytest.raises(ValueError, match=r"holds a search of another experiment: sequence_length: 128 -> 32; "
                                         r"train_file: train.tsv \(sha256 aaaaaaaaaaaa\) -> other.tsv \(sha256 "
                                         r"bbbbbbbbbbbb\) \(the search's -> this run's\).*--overwrite"):
        search(tmp_path / "t", experiment=other)
    bigger = dict(GRID, learning_rate=[0.1, 0.01])  # was a bare KeyError from keras-tuner's reload
    with pytest.raises(ValueError, match=r"grid: .*\[0.1\].* -> .*\[0.1, 0.01\]"):
        search(tmp_path / "t", grid=bigger)
    assert search.built == 1
    # overwrite: a new search, of the new experiment.
    rows = search(tmp_path / "t", grid=bigger, experiment=other, overwrite=True)
    assert search.built == 3 and len(rows) == 2
    assert json.load(open(tmp_path / "t" / EXPERIMENT_FILE))["sequence_length"] == 32


@pytest.mark.parametrize("name", ["best.json", "oracle.json", os.path.join("trial_0", "trial.json")])
def test_a_corrupt_study_file_is_named_before_any_trial(tmp_path, name):
    search = Search()
    search(tmp_path / "t")
    with open(tmp_path / "t" / name, "w") as f:
        f.write('{"values": ')
    with pytest.raises(ValueError, match=rf"{os.path.join(str(tmp_path / 't'), name)} is not valid JSON.*"
                                         r"--overwrite to start a new search"):
        search(tmp_path / "t")
    assert search.built == 1
    with open(tmp_path / "t" / name, "w") as f:
        f.write("[]")
    with pytest.raises(ValueError, match=rf"{name} is not a"):
        search(tmp_path / "t")
    assert search.built == 1


def test_a_bad_best_json_is_refused_before_the_next_trial_not_after_it(tmp_path):
    search = Search()
    search.fail_at = 2  # the search stops in its second trial (a killed run's half-done study)
    with pytest.raises(RuntimeError, match="stopped"):
        search(tmp_path / "t", restarts=2)
    search.fail_at = None
    (tmp_path / "t" / "best.json").write_text(json.dumps({"values": {}, "metrics": {"loss": 0.1}}))
    with pytest.raises(ValueError, match=r"best.json is not a best trial \(values, and metrics with 'accuracy'\)"):
        search(tmp_path / "t", restarts=2)
    assert search.built == 2  # was 3: the trial ran, then on_trial failed on best.json


def test_folders_of_no_search_or_other_files_are_refused(tmp_path):
    search = Search()
    legacy = tmp_path / "legacy"
    search(legacy)
    os.remove(legacy / EXPERIMENT_FILE)  # a search an older version made
    with pytest.raises(ValueError, match=r"holds a search that recorded no experiment \(no experiment.json"):
        search(legacy)
    search(legacy, overwrite=True)
    assert search.built == 2 and os.path.isfile(legacy / EXPERIMENT_FILE)
    (legacy / "notes.txt").write_text("mine")
    for overwrite in (False, True):
        with pytest.raises(ValueError, match=r"holds files that are not a search's \(notes.txt\)"):
            search(legacy, overwrite=overwrite)
    assert (legacy / "notes.txt").read_text() == "mine" and search.built == 2
