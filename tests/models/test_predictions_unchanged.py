"""Every task predicts what it predicted before issue 56's restructuring, on one fixed tiny model.

`golden_predictions.json` holds the predictions of `prediction_goldens.predictions()` run on the
commit before the restructuring (2c70e63); the weights come from the checkpoints' names, so no
change of construction order or layer names can change the model. Floats agree to float32
rounding (a computation may run in another order), texts and ids exactly.
"""

import json
import os

import numpy as np
import pytest

import keras_bert_zoo as kbz
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


def golden():
    with open(GOLDEN, encoding="utf-8") as f:
        return json.load(f)


@pytest.mark.early(45)
def test_every_task_predicts_what_it_did_before_the_restructuring():
    """Each task's encoder as the task chooses it on this machine (on a CPU: the padding skipped as far
    as the task allows)."""
    want = golden()
    got = prediction_goldens.predictions()
    assert sorted(got) == sorted(want)
    for case in want:
        assert_same(got[case], want[case], case)


@pytest.mark.heavy  # `make test-heavy`: every task again; the padded path's parity tests run in make test
def test_the_padded_path_predicts_the_same_at_every_real_position():
    """Every encoder on its padded path (skip_padding="never", any device): the same answers; the
    logits differ only at padded positions where the task skipped them at inference before (the
    head's output on zeros there)."""
    want = golden()
    got = prediction_goldens.predictions(lambda task_class, args: {"skip_padding": "never"})
    tokenizer = prediction_goldens.tokenizer()
    span = kbz.SpanExtractorPreprocessor(tokenizer, sequence_length=24, doc_stride=8, max_query_length=8,
                                         rules="hf_pipeline").windows(*prediction_goldens.QUESTIONS)
    tags = kbz.TokenClassifierPreprocessor(tokenizer, sequence_length=16).windows(prediction_goldens.SENTENCES)
    masks = {"span_hf_pipeline_logits": span["padding_mask"], "token_logits": tags["padding_mask"],
             "feature_extractor_logits": tags["padding_mask"]}
    for case in want:
        if case not in masks:
            assert_same(got[case], want[case], case)
            continue
        real = np.asarray(masks[case], bool)
        pairs = zip(got[case], want[case]) if case.startswith("span") else [(got[case], want[case])]  # start, end
        for got_logits, want_logits in pairs:
            np.testing.assert_allclose(np.asarray(got_logits)[real], np.asarray(want_logits)[real], atol=1e-5,
                                       err_msg=case)
