"""(b) MultiWorkerMirroredStrategy: two worker processes on 127.0.0.1 train a few steps.

Each worker reads its own shard (example ids disjoint) and both end with equal weights.
"""

import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

HELPER = os.path.join(os.path.dirname(__file__), "run_tiny_pretraining.py")


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.mark.slow
def test_two_workers_end_with_equal_weights(tmp_path):
    addresses = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    procs = []
    for index in range(2):
        tf_config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(tf_config), TF_CPP_MIN_LOG_LEVEL="3")
        cmd = [sys.executable, HELPER, "--dir", str(tmp_path / "ckpt"), "--steps", "3",
               "--save-every", "2", "--dropout", "0", "--sgd", "0.5", "--strategy", "multi_worker",
               "--out", str(tmp_path / f"w{index}.npz"), "--ids-log", str(tmp_path / f"ids{index}")]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, env=env))
    try:
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, out in zip(procs, outputs):
        assert p.returncode == 0, out[-3000:]
    a, b = np.load(str(tmp_path / "w0.npz")), np.load(str(tmp_path / "w1.npz"))
    assert int(a["step"]) == int(b["step"]) == 3
    for key in a.files:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    ids = [[json.loads(line)["ids"] for line in open(tmp_path / f"ids{i}")] for i in range(2)]
    flat = [set(i for step in worker for i in step) for worker in ids]
    assert len(flat[0]) == len(flat[1]) == 3 * 4  # per-replica batch 4 of global 8
    assert not flat[0] & flat[1]  # each worker reads its own shard
    assert all(i % 2 == 0 for i in flat[0]) and all(i % 2 == 1 for i in flat[1])
    # Only the chief wrote checkpoints (the other worker's temporary copy is removed).
    names = sorted(os.listdir(tmp_path / "ckpt"))
    assert names == ["checkpoint", "ckpt-2.data-00000-of-00001", "ckpt-2.index",
                     "ckpt-3.data-00000-of-00001", "ckpt-3.index"], names
