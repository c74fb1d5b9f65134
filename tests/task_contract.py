"""`assert_task_contract(task, raw_x, y)`: what every task model must do (keras-hub's task tests).

1. `predict` on raw strings equals `predict` on the preprocessor's ids (given as packed
   ids, and with `task.preprocessor = None`): the length-sorted, padding-cut pipeline
   changes no number.
2. One `fit` step of the default `compile()` recipe lowers the loss on a fixed batch.
3. `get_config`/`from_config`, the `.keras` file (safe mode) and `save_to_preset` →
   `from_preset` give the same predictions.
4. Optionally, `fit` under `MirroredStrategy` on 2 logical CPUs equals one device
   (`assert_mirrored_equals_one_device`, a subprocess: logical devices are fixed at start).
"""

import json
import os
import subprocess
import sys

import keras
import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _close(actual, expected, atol):
    for a, e in zip(keras.tree.flatten(actual), keras.tree.flatten(expected)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), atol=atol, rtol=0)


def assert_task_contract(task, raw_x, y, tmp_path, atol=1e-5, learning_rate=1e-3):
    """Checks the task contract on `(raw_x, y)` (a few rows). `task` is built with dropout 0."""
    expected = task.predict(raw_x, verbose=0)
    ids = task.preprocessor(raw_x)
    _close(task.predict(ids, verbose=0), expected, atol)
    preprocessor, task.preprocessor = task.preprocessor, None
    _close(task.predict(ids, verbose=0), expected, atol)
    task.preprocessor = preprocessor

    config = task.get_config()
    clone = type(task).from_config(config)
    assert clone.get_config() == config
    clone.set_weights(task.get_weights())
    # The vocabulary is an asset of `.keras` files, not config: feed the clone ids.
    _close(clone.predict(ids, verbose=0), expected, atol)

    path = os.path.join(str(tmp_path), "task.keras")
    task.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    assert type(restored) is type(task) and restored.task_config() == task.task_config()
    _close(restored.predict(raw_x, verbose=0), expected, atol)

    preset = os.path.join(str(tmp_path), "preset")
    task.save_to_preset(preset)
    reloaded = type(task).from_preset(preset)
    assert reloaded.task_config() == task.task_config()
    assert reloaded.preprocessor.sequence_length == task.preprocessor.sequence_length
    _close(reloaded.predict(raw_x, verbose=0), expected, atol)

    task.compile(learning_rate=learning_rate)
    before = task.evaluate(raw_x, y, batch_size=len(y), return_dict=True, verbose=0)["loss"]
    task.fit(raw_x, y, batch_size=len(y), epochs=1, shuffle=False, verbose=0)
    after = task.evaluate(raw_x, y, batch_size=len(y), return_dict=True, verbose=0)["loss"]
    assert np.isfinite(before) and after < before, (before, after)
    return expected


_MIRRORED_SCRIPT = r"""
import importlib, json, sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras
module, name = sys.argv[1].split(":")
build = getattr(importlib.import_module(module), name)
data = json.loads(open(sys.argv[2]).read())
x = tuple(data["x"]) if data["pairs"] else data["x"]
y = np.asarray(data["y"])

def run(strategy):
    keras.utils.set_random_seed(0)
    with strategy.scope():
        task = build()
        task.compile()
        # A clip the tiny model's gradients exceed: the clipping path is under test too.
        task.optimizer.clip_global_norm = 0.05
    initial = [np.asarray(v) for v in task.trainable_variables]
    task.fit(x, y, batch_size=len(y) // 2, epochs=2, shuffle=False, verbose=0)
    final = [np.asarray(v) for v in task.trainable_variables]
    moved = max(float(np.max(np.abs(a - b))) for a, b in zip(initial, final))
    return final, int(task.optimizer.iterations.numpy()), moved

one, steps_one, moved = run(tf.distribute.get_strategy())
two, steps_two, _ = run(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))
print(json.dumps({"steps": [steps_one, steps_two], "moved": moved,
                  "max_diff": max(float(np.max(np.abs(a - b))) for a, b in zip(one, two))}))
"""


def assert_mirrored_equals_one_device(builder, raw_x, y, tmp_path, atol=1e-6):
    """`fit` (default compile, its clip lowered to 0.05 so that it acts; 2 epochs of 2
    steps) under MirroredStrategy on 2 logical CPUs ends with the same weights as on one
    device. `builder` is `"module:function"` returning a task built with dropout 0."""
    data = os.path.join(str(tmp_path), "data.json")
    pairs = isinstance(raw_x, tuple)
    with open(data, "w") as f:
        json.dump({"x": [list(c) for c in raw_x] if pairs else list(raw_x), "y": np.asarray(y).tolist(),
                   "pairs": pairs}, f)
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    out = subprocess.run([sys.executable, "-c", _MIRRORED_SCRIPT, builder, data], capture_output=True,
                         text=True, env=env, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["steps"] == [4, 4], result
    assert result["max_diff"] <= atol and result["moved"] > 10 * atol, result
    return result
