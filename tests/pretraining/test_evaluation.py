"""Held-out evaluation: exact accuracies and baselines, interval losses, time budget, plot."""

import functools

import numpy as np
import pytest

from keras_bert_zoo.pretraining import evaluation as pe
from keras_bert_zoo.training import held_out
from keras_bert_zoo.utils.plotting import plot_pretraining_curves


def _batch(mlm_ids, weights, nsp):
    x = {"token_ids": np.zeros((len(nsp), 4), "int32")}
    y = {"mlm_ids": np.asarray(mlm_ids, "int32"), "mlm_weights": np.asarray(weights, "float32"),
         "nsp_labels": np.asarray(nsp, "int32")}
    return x, y


class FakeModel:
    """Predicts token 7 everywhere but 3 at (row 0, pred 1); NSP always class 1."""

    stop_training = False

    class optimizer:
        class iterations:
            @staticmethod
            def numpy():
                return 10

    def predict_on_batch(self, x):
        b = len(x["token_ids"])
        mlm = np.zeros((b, 3, 9), "float32")
        mlm[..., 7] = 1.0
        mlm[0, 1, 7], mlm[0, 1, 3] = 0.0, 1.0
        nsp = np.tile(np.asarray([[0.0, 1.0]], "float32"), (b, 1))
        return {"mlm_logits": mlm, "nsp_logits": nsp}


BATCHES = [
    _batch([[7, 3, 0], [7, 5, 0]], [[1, 1, 0], [1, 1, 0]], [1, 0]),
    _batch([[2, 7, 7], [7, 0, 0]], [[1, 1, 1], [1, 0, 0]], [1, 1]),
]


def test_accuracies_and_baselines_are_exact():
    # Real predictions: 4 + 4 = 8. Row 0 predicts (7, 3, 7), row 1 (7, 7, 7): batch 1 gets
    # 7✓ 3✓ | 7✓ 5✗, batch 2 gets 2✗ 7✗ 7✓ | 7✓ → 5 right. NSP predicts 1: 3 of 4 right.
    result = pe.evaluate_pretraining(FakeModel(), BATCHES, unigram_id=7)
    assert result["predictions"] == 8
    assert result["mlm_accuracy"] == pytest.approx(5 / 8)
    assert result["unigram_accuracy"] == pytest.approx(5 / 8)
    assert result["nsp_accuracy"] == pytest.approx(3 / 4)
    assert result["nsp_majority_accuracy"] == pytest.approx(3 / 4)


def test_unigram_counts_ignore_padding():
    counts = pe.unigram_counts(BATCHES)
    assert counts == {7: 5, 3: 1, 5: 1, 2: 1}


def _logged(log_dir):
    import tensorflow as tf

    values = {}
    for path in log_dir.iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for v in event.summary.value:
                number = float(tf.make_ndarray(v.tensor))
                values.setdefault(v.tag, []).append((event.step, number))
                assert v.metadata.plugin_data.plugin_name == "scalars"
    return values


def test_callback_interval_losses_steps_and_budget(tmp_path):
    evaluate = functools.partial(pe.evaluate_pretraining, batches=BATCHES)
    callback = held_out.HeldOutEvaluation(evaluate, every_n_steps=2, log_dir=str(tmp_path / "tb"),
                                    baselines={"unigram_accuracy": 0.25})
    callback.set_model(FakeModel())
    callback.on_train_begin()
    losses = [4.0, 2.0, 3.0, 1.0, 5.0]
    for i in range(len(losses)):  # Keras reports the running mean of the epoch
        callback.on_train_batch_end(i, {"loss": float(np.mean(losses[: i + 1]))})
    callback.on_train_end()
    assert [r["step"] for r in callback.history] == [12, 14, 15]
    np.testing.assert_allclose([r["loss"] for r in callback.history], [3.0, 2.0, 5.0])
    assert all(r["mlm_accuracy"] == pytest.approx(5 / 8) for r in callback.history)
    # One TensorBoard tag prefix, `held_out/`: each evaluation and the baselines beside it.
    logged = _logged(tmp_path / "tb")
    assert logged["held_out/mlm_accuracy"] == [(12, 0.625), (14, 0.625), (15, 0.625)]
    assert logged["held_out/unigram_accuracy"] == [(12, 0.25), (14, 0.25), (15, 0.25)]

    budget = held_out.HeldOutEvaluation(evaluate, every_n_steps=100, time_budget=0.0, step=0)
    model = FakeModel()
    budget.set_model(model)
    budget.on_train_begin()
    budget.on_train_batch_end(0, {"loss": 1.0})
    assert model.stop_training and [r["step"] for r in budget.history] == [1]
    assert budget.stopped_by_budget


def test_argument_checks():
    with pytest.raises(ValueError, match="every_n_steps"):
        held_out.HeldOutEvaluation(functools.partial(pe.evaluate_pretraining, batches=BATCHES), every_n_steps=0)
    with pytest.raises(ValueError, match="num_batches"):
        pe.collect_batches(None, 0)


def test_plot_writes_png(tmp_path):
    history = [{"step": s, "loss": 5.0 / s, "mlm_accuracy": 0.1 * s, "nsp_accuracy": 0.5}
               for s in (1, 2, 3)]
    path = plot_pretraining_curves(history, str(tmp_path / "c.png"),
                                   baselines={"unigram_accuracy": 0.05, "nsp_majority_accuracy": 0.5})
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["c.png"]
    with pytest.raises(ValueError, match="history"):
        plot_pretraining_curves([], str(tmp_path / "d.png"))
