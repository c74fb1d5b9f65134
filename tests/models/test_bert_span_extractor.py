"""BertSpanExtractor: SQuAD heads from Google/HF checkpoints, the span loss, raw predict, the null threshold."""

import os
import shutil
import warnings

import keras
import numpy as np
import pytest
import safetensors.numpy

from keras_bert_zoo.data.squad import SquadData
from keras_bert_zoo.metrics.squad import best_threshold, raw_scores, squad_v1_metrics, squad_v2_metrics
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.text.span_decoder import SpanDecoder
from tests.task_contract import assert_task_contract
from tests.weights import weights_testlib as lib

RNG = np.random.default_rng(0)
QA_W = RNG.normal(size=(2, 16)).astype("float32")
QA_B = RNG.normal(size=(2,)).astype("float32")


def _preset(tmp_path, google=False):
    """The tiny HF fixture (vocab w0..w58, hidden 16, 32 positions) with a SQuAD head."""
    if google:
        tensors = lib.google_from_hf(lib.hf_tensors("gelu"), 2)
        tensors.update({"cls/squad/output_weights": QA_W, "cls/squad/output_bias": QA_B})
        path = lib.write_tf1_checkpoint(tensors, str(tmp_path / "google"))
        shutil.copy(os.path.join(lib.make_google_dir("gelu", str(tmp_path / "g0")), "bert_config.json"), path)
        shutil.copy(os.path.join(lib.fixture_dir("gelu"), "vocab.txt"), path)
        return path
    path = tmp_path / "hf"
    shutil.copytree(lib.fixture_dir("gelu"), path)
    tensors = dict(lib.hf_tensors("gelu"), **{"qa_outputs.weight": QA_W, "qa_outputs.bias": QA_B})
    safetensors.numpy.save_file(tensors, str(path / "model.safetensors"))
    return str(path)


def _data():
    """Questions on contexts longer than one 32-token window; answers as character spans."""
    contexts = [" ".join(f"w{(i * 7 + j) % 50}" for j in range(n)) for i, n in enumerate((12, 40, 25, 60))]
    questions = ["w1 w2 ?", "w3 w4 w5", "w9", "w7 w8"]
    spans = []
    for i, context in enumerate(contexts):
        words = context.split()
        k = (len(words) * 2) // 3
        start = len(" ".join(words[:k])) + 1
        spans.append((start, start + len(words[k]) + 1 + len(words[k + 1])))
    spans[2] = (-1, -1)  # unanswerable
    return questions, contexts, np.array(spans, "int32")


@pytest.mark.parametrize("google", [False, True], ids=["hf", "google"])
def test_squad_head_loads_from_checkpoints(tmp_path, google):
    task = BertSpanExtractor.from_preset(_preset(tmp_path, google), sequence_length=32, dropout=0.0)
    np.testing.assert_array_equal(task.span_dense.kernel.numpy(), QA_W.T)
    np.testing.assert_array_equal(task.span_dense.bias.numpy(), QA_B)
    assert (task.preprocessor.sequence_length, task.preprocessor.max_query_length) == (32, 16)
    x = task.preprocessor(_data()[:2])
    sequence = task.backbone(x)["sequence_output"].numpy()
    start, end = task(x)
    np.testing.assert_allclose(start, sequence @ QA_W[0] + QA_B[0], atol=1e-5)
    np.testing.assert_allclose(end, sequence @ QA_W[1] + QA_B[1], atol=1e-5)


def test_loss_is_the_mean_of_start_and_end_cross_entropies(tmp_path):
    task = BertSpanExtractor.from_preset(_preset(tmp_path), sequence_length=32, doc_stride=8, max_query_length=6,
                                         dropout=0.0)
    task.compile()
    questions, contexts, spans = _data()
    x, (starts, ends) = task.preprocessor((questions, contexts), spans)
    assert len(starts) > len(questions)  # several windows per long context
    start_logits, end_logits = (np.asarray(t, "float64") for t in task(x))

    def cross_entropy(logits, labels):
        log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        return -log_probs[np.arange(len(labels)), labels].mean()

    expected = (cross_entropy(start_logits, starts.numpy()) + cross_entropy(end_logits, ends.numpy())) / 2
    result = task.evaluate(x, (starts, ends), batch_size=len(starts), verbose=0, return_dict=True)
    np.testing.assert_allclose(result["loss"], expected, rtol=1e-5)


@keras.saving.register_keras_serializable(package="keras_bert_zoo_tests")
class WindowLogits(BertSpanExtractor):
    """`predict` on raw text gives the windows' logits, which the task contract compares
    with `predict` on ids (BertSpanExtractor's own raw `predict` answers per question,
    tested against the decoded logits below)."""

    def predict(self, x, **kwargs):
        if self.preprocessor is not None and isinstance(x, tuple):
            x = self.preprocessor(x)
        return super().predict(x, **kwargs)


def test_task_contract(tmp_path):
    # Defaults that a preset reload rebuilds (doc_stride 128, max_query_length 32 // 2).
    task = WindowLogits.from_preset(_preset(tmp_path), sequence_length=32, dropout=0.0)
    questions, contexts, spans = _data()
    assert_task_contract(task, (questions, contexts), spans, tmp_path)


def test_predict_answers_then_tune_null_threshold_and_save_it(tmp_path):
    task = BertSpanExtractor.from_preset(_preset(tmp_path), sequence_length=32, doc_stride=8, max_query_length=6,
                                         n_best_size=5, max_answer_length=4, dropout=0.0)
    questions, contexts, spans = _data()
    answers = task.predict((questions, contexts), batch_size=3)
    # The same answers by hand: windows -> logits -> SpanDecoder.
    windows = task.preprocessor.windows(questions, contexts)
    start, end = task.predict({k: windows[k] for k in ("token_ids", "segment_ids", "padding_mask")}, verbose=0)
    expected = SpanDecoder(5, 4)(start, end, windows, contexts)
    assert answers["answer_text"].tolist() == [t.decode() for t in expected["answer_text"].numpy()]
    np.testing.assert_allclose(answers["score"], expected["score"], rtol=1e-5)
    for text, begin, finish, context in zip(answers["answer_text"], answers["answer_start"], answers["answer_end"],
                                            contexts):
        assert text == context[begin:finish] and len(text.split()) <= 4
    assert task.predict(list(zip(questions, contexts)))["answer_text"].tolist() == answers["answer_text"].tolist()
    answers = [[c[s:e]] if s >= 0 else [] for c, (s, e) in zip(contexts, spans)]
    dev = SquadData([f"q{i}" for i in range(4)], questions, contexts, answers, [[s] if s >= 0 else [] for s, _ in spans])
    result = task.tune_null_threshold(dev)
    # The same by the official rule, from the best non-null answers and score differences.
    plain = task.predict(dev.x)
    predictions = dict(zip(dev.ids, plain["answer_text"]))
    _, f1 = raw_scores(predictions, dev.gold_answers())
    na = dict(zip(dev.ids, plain["score_diff"].astype(float)))
    best_f1, threshold = best_threshold(predictions, f1, na, {q: bool(a) for q, a in dev.gold_answers().items()})
    assert result == {"best_f1": best_f1, "best_f1_thresh": threshold}
    assert task.get_config()["null_score_diff_threshold"] == threshold
    # Above the threshold the answer is empty; the saved preset keeps the threshold.
    tuned = task.predict(dev.x)
    assert [t == "" for t in tuned["answer_text"]] == [d > threshold for d in plain["score_diff"]]
    # The official evaluation of these answers.
    metrics, official = task.squad_metrics(dev, "v2.0")
    assert official == dict(zip(dev.ids, tuned["answer_text"]))
    assert metrics == squad_v2_metrics(official, dev.gold_answers(), dict(zip(dev.ids, tuned["score_diff"].astype(float))),
                                       na_prob_thresh=threshold)
    # One prediction pass without the threshold gives the same, the threshold applied after.
    assert task.squad_metrics(dev, "v2.0", answers=task.predict_best_spans(dev.x)) == (metrics, official)
    answerable = {qid: golds for qid, golds in dev.gold_answers().items() if golds}
    keep = [i for i, golds in enumerate(dev.answers) if golds]
    v1 = SquadData(*([field[i] for i in keep] for field in
                     (dev.ids, dev.questions, dev.contexts, dev.answers, dev.answer_starts)))
    assert task.squad_metrics(v1)[0] == squad_v1_metrics(official, answerable)
    task.save_to_preset(str(tmp_path / "tuned"))
    keras.utils.clear_session()
    restored = BertSpanExtractor.from_preset(str(tmp_path / "tuned"))  # the saved windows and decoding
    assert restored.null_score_diff_threshold == threshold
    assert (restored.preprocessor.doc_stride, restored.preprocessor.max_query_length) == (8, 6)
    assert (restored.n_best_size, restored.max_answer_length) == (5, 4)
    assert restored.predict(dev.x)["answer_text"].tolist() == tuned["answer_text"].tolist()


def test_arguments_are_checked(tmp_path):
    backbone = BertSpanExtractor.from_preset(_preset(tmp_path), sequence_length=32, load_weights=False).backbone
    with pytest.raises(ValueError, match="max_answer_length"):
        BertSpanExtractor(backbone, max_answer_length=0)
    with pytest.raises(ValueError, match="null_score_diff_threshold"):
        BertSpanExtractor(backbone, null_score_diff_threshold="auto")


def test_predict_traces_its_forward_pass_once(tmp_path):
    """Batches of other window counts and widths reuse one graph; answers do not depend on the batching."""
    task = BertSpanExtractor.from_preset(_preset(tmp_path), sequence_length=32, doc_stride=8, max_query_length=6,
                                         dropout=0.0)
    questions, contexts, _ = _data()
    answers = [task.predict((questions, contexts), batch_size=size) for size in (1, 3, 4)]
    assert task._window_forward.experimental_get_tracing_count() == 1
    for other in answers[1:]:
        assert other["answer_text"].tolist() == answers[0]["answer_text"].tolist()
        np.testing.assert_allclose(other["score"], answers[0]["score"], rtol=1e-5)


def test_original_rules_keep_every_position_and_xla_refuses_a_skipping_encoder(tmp_path):
    """The original's n-best reads every position's logits, padding included: its encoder computes
    them on every device (skip_padding="never"); under HF's rules `from_preset` on a CPU skips the
    padding at inference, and such an encoder refuses jit_compile=True (XLA takes no dynamic token
    count) where "auto" compiles without XLA."""
    preset = _preset(tmp_path)
    task = BertSpanExtractor.from_preset(preset, sequence_length=32, doc_stride=8, max_query_length=6, dropout=0.0)
    assert task.backbone.skip_padding == "never"
    task.compile(jit_compile=True)
    hf = BertSpanExtractor.from_preset(preset, sequence_length=32, doc_stride=8, max_query_length=6, dropout=0.0,
                                       rules="hf_pipeline")
    assert hf.backbone.skip_padding == "inference" and hf.jit_compile is False
    with pytest.raises(ValueError, match="skip_padding='never'"):  # the original rules read padded positions
        BertSpanExtractor(hf.backbone)
    with pytest.raises(ValueError, match="jit_compile=True"):
        hf.compile(jit_compile=True)


def test_hf_pipeline_rules_reach_windows_decoding_presets_and_export(tmp_path):
    """`rules="hf_pipeline"` from `from_preset` sets the preprocessor's windows and the
    decoder; predict, the serving graph and a saved preset answer by those rules."""
    import importlib

    import tensorflow as tf

    export_lib = importlib.import_module("keras_bert_zoo.serving.export")  # the module, not the function

    preset = _preset(tmp_path)
    task = BertSpanExtractor.from_preset(preset, sequence_length=32, doc_stride=8, max_query_length=6,
                                         max_answer_length=4, rules="hf_pipeline", dropout=0.0)
    assert (task.rules, task.preprocessor.rules) == ("hf_pipeline", "hf_pipeline")
    questions, contexts, _ = _data()
    answers = task.predict((questions, contexts), batch_size=3)
    windows = task.preprocessor.windows(questions, contexts)
    start, end = task.predict({k: windows[k] for k in ("token_ids", "segment_ids", "padding_mask")}, verbose=0)
    expected = SpanDecoder(max_answer_length=4, rules="hf_pipeline")(start, end, windows, contexts)
    assert answers["answer_text"].tolist() == [t.decode() for t in expected["answer_text"].numpy()]
    assert 0 < answers["score"].min() and answers["score"].max() <= 2.0  # summed probabilities
    # Inference skips the padding (HF's decoding never reads it): the same answers as without.
    assert task.backbone.skip_padding == "inference"
    padded_task = BertSpanExtractor.from_preset(preset, sequence_length=32, doc_stride=8, max_query_length=6,
                                                max_answer_length=4, rules="hf_pipeline", dropout=0.0,
                                                skip_padding="never")
    padded = padded_task.predict((questions, contexts), batch_size=4)
    assert padded["answer_text"].tolist() == answers["answer_text"].tolist()
    np.testing.assert_allclose(padded["score"], answers["score"], rtol=1e-4)
    assert padded_task._window_forward.experimental_get_tracing_count() == 1
    original = BertSpanExtractor.from_preset(preset, sequence_length=32, doc_stride=8,
                                             max_query_length=6, max_answer_length=4, dropout=0.0)
    assert len(original.preprocessor.windows(questions, contexts)["example_index"]) > len(windows["example_index"])
    spec = export_lib.export_tasks.serving_spec(task)
    serve = export_lib.serving_functions(task, spec, ("text",))["serving_default"][0]
    served = serve(question=tf.constant(questions), context=tf.constant(contexts))
    assert [t.decode() for t in served["answer_text"].numpy()] == answers["answer_text"].tolist()
    task.save_to_preset(str(tmp_path / "hf_rules"))
    restored = BertSpanExtractor.from_preset(str(tmp_path / "hf_rules"))
    assert (restored.rules, restored.preprocessor.rules, restored.preprocessor.doc_stride) == ("hf_pipeline",) * 2 + (8,)
    assert restored.predict((questions, contexts))["answer_text"].tolist() == answers["answer_text"].tolist()
    assert BertSpanExtractor.from_preset(str(tmp_path / "hf_rules"), rules="original").preprocessor.rules == "original"
    with pytest.raises(ValueError, match="same `rules`"):
        BertSpanExtractor(task.backbone, preprocessor=task.preprocessor)


def test_fit_trains_no_pooler_and_checkpoints_keep_it(tmp_path, caplog, capfd):
    """No output reads the pooler: it is not trained, so Keras has no "Gradients do not exist"
    warning to give; the HF checkpoint's pooler loads, and the preset round trip keeps it."""
    task = BertSpanExtractor.from_preset(_preset(tmp_path), sequence_length=32, dropout=0.0)
    hf = lib.hf_tensors("gelu")
    np.testing.assert_array_equal(task.backbone.pooled_dense.kernel.numpy(), hf["bert.pooler.dense.weight"].T)
    task.compile()
    questions, contexts, spans = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task.fit((questions, contexts), spans, epochs=1, batch_size=4, verbose=0)
    out, err = capfd.readouterr()
    said = "\n".join(str(w.message) for w in caught) + caplog.text + out + err
    assert "Gradients do not exist" not in said, said[-2000:]
    assert not task.backbone.pooled_dense.trainable
    np.testing.assert_array_equal(task.backbone.pooled_dense.kernel.numpy(), hf["bert.pooler.dense.weight"].T)
    task.save_to_preset(str(tmp_path / "preset"))
    again = BertSpanExtractor.from_preset(str(tmp_path / "preset"))
    np.testing.assert_array_equal(again.backbone.pooled_dense.bias.numpy(), hf["bert.pooler.dense.bias"])
