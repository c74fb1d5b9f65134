"""Shared fixtures. Tiny configs keep the suite fast on 2 CPU cores."""

import os

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# No precision pin: models are float32 unless asked (`utils.precision.default_policy`), so the
# suite runs with the defaults users get, on every CPU kind.

import gc  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

TINY_BACKBONE = dict(
    vocabulary_size=50,
    num_layers=2,
    num_heads=2,
    hidden_dim=16,
    intermediate_dim=32,
    max_sequence_length=24,
)


@pytest.fixture
def tiny_config():
    return dict(TINY_BACKBONE)


def pytest_collection_modifyitems(config, items):
    """The files holding an `early(seconds)` test first, longest first, then the rest in their order.
    `make test`'s workers take whole files in this order (`--dist loadfile`), so the long ones start
    at the beginning (longest processing time first) instead of ending the run on one worker."""
    seconds = {}
    for item in items:
        mark = item.get_closest_marker("early")
        if mark is not None:
            seconds[item.path] = max(seconds.get(item.path, 0), mark.args[0])
    items.sort(key=lambda item: -seconds.get(item.path, 0))  # stable: the order within a file is kept


def pytest_collection_finish(session):
    """Moves what the imports made (TensorFlow, Keras and the package: ~0.5M objects) out
    of the garbage collector's reach: each test's `gc.collect()` then scans only what the
    tests made, ~0.02 s instead of 0.4-1 s (~8 minutes of CPU over the suite)."""
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts from float32 and a fresh name scope."""
    keras.config.set_dtype_policy("float32")
    keras.utils.clear_session()
    yield
    keras.config.set_dtype_policy("float32")


def random_inputs(batch=2, seq=8, vocab=50, seed=0, pad_from=None):
    """Backbone inputs with random ids; rows are padded from `pad_from[i]` when given."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(1, vocab, (batch, seq)).astype("int32")
    seg = np.zeros((batch, seq), "int32")
    seg[:, seq // 2 :] = 1
    mask = np.ones((batch, seq), "int32")
    if pad_from is not None:
        for i, start in enumerate(pad_from):
            mask[i, start:] = 0
            ids[i, start:] = 0
            seg[i, start:] = 0
    return {"token_ids": ids, "segment_ids": seg, "padding_mask": mask}
