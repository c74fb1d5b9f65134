"""BertClassifier: the task contract on sentences and pairs, the head's numbers, the default
recipe, padding to the longest row, truncation counts, and Google/HF fine-tuned heads."""

import logging
import os
import shutil

import keras
import numpy as np
import pytest
import safetensors.numpy

from keras_bert_zoo.models import task_inputs
from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.training.finetuning_optimizer import FinetuningAdamW
from tests.task_contract import assert_mirrored_equals_one_device, assert_task_contract
from tests.helpers import without_dropout
from tests.weights import weights_testlib as lib

FIXTURE = lib.fixture_dir("gelu")  # HF layout: vocab w0..w58, hidden 16, 2 layers, 32 positions
SENTENCES = ["w1 w2 w3", "w4 w5", "w6 w7 w8 w9 w10 w11", "w12", "w13 w14 w15 w16", "w17 w18 w19 w20 w21 w22 w23 w24"]
SECONDS = ["w30 w31", "w32", "w33 w34 w35", "w36 w37 w38 w39", "w40", "w41 w42"]


def tiny_classifier(num_classes=2, **kwargs):
    keras.utils.set_random_seed(0)
    return BertClassifier.from_preset(FIXTURE, num_classes=num_classes, dropout=0.0, sequence_length=16, **kwargs)


def test_contract_single_sentences_with_labels(tmp_path):
    task = tiny_classifier(labels=["neg", "pos"])
    assert_task_contract(task, SENTENCES, np.array([0, 1, 0, 1, 1, 0]), tmp_path)
    assert BertClassifier.from_preset(str(tmp_path / "preset")).labels == ["neg", "pos"]


def test_pairs_regression_scores_and_learns():
    # The rest of the contract is the same code path as above; kept to one full run for time.
    task = tiny_classifier(num_classes=1)
    x, y = (SENTENCES, SECONDS), np.array([0.5, 4.0, 2.0, 1.0, 3.5, 5.0], "float32")
    scores = task.predict(x, verbose=0)
    np.testing.assert_allclose(scores, task.predict(task.preprocessor(x), verbose=0), atol=1e-5)
    np.testing.assert_allclose(task.postprocess(scores)["score"], scores[:, 0])
    task.compile(learning_rate=1e-3)
    assert isinstance(task.loss, keras.losses.MeanSquaredError)
    before = task.evaluate(x, y, return_dict=True, verbose=0)["loss"]
    assert before == pytest.approx(float(np.mean((scores[:, 0] - y) ** 2)), rel=1e-5)
    task.fit(x, y, batch_size=6, shuffle=False, verbose=0)
    assert task.evaluate(x, y, return_dict=True, verbose=0)["loss"] < before


@pytest.mark.slow
def test_mirrored_two_logical_cpus_equals_one_device(tmp_path):
    result = assert_mirrored_equals_one_device(
        "tests.models.test_bert_classifier:tiny_classifier", SENTENCES[:4], np.array([0, 1, 1, 0]), tmp_path
    )
    assert result["moved"] > 1e-5


def test_head_is_dense_on_pooled_cls_and_pairs_use_segment_one():
    task = tiny_classifier(num_classes=3, labels=["a", "b", "c"])
    x = task.preprocessor((SENTENCES[:2], SECONDS[:2]))
    assert x["segment_ids"].numpy()[0].tolist()[:9] == [0, 0, 0, 0, 0, 1, 1, 1, 0]  # [CLS] w1 w2 w3 [SEP] w30 w31 [SEP]
    pooled = task.backbone(x)["pooled_output"].numpy()
    kernel, bias = (np.asarray(v) for v in task.head_variables().values())
    logits = task.predict((SENTENCES[:2], SECONDS[:2]), verbose=0)
    np.testing.assert_allclose(logits, pooled @ kernel + bias, atol=1e-5)
    out = task.postprocess(logits)
    assert out["label"].tolist() == [["a", "b", "c"][i] for i in np.argmax(logits, -1)]
    # A fresh head is initialised as the original: truncated normal, stddev 0.02.
    assert 0.01 < kernel.std() < 0.03 and np.abs(kernel).max() <= 0.04 and not bias.any()


def test_default_compile_is_the_papers_recipe_over_the_steps_fit_runs():
    task = tiny_classifier()
    task.compile()
    optimizer = task.optimizer
    assert isinstance(optimizer, FinetuningAdamW) and optimizer.weight_decay_rate == 0.01
    assert optimizer.clip_global_norm == 1.0 and set(optimizer.exclude_from_decay) >= {"LayerNorm", "bias"}
    assert isinstance(task.loss, keras.losses.SparseCategoricalCrossentropy) and task.loss.from_logits
    x, y = SENTENCES * 4, np.arange(24) % 2  # 24 rows, batch 5: 5 steps per epoch
    task.fit(x, y, batch_size=5, epochs=4, verbose=0)
    schedule = optimizer._learning_rate
    assert (schedule.total_steps, schedule.warmup_steps, schedule.start_step) == (20, 2, 0)
    assert schedule.peak_learning_rate == 5e-5 and int(optimizer.iterations) == 20
    assert float(schedule(1)) == pytest.approx(2.5e-5) and float(schedule(20)) == 0.0
    # A second fit is a run of its own: warm-up and decay over its 5 steps, from step 20.
    task.fit(x, y, batch_size=5, epochs=1, verbose=0)
    schedule = optimizer._learning_rate
    assert (schedule.total_steps, schedule.warmup_steps, schedule.start_step) == (5, 0, 20)
    assert float(schedule(25)) == 0.0 and int(optimizer.iterations) == 25
    # Each default is overridden alone.
    task.compile(optimizer=keras.optimizers.SGD(0.1))
    assert isinstance(task.loss, keras.losses.SparseCategoricalCrossentropy) and task._run_schedule is None
    task.compile(loss=keras.losses.CategoricalHinge(), learning_rate=3e-5, warmup_ratio=0.2)
    assert isinstance(task.optimizer, FinetuningAdamW) and task._run_schedule == (3e-5, 0.2)
    with pytest.raises(ValueError, match="warmup_ratio=1.5"):
        task.compile(warmup_ratio=1.5)


def test_validation_data_and_validation_split_on_raw_text():
    task = tiny_classifier()
    task.compile(optimizer=keras.optimizers.SGD(0.0))  # weights fixed: val_loss is evaluate's
    y = np.array([0, 1, 0, 1, 1, 0])
    history = task.fit(SENTENCES, y, batch_size=2, validation_data=(SENTENCES[4:], y[4:]), verbose=0).history
    held_out = task.evaluate(SENTENCES[4:], y[4:], return_dict=True, verbose=0)["loss"]
    assert history["val_loss"][0] == pytest.approx(held_out, abs=1e-6)
    history = task.fit(SENTENCES, y, batch_size=2, validation_split=1 / 3, verbose=0).history
    assert history["val_loss"][0] == pytest.approx(held_out, abs=1e-6)  # the last third: rows 4 and 5


def test_batches_padded_to_their_longest_row_and_predict_keeps_input_order():
    task = tiny_classifier()
    x = [SENTENCES[i % 6] for i in (5, 0, 3, 2, 1, 4, 5, 3)]
    dataset, order = task._prepare(x, batch_size=4, sort=True)
    widths = [batch["token_ids"].shape[1] for batch in dataset]
    assert widths == [8, 16]  # longest rows 6 and 10 tokens (with [CLS], [SEP]), cut to multiples of 8
    assert [len(x[i]) for i in order] == sorted(len(s) for s in x)
    together = task.predict(x, batch_size=4, verbose=0)
    alone = np.concatenate([task.predict([s], verbose=0) for s in x])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_predict_traces_one_function_for_every_batch_shape():
    # Batches of 4 rows 8 wide, 2 rows 16 wide, then 3 rows: one trace with relaxed shapes
    # (`trace_any_shape`), where `predict_on_batch` alone traced the first shape, then again.
    task = tiny_classifier()
    first = task.predict(SENTENCES, batch_size=4, verbose=0)
    np.testing.assert_allclose(task.predict(SENTENCES[:3], batch_size=3, verbose=0), first[:3], atol=1e-5)
    assert task.predict_function.experimental_get_tracing_count() == 1


def test_text_pipelines_run_without_the_autotuner():
    # TensorFlow 2.21: tearing down an iterator of an autotuned pipeline inside Keras' `fit`
    # waited for the autotuner's thread to wake (6-9 s after a 20 s epoch).
    task = tiny_classifier()
    for shuffle in (False, True):
        dataset, _ = task._prepare(SENTENCES, np.zeros(6), batch_size=2, shuffle=shuffle)
        assert dataset.options().autotune.enabled is False


def test_fit_predict_and_evaluate_skip_padding_with_the_same_numbers(monkeypatch):
    # On a CPU `from_preset` builds a classifier whose encoder layers run their dense layers on
    # the real tokens only, in `fit` too (skip_padding="always"); padded rows of a batch must
    # not change the numbers: the same as a classifier built with skip_padding="never".
    from keras_bert_zoo.layers import real_tokens

    x = [SENTENCES[i % 6] for i in (5, 0, 3, 2, 1, 4, 5, 3)]
    labels = np.array([0, 1, 0, 1, 1, 0, 0, 1])
    calls, in_train_step = [], [False]
    packing = real_tokens.RealTokens
    monkeypatch.setattr(real_tokens, "RealTokens",
                        lambda *a: calls.append(in_train_step[0]) or packing(*a))

    def run(skip_padding):
        task = tiny_classifier(**({} if skip_padding is None else {"skip_padding": skip_padding}))
        without_dropout(task)  # the fixture's backbone has dropout: compare without draws
        train_step = task.train_step

        def traced_train_step(data):
            in_train_step[0] = True
            try:
                return train_step(data)
            finally:
                in_train_step[0] = False

        task.train_step = traced_train_step
        history = task.fit(x, labels, batch_size=4, epochs=2, verbose=0)
        loss = task.evaluate(x, labels, batch_size=8, verbose=0, return_dict=True)["loss"]
        return history.history["loss"], loss, task.predict(x, batch_size=8, verbose=0)

    assert tiny_classifier().backbone.skip_padding == "always"  # this CPU's default
    fast = run(None)
    assert set(calls) == {True, False}  # traced in fit and at inference
    calls.clear()
    padded = run("never")
    assert calls == []
    assert fast[0][1] < fast[0][0]  # it learns
    np.testing.assert_allclose(fast[0], padded[0], rtol=1e-4)
    assert fast[1] == pytest.approx(padded[1], abs=1e-4)
    np.testing.assert_allclose(fast[2], padded[2], atol=1e-4)


def test_truncation_is_longest_first_and_counted(caplog):
    task = tiny_classifier()
    long_a, long_b = " ".join(f"w{i}" for i in range(1, 15)), " ".join(f"w{i}" for i in range(20, 24))
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo.models"):
        task.predict(([long_a, "w1", "w2"], [long_b, "w3", "w4 " * 20]), verbose=0)
    assert "Truncated 2 of 3 input sequences to sequence_length=16 (longest_first)." in caplog.text
    ids = task.preprocessor(([long_a], [long_b]))["token_ids"].numpy()[0]
    # 13 tokens for the pair: the longer A is cut to 9, B keeps its 4.
    assert (ids[1:10].tolist(), ids[11:15].tolist()) == (list(range(6, 15)), list(range(25, 29)))


@pytest.mark.parametrize("google", [False, True], ids=["hf", "google"])
def test_fine_tuned_heads_load_from_google_and_hf_checkpoints(tmp_path, google):
    rng = np.random.default_rng(0)
    weights, bias = rng.normal(size=(3, 16)).astype("float32"), rng.normal(size=(3,)).astype("float32")
    if google:  # run_classifier.py's names
        tensors = dict(lib.google_from_hf(lib.hf_tensors("gelu"), 2), output_weights=weights, output_bias=bias)
        path = lib.write_tf1_checkpoint(tensors, str(tmp_path / "google"))
        for name in ("bert_config.json", "vocab.txt"):
            shutil.copy(os.path.join(lib.make_google_dir("gelu", str(tmp_path / "g0")), name), path)
    else:  # BertForSequenceClassification's names
        path = str(tmp_path / "hf")
        shutil.copytree(FIXTURE, path)
        tensors = dict(lib.hf_tensors("gelu"), **{"classifier.weight": weights, "classifier.bias": bias})
        safetensors.numpy.save_file(tensors, os.path.join(path, "model.safetensors"))
    task = BertClassifier.from_preset(path, dropout=0.0)
    assert task.num_classes == 3  # from the checkpoint's head
    np.testing.assert_array_equal(np.asarray(task.output_dense.kernel), weights.T)
    np.testing.assert_array_equal(np.asarray(task.output_dense.bias), bias)
    reference = BertClassifier.from_preset(FIXTURE, num_classes=3, dropout=0.0)
    pooled = reference.backbone(reference.preprocessor(SENTENCES))["pooled_output"].numpy()
    np.testing.assert_allclose(task.predict(SENTENCES, verbose=0), pooled @ weights.T + bias, atol=1e-4)


def test_a_head_of_another_task_is_left_fresh_with_a_warning(tmp_path, caplog):
    task = tiny_classifier(num_classes=3)
    task.save_to_preset(str(tmp_path / "three"))
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.weights"):
        two = BertClassifier.from_preset(str(tmp_path / "three"), num_classes=2)
    assert two.num_classes == 2 and "other shapes than this model's" in caplog.text


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_classes=0), "num_classes=0"),
        (dict(num_classes=2, labels=["a"]), "2 strings"),
        (dict(num_classes=1, labels=["a"]), "regression"),
        (dict(num_classes=2, dropout=1.0), "dropout=1.0"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    backbone = tiny_classifier().backbone
    with pytest.raises(ValueError, match=message):
        BertClassifier(backbone, **kwargs)


def test_from_preset_is_compiled_with_the_papers_recipe_and_fits_at_once():
    """keras-hub's habit: `fit` right after `from_preset` (it raised "Call `compile()` before `fit()`")."""
    task = tiny_classifier()
    assert task.compiled and isinstance(task.optimizer, FinetuningAdamW) and task._run_schedule == (5e-5, 0.1)
    task.fit(SENTENCES[:4], np.array([0, 1, 0, 1]), batch_size=2, epochs=2, verbose=0)
    schedule = task.optimizer._learning_rate  # the schedule still follows the steps `fit` ran
    assert (schedule.total_steps, schedule.warmup_steps, int(task.optimizer.iterations)) == (4, 0, 4)


def test_text_without_a_preprocessor_is_refused():
    task = tiny_classifier()
    task.preprocessor = None
    with pytest.raises(ValueError, match="preprocessor` is None"):
        task.predict(SENTENCES)
    assert task_inputs.is_packed({"token_ids": 1})


def test_pairs_as_a_dict_of_named_columns_equal_the_tuple():
    """Issue 12: pairs as tuples or dicts of columns; a dict takes GLUE's (tfds) column names."""
    task = tiny_classifier()
    pairs = (SENTENCES[:3], SECONDS[:3])
    expected = task.predict(pairs, verbose=0)
    for a, b in (("premise", "hypothesis"), ("sentence1", "sentence2"), ("text_a", "text_b")):
        got = task.predict({b: SECONDS[:3], a: SENTENCES[:3], "idx": [0, 1, 2]}, verbose=0)
        np.testing.assert_allclose(got, expected, atol=1e-6)
    single = task.predict({"sentence": SENTENCES[:3]}, verbose=0)
    np.testing.assert_allclose(single, task.predict(SENTENCES[:3], verbose=0), atol=1e-6)
    with pytest.raises(TypeError, match=r"columns of one of these layouts.*Received a dict with keys \['a', 'b'\]"):
        task.predict({"a": SENTENCES[:3], "b": SECONDS[:3]}, verbose=0)


def test_mean_pooling_head_reads_the_mean_of_the_real_tokens_and_round_trips(tmp_path):
    task = tiny_classifier(pooling="mean")
    ids = task.preprocessor(SENTENCES[:3])
    outputs = task.backbone(ids)
    mask = np.asarray(ids["padding_mask"], "float32")[:, :, None]
    mean = (np.asarray(outputs["sequence_output"]) * mask).sum(1) / mask.sum(1)
    dense = task.output_dense
    expected = mean @ np.asarray(dense.kernel) + np.asarray(dense.bias)
    np.testing.assert_allclose(task.predict(SENTENCES[:3], verbose=0), expected, atol=1e-5)
    assert not task.backbone.get_layer("pooled_dense").trainable  # unused, so frozen
    task.fit(SENTENCES, np.array([0, 1, 0, 1, 1, 0]), epochs=1, verbose=0)
    task.save_to_preset(str(tmp_path / "preset"))
    again = BertClassifier.from_preset(str(tmp_path / "preset"))
    assert again.pooling == "mean"
    np.testing.assert_allclose(again.predict(SENTENCES, verbose=0), task.predict(SENTENCES, verbose=0), atol=1e-5)


def _pretrained_preset(directory, nsp, sequence_length, nsp_accuracy=None):
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

    pretrainer = BertPretrainer(BertBackbone.from_preset(FIXTURE), nsp=nsp)
    vocabulary = os.path.join(FIXTURE, "vocab.txt")
    record = {"sequence_length": sequence_length, "steps": 10}
    if nsp_accuracy is not None:
        record["held_out"] = {"step": 10, "mlm_accuracy": 0.1, "nsp_accuracy": nsp_accuracy}
    return pretrainer.save_to_preset(str(directory), vocabulary=vocabulary, pretraining=record)


@pytest.mark.parametrize("nsp, nsp_accuracy, expected, said", [
    (False, None, "mean", "pretrained without next-sentence prediction"),
    (True, 0.55, "mean", "held-out next-sentence accuracy 0.550 (below 0.75)"),
    (True, 0.9, "pooled_output", None), (True, None, "pooled_output", None)])
def test_a_head_reads_the_tokens_unless_nsp_trained_the_pooler(tmp_path, caplog, nsp, nsp_accuracy, expected, said):
    preset = _pretrained_preset(tmp_path / "preset", nsp, sequence_length=12, nsp_accuracy=nsp_accuracy)
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo.models"):
        task = BertClassifier.from_preset(preset, num_classes=2)
    assert task.pooling == expected
    assert (said in caplog.text) if said else "pooling='mean'" not in caplog.text
    # The caller's choice wins, and a saved classifier keeps its own.
    assert BertClassifier.from_preset(preset, num_classes=2, pooling="pooled_output").pooling == "pooled_output"
    assert BertClassifier.from_preset(preset, num_classes=2, load_weights=False).pooling == expected


def test_the_trained_length_is_the_default_and_a_longer_one_is_named(tmp_path, caplog):
    preset = _pretrained_preset(tmp_path / "preset", nsp=True, sequence_length=12)
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo.models"):
        assert BertClassifier.from_preset(preset, num_classes=2).preprocessor.sequence_length == 12
    assert "the length the preset was pretrained at" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.models"):
        assert BertClassifier.from_preset(preset, num_classes=2, sequence_length=20).preprocessor.sequence_length == 20
    assert "position embeddings 12-19 were never trained" in caplog.text
