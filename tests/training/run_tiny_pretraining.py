"""Subprocess entry point for the kill/resume and strategy tests.

Runs `fit_resumable` on the tiny pretrainer with synthetic batches; the same command
line resumes from `--dir`. Writes the final state (weights, optimizer variables,
step) to `--out` as .npz and the example ids of every step to `--ids-log`.
Failure injection: `--kill-at-step K` (SIGKILL after step K) and
`--kill-in-save-at K` (SIGKILL inside the save of step K, after the data files were
written and before the `checkpoint` state file names them).
"""

import argparse
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _parse():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--save-every", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--strategy", default="cpu")
    p.add_argument("--sgd", type=float, default=0.0, help="SGD learning rate instead of BertAdamW")
    p.add_argument("--logical-cpus", type=int, default=0)
    p.add_argument("--kill-at-step", type=int, default=0)
    p.add_argument("--kill-in-save-at", type=int, default=0)
    p.add_argument("--ids-log", default="")
    p.add_argument("--out", default="")
    return p.parse_args()


def _task_suffix():
    """`-<index>` under TF_CONFIG: every worker kills itself once (markers are per worker)."""
    task = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task")
    return f"-{task['index']}" if task else ""


def _kill(marker):
    """SIGKILL this process, once per `marker` (the resumed run is the same command)."""
    if os.path.exists(marker):
        return
    open(marker, "w").close()
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _inject_kill_in_save(step, marker):
    from tensorflow.python.checkpoint import checkpoint_management as cm

    original = cm.update_checkpoint_state_internal

    def patched(*args, **kwargs):
        path = kwargs.get("model_checkpoint_path") or args[1]
        if path.endswith(f"ckpt-{step}"):
            _kill(marker)
        return original(*args, **kwargs)

    cm.update_checkpoint_state_internal = patched


def main():
    args = _parse()
    os.makedirs(args.dir, exist_ok=True)
    import tensorflow as tf

    if args.logical_cpus:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * args.logical_cpus)
    tf.config.experimental.enable_op_determinism()
    import keras

    keras.config.disable_traceback_filtering()
    import numpy as np

    from keras_bert_zoo.training.distribute import get_strategy
    from keras_bert_zoo.training.resumable_fit import fit_resumable
    from tests.training import tiny

    if args.kill_in_save_at:
        _inject_kill_in_save(args.kill_in_save_at, args.dir.rstrip("/") + ".killed_in_save")
    strategy = get_strategy(args.strategy)
    with strategy.scope():
        optimizer = keras.optimizers.SGD(args.sgd) if args.sgd else None
        model = tiny.make_pretrainer(dtype=args.dtype, dropout=args.dropout, optimizer=optimizer)

    ids_log = open(args.ids_log, "a") if args.ids_log else None

    def on_batch(step, ids):
        # Called as step `step` starts: killing here is a kill right after step - 1.
        if args.kill_at_step and step == args.kill_at_step + 1:
            _kill(args.dir.rstrip("/") + ".killed" + _task_suffix())
        if ids_log:
            ids_log.write(json.dumps({"step": step, "ids": ids.tolist()}) + "\n")
            ids_log.flush()

    def dataset_fn(index, count, batch):
        # Stream `index` of `count` takes every count-th batch of one seeded stream, so
        # the replicas' batches of a step together are one-device batch of that step.
        ds = tiny.synthetic_dataset(batch, with_ids=True)
        return ds.shard(count, index) if count > 1 else ds

    result = fit_resumable(model, dataset_fn, args.batch, args.steps, args.dir,
                           save_every=args.save_every, verbose=0,
                           on_batch=on_batch)
    if args.out:
        variables = model.weights + model.optimizer.variables
        arrays = {f"{i:04d}": np.array(keras.ops.convert_to_numpy(v)) for i, v in enumerate(variables)}
        arrays["step"] = np.array(result["step"])
        np.savez(args.out, **arrays)
    print("done", result["step"], result["resumed_from"], flush=True)


if __name__ == "__main__":
    main()
