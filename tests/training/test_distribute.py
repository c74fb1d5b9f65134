"""Strategies: get_strategy / TF_CONFIG validation / TPU errors, and MirroredStrategy equivalence."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.training import distribute
from keras_bert_zoo.training.distribute import ReplicaFeeder, distribute_dataset, get_strategy, parse_tf_config
from tests.training import tiny

HELPER = os.path.join(os.path.dirname(__file__), "run_tiny_pretraining.py")
CLUSTER = {"cluster": {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]},
           "task": {"type": "worker", "index": 1}}


def test_parse_tf_config_valid_and_unset(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert parse_tf_config() is None
    assert parse_tf_config("  ") is None
    parsed = parse_tf_config(json.dumps(CLUSTER))
    assert parsed == CLUSTER
    assert distribute.num_tasks(parsed) == 2
    with_chief = {"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "chief", "index": 0}}
    assert distribute.num_tasks(parse_tf_config(with_chief)) == 2


@pytest.mark.parametrize(
    "value, message",
    [
        ("{not json", "not valid JSON"),
        ({"task": {"type": "worker"}}, "`cluster` mapping"),
        ({"cluster": {"wrker": ["a:1"]}}, "Unknown task type 'wrker'"),
        ({"cluster": {"worker": []}}, "non-empty list"),
        ({"cluster": {"worker": ["localhost"]}}, "'localhost' of 'worker' is not `host:port`"),
        ({"cluster": {"worker": ["a:1"]}, "task": {"type": "chief", "index": 0}}, "'chief' is not in the cluster"),
        ({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 2}}, "index 2 is out of range"),
    ],
)
def test_parse_tf_config_errors(value, message):
    with pytest.raises(ValueError, match=message):
        parse_tf_config(value if isinstance(value, str) else json.dumps(value))


def test_get_strategy_names(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    with pytest.raises(ValueError, match="Unknown strategy.*'gpu'"):
        get_strategy("gpu")
    default = tf.distribute.get_strategy()
    assert get_strategy("cpu") is default
    assert get_strategy("auto") is default  # no TPU, no cluster, no GPU on this machine
    with pytest.raises(ValueError, match="needs TF_CONFIG"):
        get_strategy("multi_worker")
    mirrored = get_strategy("mirrored")
    assert isinstance(mirrored, tf.distribute.MirroredStrategy)
    assert mirrored.num_replicas_in_sync == len(tf.config.list_logical_devices("CPU"))


def test_tpu_path_fails_clearly_without_tpu(monkeypatch):
    """(c) The TPU path as far as a CPU allows: the resolver is tried, the error is clear."""
    monkeypatch.delenv("TPU_NAME", raising=False)
    with pytest.raises(ValueError, match="No TPU could be reached \\(tpu='local'\\).*strategy='cpu'"):
        get_strategy("tpu", tpu="local")
    # "auto" picks the TPU when TPU_NAME is set (not connecting: a remote address
    # would wait for the cluster to answer).
    calls = []
    monkeypatch.setattr(distribute, "_tpu_strategy", lambda tpu: calls.append(tpu) or "tpu-strategy")
    monkeypatch.setenv("TPU_NAME", "my-tpu")
    assert get_strategy("auto") == "tpu-strategy" and calls == ["my-tpu"]
    assert get_strategy("auto", tpu="other") == "tpu-strategy" and calls[-1] == "other"


def test_replica_feeder_checks_batch_and_shards():
    strategy = tf.distribute.get_strategy()
    seen = []

    def dataset_fn(index, count, batch):
        seen.append((index, count, batch))
        return tiny.synthetic_dataset(batch, with_ids=True, shard=(index, count))

    feeder = ReplicaFeeder(strategy, dataset_fn, 8)
    assert seen == [(0, 1, 8)]
    x, y, ids = next(feeder)
    assert x["token_ids"].shape == (8, tiny.SEQ)
    assert distribute.worker_context(strategy) == (0, 1, 1)

    class TwoReplicas:
        num_replicas_in_sync = 2

    with pytest.raises(ValueError, match="divisible by the 2 replicas.*batch_size=7"):
        ReplicaFeeder(TwoReplicas(), dataset_fn, 7)


def _run(directory, *extra):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    cmd = [sys.executable, HELPER, "--dir", directory, "--steps", "4", "--dropout", "0",
           "--sgd", "0.5", "--out", directory + ".npz", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


@pytest.mark.slow
def test_mirrored_two_logical_cpus_matches_one_device(tmp_path):
    """(a) Same global batch (8) → same weights after 4 steps, up to float summation order.

    SGD (lr 0.5) is used because Adam's `m / sqrt(v)` turns a 1e-9 difference in a
    near-zero gradient into a full-size step; the strategy is what is under test.
    Tolerance: 1e-5 absolute (measured differences are ~1.5e-7).
    """
    one = _run(str(tmp_path / "one"))
    two = _run(str(tmp_path / "two"), "--strategy", "mirrored", "--logical-cpus", "2")
    for proc in (one, two):
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == 0, out[-3000:]
    a, b = np.load(str(tmp_path / "one.npz")), np.load(str(tmp_path / "two.npz"))
    assert sorted(a.files) == sorted(b.files) and int(a["step"]) == int(b["step"]) == 4
    initial = tiny.make_pretrainer(dropout=0.0)
    moved = 0
    for i, w in enumerate(initial.weights):
        key = f"{i:04d}"
        np.testing.assert_allclose(a[key], b[key], atol=1e-5, rtol=0, err_msg=w.path)
        moved += not np.allclose(a[key], np.array(w), atol=1e-4)
    assert moved > len(initial.trainable_weights) // 2  # training really moved the weights

    # Resumable under MirroredStrategy: the iterators of distribute_datasets_from_function's
    # per-replica pipelines are saved. Killed after step 3 (last checkpoint: step 2),
    # the same command again ends bitwise equal to the uninterrupted mirrored run.
    mirrored = ("--strategy", "mirrored", "--logical-cpus", "2", "--save-every", "2", "--kill-at-step", "3")
    killed = _run(str(tmp_path / "three"), *mirrored)
    out, _ = killed.communicate(timeout=300)
    assert killed.returncode == -9, out[-3000:]
    resumed = _run(str(tmp_path / "three"), *mirrored)
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0 and "done 4 2" in out, out[-3000:]
    c = np.load(str(tmp_path / "three.npz"))
    differing = [k for k in b.files if not np.array_equal(b[k], c[k])]
    assert not differing, f"{len(differing)} of {len(b.files)} arrays differ after the mirrored resume"


_DISTRIBUTE_SCRIPT = r"""
import json, os, sys
os.environ["KERAS_BACKEND"] = "tensorflow"
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from keras_bert_zoo.training.distribute import distribute_dataset
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
calls = []
def dataset_fn(shard, num_shards, per_replica):
    calls.append([shard, num_shards, per_replica])
    return tf.data.Dataset.range(16).shard(num_shards, shard).batch(per_replica)
ds = distribute_dataset(strategy, dataset_fn, 4)
first = next(iter(ds))
parts = [t.numpy().tolist() for t in strategy.experimental_local_results(first)]
print(json.dumps({"calls": calls, "parts": parts}))
"""


def test_distribute_dataset_builds_one_pipeline_per_worker_with_per_replica_batches():
    # distribute_datasets_from_function: one pipeline on this single worker, global batch 4
    # split into 2 + 2 across the two replicas; together they cover the first 4 examples.
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", _DISTRIBUTE_SCRIPT], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["calls"] == [[0, 1, 2]]
    assert [len(p) for p in result["parts"]] == [2, 2]
    assert sorted(sum(result["parts"], [])) == [0, 1, 2, 3]


def test_distribute_dataset_refuses_an_indivisible_batch():
    class TwoReplicas:
        num_replicas_in_sync = 2

    with pytest.raises(ValueError, match="batch_size=5"):
        distribute_dataset(TwoReplicas(), lambda *a: None, 5)
