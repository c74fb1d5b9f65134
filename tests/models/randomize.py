"""Gives every float weight of a model random values, so numeric tests see non-trivial biases and norms."""

import numpy as np


def randomize_weights(model, seed=0, scale=0.5):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        if "seed" in v.path or not str(v.dtype).startswith("float"):
            continue
        v.assign(rng.normal(0.0, scale, v.shape).astype("float32"))
