"""R1–R4 of RELIABILITY.md: kill -9 and resume, no replay/skip, kill during save, corrupt newest checkpoint.

Each run is a subprocess (tests/training/run_tiny_pretraining.py) of the tiny
pretrainer under mixed_float16 (so the loss-scale state is part of what must match),
dropout 0.1, a seeded shuffled dataset, checkpoints every 3 steps, 8 steps in all.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.training.checkpoints import CheckpointCorruptError, TrainingCheckpoint
from keras_bert_zoo.training.resumable_fit import fit_resumable
from tests.training import tiny

HELPER = os.path.join(os.path.dirname(__file__), "run_tiny_pretraining.py")
STEPS = 8


def run_helper(directory, *extra, check=True):
    """Runs the helper; returns the CompletedProcess."""
    base = os.path.dirname(directory.rstrip("/"))
    name = os.path.basename(directory.rstrip("/"))
    cmd = [sys.executable, HELPER, "--dir", directory, "--steps", str(STEPS), "--save-every", "3",
           "--dtype", "mixed_float16", "--out", os.path.join(base, name + ".npz"),
           "--ids-log", os.path.join(base, name + ".ids"), *extra]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{cmd} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def load_ids(path):
    """Step → ids, the last record of each step winning (a resumed run redoes steps)."""
    records = [json.loads(line) for line in open(path)]
    return records, {r["step"]: r["ids"] for r in records}


def assert_same_state(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    assert sorted(a.files) == sorted(b.files)
    differing = [k for k in a.files if not np.array_equal(a[k], b[k])]
    assert not differing, f"{len(differing)} of {len(a.files)} arrays differ: {differing[:10]}"
    assert int(a["step"]) == STEPS


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """An uninterrupted run of STEPS steps."""
    root = str(tmp_path_factory.mktemp("reference"))
    run_helper(os.path.join(root, "ref"))
    return root


@pytest.mark.slow
def test_r1_r2_r3_kill_and_resume_is_bitwise_equal(reference, tmp_path):
    """Killed after step 5, then killed inside the save of step 6, then resumed to 8."""
    directory = str(tmp_path / "run")
    command = ("--kill-at-step", "5", "--kill-in-save-at", "6")
    killed = run_helper(directory, *command, check=False)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert tf.train.latest_checkpoint(directory).endswith("ckpt-3")

    # R3: the same command resumes from 3 and is killed while saving step 6: its data
    # files are written but the `checkpoint` state file still names step 3 only.
    killed = run_helper(directory, *command, check=False)
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert tf.train.latest_checkpoint(directory).endswith("ckpt-3")
    assert os.path.exists(os.path.join(directory, "ckpt-6.index"))
    open(os.path.join(directory, "ckpt-7.data-00000-of-00001"), "w").write("partial")  # stray

    resumed = run_helper(directory, *command)
    assert "done 8 3" in resumed.stdout  # resumed from the step-3 checkpoint again
    # R1: weights, optimizer slots and iterations, loss scale, seed states, step.
    assert_same_state(os.path.join(reference, "ref.npz"), str(tmp_path / "run.npz"))
    # R2: every step trained on exactly the reference's examples; nothing skipped.
    records, by_step = load_ids(str(tmp_path / "run.ids"))
    _, ref_by_step = load_ids(os.path.join(reference, "ref.ids"))
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5, 4, 5, 6, 4, 5, 6, 7, 8]
    assert by_step == ref_by_step
    flat = [i for s in sorted(by_step) for i in by_step[s]]
    assert len(flat) == len(set(flat)) == STEPS * 8  # no example twice in the run
    # R3: the next saves removed files no complete checkpoint names.
    names = sorted(os.listdir(directory))
    assert names == ["checkpoint", "ckpt-3.data-00000-of-00001", "ckpt-3.index",
                     "ckpt-6.data-00000-of-00001", "ckpt-6.index",
                     "ckpt-8.data-00000-of-00001", "ckpt-8.index"], names


def _train_in_process(directory, steps):
    model = tiny.make_pretrainer(dropout=0.0)

    def dataset_fn(index, count, batch):
        return tiny.synthetic_dataset(batch, shard=(index, count))

    fit_resumable(model, dataset_fn, 4, steps, directory, save_every=2, verbose=0)
    return model, dataset_fn


def test_r4_truncated_newest_checkpoint_falls_back(tmp_path, caplog):
    directory = str(tmp_path / "ckpt")
    model, dataset_fn = _train_in_process(directory, 4)  # checkpoints at steps 2 and 4
    data_file = os.path.join(directory, "ckpt-4.data-00000-of-00001")
    size = os.path.getsize(data_file)
    with open(data_file, "r+b") as f:
        f.truncate(size // 2)
    expected = tf.train.load_checkpoint(os.path.join(directory, "ckpt-2"))
    fresh = tiny.make_pretrainer(seed=1, dropout=0.0)
    before = [np.array(v) for v in fresh.trainable_weights]

    # Fallback off: raises naming the file, and loads nothing.
    strict = TrainingCheckpoint(directory, fresh, fallback=False)
    with pytest.raises(CheckpointCorruptError, match="ckpt-4.data-00000-of-00001"):
        strict.restore()
    assert all(np.array_equal(b, np.array(v)) for b, v in zip(before, fresh.trainable_weights))
    assert int(strict.step.numpy()) == 0

    # Fallback on: warns naming the file and restores step 2 exactly.
    checkpoint = TrainingCheckpoint(directory, fresh)
    with caplog.at_level("WARNING"):
        assert checkpoint.restore() == 2
    assert "ckpt-4.data-00000-of-00001" in caplog.text
    names = {n: n for n in expected.get_variable_to_shape_map()}
    step_key = [n for n in names if n.startswith("step/")][0]
    assert int(expected.get_tensor(step_key)) == 2
    # Every restored weight equals the step-2 file (no value from the damaged step 4).
    # (A variable is stored under the first path TF finds, not always under model/.)
    dtypes = expected.get_variable_to_dtype_map()
    saved = {np.asarray(expected.get_tensor(n)).tobytes() for n in names
             if dtypes[n] != tf.variant}
    for v in fresh.trainable_weights:
        assert np.array(v).tobytes() in saved, v.path


def test_r4_all_checkpoints_damaged_raises(tmp_path):
    directory = str(tmp_path / "ckpt")
    model, _ = _train_in_process(directory, 2)
    for name in os.listdir(directory):
        if name.endswith(".index"):
            open(os.path.join(directory, name), "wb").write(b"garbage")
    with pytest.raises(CheckpointCorruptError, match="No readable checkpoint.*ckpt-2.index"):
        TrainingCheckpoint(directory, model).restore()


def test_multi_worker_restore_picks_a_step_every_worker_saved(tmp_path):
    """Each worker's input position is its own data checkpoint; a kill between workers'
    saves (worker 1 never wrote step 4) makes every worker restore step 2, even with
    fallback off; a damaged data checkpoint of another worker is refused by name."""
    directory = str(tmp_path / "ckpt")

    def worker(index, seed):
        model = tiny.make_pretrainer(seed=seed, dropout=0.0)
        it = iter(tiny.synthetic_dataset(4, shard=(index, 2)))
        return model, it, TrainingCheckpoint(directory, model, iterator={"worker": it}, is_chief=index == 0,
                                             worker=(index, 2), fallback=False)

    (_, it0, c0), (_, it1, c1) = worker(0, 0), worker(1, 0)
    expected = {}
    for step in (2, 4):
        for it in (it0, it1):
            next(it), next(it)  # two batches per save interval
        expected[step] = [next(iter(tiny.synthetic_dataset(4, shard=(i, 2)).skip(step))) for i in (0, 1)]
        for c in (c1, c0) if step == 2 else (c0,):  # worker 1 is killed before its step-4 save
            c.step.assign(step)
            c.save()
    assert sorted(os.listdir(os.path.join(directory, "data-worker-1"))) == [
        "checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index"]
    for index in (0, 1):
        _, it, checkpoint = worker(index, seed=5)
        assert checkpoint.restore() == 2
        got, want = next(it), expected[2][index]
        np.testing.assert_array_equal(got[0]["token_ids"], want[0]["token_ids"])
    damaged = os.path.join(directory, "data-worker-1", "ckpt-2.index")
    open(damaged, "wb").write(b"garbage")
    with pytest.raises(CheckpointCorruptError, match="data-worker-1/ckpt-2.index"):
        worker(0, seed=5)[2].restore()
