"""A small fine-tuning search in its own process, for the resume test.

    python run_tiny_search.py TUNER_DIR [KILL_AT_TRIAL]

The model is a small dense classifier on fixed data (the search machinery is what is tested;
the BERT search is tested in test_tuning.py). With KILL_AT_TRIAL=k the process SIGKILLs itself
while building trial k (1-based), i.e. in the middle of the search, after k-1 trials finished.
"""

import json
import os
import signal
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert_zoo.finetuning.search.tuner import tune  # noqa: E402

GRID = {"learning_rate": [0.3, 0.03], "batch_size": [8], "epochs": [2]}


def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 6)).astype("float32")
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype("int32")
    return (x[:64], y[:64]), (x[64:], y[64:])


def main(tuner_dir, kill_at=None):
    tf.config.experimental.enable_op_determinism()
    (x, y), (dev_x, dev_y) = data()
    builds = []

    def build_task(learning_rate, seed):
        builds.append(seed)
        if kill_at is not None and len(builds) == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                                  keras.layers.Dense(2)])
        model.compile(keras.optimizers.SGD(learning_rate),
                      keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return model

    def evaluate(model):
        pred = np.argmax(model.predict(dev_x, verbose=0), -1)
        return {"accuracy": float(np.mean(pred == dev_y))}

    rows = tune(build_task, (x, y), evaluate, "accuracy", tuner_dir, grid=GRID, restarts=2, seed=3, progress=False)
    for row in rows:
        row.pop("seconds")
    print("ROWS " + json.dumps(rows), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
