"""(b) MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1.

An uninterrupted two-worker run: each worker reads its own stream (example ids
disjoint) and both end with equal weights. Then R1/R2 across workers: both workers
are killed with SIGKILL after step 4, the same two commands are started again, and
the resumed run ends bitwise equal to the uninterrupted one, with every step trained
on the same examples (each worker restores its own input position).
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

HELPER = os.path.join(os.path.dirname(__file__), "run_tiny_pretraining.py")
STEPS = 6


def outputs_of(procs, timeout=300):
    """Each worker process's combined output once all have ended; any still running after `timeout`
    seconds (or when waiting fails) is killed, so no worker outlives its test."""
    try:
        return [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def run_two_workers(root, name, *extra):
    """Runs both workers to the end (or their injected kill); returns their exit codes."""
    addresses = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="3")
        cmd = [sys.executable, HELPER, "--dir", str(root / name), "--steps", str(STEPS),
               "--save-every", "2", "--dropout", "0.1", "--sgd", "0.5", "--strategy", "multi_worker",
               "--out", str(root / f"{name}-w{index}.npz"), "--ids-log", str(root / f"{name}-ids{index}"),
               *extra]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, env=env))
    outputs = outputs_of(procs)
    return [p.returncode for p in procs], outputs


def step_ids(path):
    """Step → ids of that step (the last record wins: a resumed run redoes steps)."""
    return {r["step"]: r["ids"] for r in map(json.loads, open(path))}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    root = tmp_path_factory.mktemp("multi_worker")
    codes, outputs = run_two_workers(root, "ref")
    for code, out in zip(codes, outputs):
        assert code == 0, out[-3000:]
    return root


@pytest.mark.slow
@pytest.mark.early(60)
def test_two_workers_end_with_equal_weights(uninterrupted):
    root = uninterrupted
    a, b = np.load(str(root / "ref-w0.npz")), np.load(str(root / "ref-w1.npz"))
    assert int(a["step"]) == int(b["step"]) == STEPS
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    ids = [step_ids(root / f"ref-ids{i}") for i in range(2)]
    assert sorted(ids[0]) == sorted(ids[1]) == list(range(1, STEPS + 1))
    flat = [[i for step in sorted(w) for i in w[step]] for w in ids]
    assert len(set(flat[0])) == len(set(flat[1])) == STEPS * 4  # per-replica batch 4 of global 8
    assert not set(flat[0]) & set(flat[1])  # each worker reads its own stream
    # The chief writes the model checkpoints; each worker its own input position.
    names = sorted(os.listdir(root / "ref"))
    expected = [f"ckpt-{s}.{e}" for s in (2, 4, 6) for e in ("data-00000-of-00001", "index")]
    assert names == ["checkpoint", *expected, "data-worker-0", "data-worker-1"], names
    for w in range(2):
        assert "ckpt-6.index" in os.listdir(root / "ref" / f"data-worker-{w}")


@pytest.mark.slow
def test_two_workers_killed_and_resumed_match_uninterrupted(uninterrupted):
    root = uninterrupted
    codes, outputs = run_two_workers(root, "run", "--kill-at-step", "3")
    assert all(code == -9 for code in codes), [o[-2000:] for o in outputs]  # SIGKILL after step 3
    codes, outputs = run_two_workers(root, "run", "--kill-at-step", "3")  # the same commands again
    for code, out in zip(codes, outputs):
        assert code == 0, out[-3000:]
        assert "done 6 2" in out  # resumed from the step-2 checkpoint
    for w in range(2):
        ref, got = np.load(str(root / f"ref-w{w}.npz")), np.load(str(root / f"run-w{w}.npz"))
        differing = [k for k in ref.files if not np.array_equal(ref[k], got[k])]
        assert not differing, f"worker {w}: {len(differing)} of {len(ref.files)} arrays differ"
        # No example replayed or skipped: every step saw exactly the uninterrupted run's ids.
        assert step_ids(root / f"run-ids{w}") == step_ids(root / f"ref-ids{w}")


def test_importing_the_package_leaves_tensorflow_unconfigured():
    """MultiWorkerMirroredStrategy must configure collective ops before TensorFlow's eager
    context starts: importing the package may not create tensors (a module-level
    `tf.constant` did, and every worker failed)."""
    code = ("import keras_bert_zoo\nfrom tensorflow.python.eager import context\n"
            "assert not context.context()._initialized, 'importing keras_bert_zoo started the eager context'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert out.returncode == 0, out.stderr[-2000:]
