"""Every task predicts what it predicted before issue 56's restructuring, on one fixed tiny model.

`golden_predictions.json` holds the predictions of `prediction_goldens.predictions()` run on the
commit before the restructuring (2c70e63); the weights come from the checkpoints' names, so no
change of construction order or layer names can change the model. Floats agree to float32
rounding (a computation may run in another order), texts and ids exactly.
"""

import json
import os

import numpy as np

from tests.models import prediction_goldens

GOLDEN = os.path.join(os.path.dirname(__file__), "golden_predictions.json")


def assert_same(got, want, where):
    if isinstance(want, dict):
        assert sorted(got) == sorted(want), where
        for key in want:
            assert_same(got[key], want[key], f"{where}.{key}")
    elif np.asarray(want).dtype.kind == "U":  # answer texts, tag names
        assert got == want, where
    else:
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=1e-5, rtol=1e-5, err_msg=where)


def test_every_task_predicts_what_it_did_before_the_restructuring():
    with open(GOLDEN, encoding="utf-8") as f:
        golden = json.load(f)
    got = prediction_goldens.predictions()
    assert sorted(got) == sorted(golden)
    for case in golden:
        assert_same(got[case], golden[case], case)
