"""GLUE metrics against hand-computed values, and the dev-set callback."""

import math

import keras
import numpy as np
import pytest

from keras_bert_zoo.metrics.glue import format_metrics, glue_metrics
from keras_bert_zoo.metrics.glue_dev_metrics import GlueDevMetrics


def test_accuracy_and_positive_class_f1():
    # TP=2 (rows 0, 3), FP=1 (row 4), FN=1 (row 2), TN=1: P = R = 2/3, F1 = 2/3.
    y_true = [1, 0, 1, 1, 0]
    y_pred = [1, 0, 0, 1, 1]
    metrics = glue_metrics("mrpc", y_true, y_pred)
    assert metrics == {"accuracy": pytest.approx(3 / 5), "f1": pytest.approx(2 / 3)}
    # F1 is of class 1 only: swapping the classes changes it (TP=1, FP=1, FN=1 -> 1/2).
    assert glue_metrics("qqp", 1 - np.array(y_true), 1 - np.array(y_pred))["f1"] == pytest.approx(1 / 2)


def test_logits_are_argmaxed():
    logits = np.array([[0.1, 2.0], [3.0, -1.0], [0.0, 0.5]])
    assert glue_metrics("sst2", [1, 0, 0], logits) == {"accuracy": pytest.approx(2 / 3)}
    three = np.array([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert glue_metrics("mnli", [1, 0], three) == {"accuracy": 0.5}


def test_snli_is_scored_by_accuracy_over_three_classes_and_its_baseline_is_the_majority():
    from keras_bert_zoo.metrics.baselines import glue_baseline

    logits = np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 3.0, 0.0]])
    assert glue_metrics("snli", [2, 0, 2, 1], logits) == {"accuracy": 0.75}
    baseline = glue_baseline("snli", np.array([2, 0, 2, 1]), ["contradiction", "entailment", "neutral"])
    assert baseline["dev"] == {"accuracy": 0.5} and "'neutral' (2 of 4 rows)" in baseline["predicts"]


def test_matthews_correlation():
    # TP=2, TN=1, FP=1, FN=1: (2*1 - 1*1) / sqrt(3*3*2*2) = 1/6.
    metrics = glue_metrics("cola", [1, 0, 1, 1, 0], [1, 0, 0, 1, 1])
    assert metrics["matthews_corrcoef"] == pytest.approx(1 / 6)
    assert metrics["accuracy"] == pytest.approx(3 / 5)
    # A constant prediction has MCC 0 (scikit-learn's convention, as GLUE's).
    assert glue_metrics("cola", [1, 0, 1], [1, 1, 1])["matthews_corrcoef"] == 0.0


def test_pearson_and_spearman():
    # x = (1, 2, 3), y = (1, 3, 2): deviations (-1,0,1)·(-1,1,0) = 1, norms sqrt(2)·sqrt(2): r = 1/2.
    # Ranks are the values themselves, so Spearman is also 1/2.
    metrics = glue_metrics("stsb", np.array([1.0, 2.0, 3.0]), np.array([[1.0], [3.0], [2.0]]))
    assert metrics == {"pearson": pytest.approx(0.5), "spearman": pytest.approx(0.5)}
    # Spearman sees only the order: a monotone but non-linear prediction is 1 (Pearson is not).
    metrics = glue_metrics("stsb", [0.0, 1.0, 2.0, 5.0], [0.0, 1.0, 8.0, 9.0])
    assert metrics["spearman"] == pytest.approx(1.0) and metrics["pearson"] < 0.95
    assert math.isnan(glue_metrics("stsb", [0.0, 1.0], [2.0, 2.0])["pearson"])


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="task='glue'"):
        glue_metrics("glue", [1], [1])
    with pytest.raises(ValueError, match=r"y_true of shape \(2,\), y_pred of shape \(3,\)"):
        glue_metrics("sst2", [1, 0], [1, 0, 1])
    assert format_metrics({"accuracy": 0.5, "f1": 2 / 3}) == "accuracy=0.5000 f1=0.6667"


def test_callback_scores_the_whole_dev_set_each_epoch():
    # A linear model on one feature: sign of x decides the class; the callback sees its predictions.
    x = np.array([[-2.0], [-1.0], [1.0], [2.0]], "float32")
    y = np.array([0, 0, 1, 1])
    model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(2)])
    model.layers[0].set_weights([np.array([[-1.0, 1.0]], "float32"), np.zeros(2, "float32")])
    model.compile(optimizer=keras.optimizers.SGD(0.0), loss="sparse_categorical_crossentropy")
    lines = []
    callback = GlueDevMetrics("mrpc", x, np.array([0, 1, 1, 1]), batch_size=2, report=lines.append)
    history = model.fit(x, y, epochs=2, verbose=0, callbacks=[callback])
    # Predictions are [0, 0, 1, 1] against [0, 1, 1, 1]: accuracy 3/4, F1 = 2*2/(2*2+0+1) = 0.8.
    assert callback.history == [{"epoch": 1, "accuracy": 0.75, "f1": pytest.approx(0.8)},
                                {"epoch": 2, "accuracy": 0.75, "f1": pytest.approx(0.8)}]
    assert history.history["dev_f1"] == [pytest.approx(0.8)] * 2
    assert lines[0] == "epoch 1 dev: accuracy=0.7500 f1=0.8000"
    with pytest.raises(ValueError, match="needs labels"):
        GlueDevMetrics("sst2", x, None)
