"""The paper's fine-tuning search on keras-tuner: grid × restarts, scored at the end, resumable."""

import json
import os
import subprocess
import sys

import pytest

from keras_bert_zoo.finetuning.search import tuner as tuning, report as tuning_report

SCRIPT = os.path.join(os.path.dirname(__file__), "run_tiny_search.py")


def _run(tuner_dir, kill_at=None):
    args = [sys.executable, SCRIPT, str(tuner_dir)] + ([str(kill_at)] if kill_at else [])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)


def _rows(proc):
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("ROWS ")][-1]
    return json.loads(line[5:])


@pytest.mark.slow
def test_search_killed_mid_trial_resumes_to_the_same_table(tmp_path):
    whole = _rows(_run(tmp_path / "whole"))
    assert [(r["learning_rate"], r["restart"]) for r in whole] == [(0.3, 0), (0.3, 1), (0.03, 0), (0.03, 1)]
    assert sum(r["best"] for r in whole) == 1
    killed = _run(tmp_path / "killed", kill_at=3)  # SIGKILL while building the third trial
    assert killed.returncode == -9
    trials = sorted(os.listdir(tmp_path / "killed"))
    assert [t for t in trials if t.startswith("trial_")] == ["trial_0", "trial_1", "trial_2"]
    resumed = _run(tmp_path / "killed")
    assert _rows(resumed) == whole
    # Finished trials were not run again: the resumed process built trial 3 (re-run) and 4 only.
    assert len([t for t in os.listdir(tmp_path / "killed") if t.startswith("trial_")]) == 4


def test_grids_resolve_and_bad_grids_are_refused():
    paper = tuning.resolve_grid("paper")
    assert paper == {"learning_rate": [5e-5, 4e-5, 3e-5, 2e-5], "batch_size": [16, 32], "epochs": [2, 3, 4]}
    assert len(tuning.grid_points(paper, 2)) == 48
    assert tuning.resolve_grid('{"learning_rate": [1e-4], "batch_size": [8], "epochs": [1]}')["epochs"] == [1]
    bad = [
        ("large", "JSON object"),
        ({"learning_rate": [1e-4], "batch_size": [8]}, "exactly the keys"),
        ({"learning_rate": [1e-4], "batch_size": [8], "epochs": [1], "warmup": [0.1]}, "exactly the keys"),
        ({"learning_rate": [], "batch_size": [8], "epochs": [1]}, "non-empty list"),
        ({"learning_rate": [1e-4], "batch_size": [8.0], "epochs": [1]}, "positive ints"),
        ({"learning_rate": [1e-4, 1e-4], "batch_size": [8], "epochs": [1]}, "repeats"),
    ]
    for grid, message in bad:
        with pytest.raises(ValueError, match=message):
            tuning.resolve_grid(grid)


def test_report_marks_the_best_and_plots_the_best_restart(tmp_path):
    rows = [dict(learning_rate=lr, batch_size=bs, epochs=2, restart=r, accuracy=acc, seconds=1.0, best=False)
            for (lr, bs, r, acc) in [(5e-5, 16, 0, 0.6), (5e-5, 16, 1, 0.7), (2e-5, 16, 0, 0.65), (2e-5, 16, 1, 0.5)]]
    rows[1]["best"] = True
    grids = tuning_report.best_restart_grid(rows, "accuracy")
    assert grids[2] == ([5e-5, 2e-5], [16], [[0.7], [0.65]])
    md, png = tuning_report.write_search_report(rows, "accuracy", str(tmp_path))
    text = open(md, encoding="utf-8").read()
    assert "| 5e-05 | 16 | 2 | 1 | 0.7000 | 1.0 | **best** |" in text
    assert "Best: learning rate 5e-05, batch 16, 2 epochs, restart 1: accuracy = 0.7000." in text
    with open(png, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
