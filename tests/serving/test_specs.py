"""`export` for the other tasks: the functions a SavedModel holds, run in process, equal `predict`
(saving, loading in a plain-TensorFlow process and atomicity are tests/serving/test_export.py's)."""

import importlib

import numpy as np
import tensorflow as tf

from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from tests.models.test_bert_multiple_choice import CONTEXTS, ENDINGS, tiny_multiple_choice
from tests.models.test_bert_span_extractor import _data as span_data
from tests.models.test_bert_span_extractor import _preset as span_preset
from tests.models.test_bert_token_classifier import _tagger

export_lib = importlib.import_module("keras_bert_zoo.serving.export")


def _functions(task, signatures=("text", "ids", "examples")):
    spec = export_lib.export_tasks.serving_spec(task)
    return {key: fn for key, (fn, _) in export_lib.serving_functions(task, spec, signatures).items()}


def test_multiple_choice_context_and_endings():
    task = tiny_multiple_choice()
    functions = _functions(task)  # ids: traced here, run below
    scores = task.predict((CONTEXTS, ENDINGS), verbose=0)
    expected = {k: np.asarray(v) for k, v in task.postprocess(scores).items()}
    served = functions["serving_default"](context=tf.constant(CONTEXTS), endings=tf.constant(ENDINGS))
    assert sorted(served) == ["choice", "input_truncated", "probabilities"]
    np.testing.assert_allclose(served["probabilities"].numpy(), expected["probabilities"], atol=1e-5, rtol=0)
    assert served["choice"].numpy().tolist() == expected["choice"].tolist()
    ids = task.preprocessor((CONTEXTS, ENDINGS))
    by_ids = functions["ids"](**{k: tf.constant(v) for k, v in ids.items()})
    np.testing.assert_allclose(by_ids["probabilities"].numpy(), expected["probabilities"], atol=1e-5, rtol=0)
    examples = [tf.train.Example(features=tf.train.Features(feature={
        "context": tf.train.Feature(bytes_list=tf.train.BytesList(value=[c.encode()])),
        "endings": tf.train.Feature(bytes_list=tf.train.BytesList(value=[e.encode() for e in endings]))}))
        .SerializeToString() for c, endings in zip(CONTEXTS, ENDINGS)]
    by_examples = functions["examples"](inputs=tf.constant(examples))
    np.testing.assert_allclose(by_examples["probabilities"].numpy(), expected["probabilities"], atol=1e-5, rtol=0)
    # Bad rows: an empty context and an invalid UTF-8 ending are answered; other rows unchanged.
    bad = functions["serving_default"](context=tf.constant([b"", CONTEXTS[1].encode()]),
                                       endings=tf.constant([[b"\xff", b"", b"w1"], [e.encode() for e in ENDINGS[1]]]))
    np.testing.assert_allclose(bad["probabilities"].numpy()[1], expected["probabilities"][1], atol=1e-5, rtol=0)
    assert np.isfinite(bad["probabilities"].numpy()).all()


def test_span_extractor_answers_in_the_graph_equal_predict(tmp_path):
    task = BertSpanExtractor.from_preset(span_preset(tmp_path), sequence_length=32, doc_stride=8, max_query_length=6,
                                         n_best_size=5, max_answer_length=4, dropout=0.0)
    task.null_score_diff_threshold = 0.5  # the stored v2.0 threshold is in the graph
    questions, contexts, _ = span_data()
    # Bad rows: an empty question, invalid UTF-8 in a context, a question longer than the window.
    questions = questions + ["", "w3", " ".join(["w5"] * 80)]
    raw = [q.encode() for q in questions], [c.encode() for c in contexts] + [
        contexts[0].encode(), b"w1 \xff w2 w3 w4", contexts[1].encode()]
    functions = _functions(task, ("text", "examples"))
    served = {k: v.numpy() for k, v in functions["serving_default"](
        question=tf.constant(raw[0]), context=tf.constant(raw[1])).items()}
    assert sorted(served) == ["answer_end", "answer_start", "answer_text", "has_answer", "input_truncated", "score"]
    cleaned = [c.decode("utf-8", "ignore") for c in raw[1]]
    expected = task.predict((questions, cleaned), batch_size=8)
    assert [t.decode() for t in served["answer_text"]] == expected["answer_text"].tolist()
    # The export answers under the names of `postprocess` (`models/answer_names.py`).
    assert served["answer_start"].tolist() == expected["answer_start"].tolist()
    assert served["answer_end"].tolist() == expected["answer_end"].tolist()
    assert served["has_answer"].tolist() == (expected["answer_start"] >= 0).tolist()
    assert 0 < served["has_answer"].sum() < len(questions)  # answers and no-answers both checked
    np.testing.assert_allclose(served["score"], expected["score"], atol=1e-5, rtol=0)
    for text, begin, end, context in zip(served["answer_text"], served["answer_start"], served["answer_end"], cleaned):
        assert text.decode() == (context[begin:end] if begin >= 0 else "")
    # The first four rows alone: the bad rows changed nothing.
    alone = functions["serving_default"](question=tf.constant(raw[0][:4]), context=tf.constant(raw[1][:4]))
    assert alone["answer_text"].numpy().tolist() == served["answer_text"][:4].tolist()
    examples = [tf.train.Example(features=tf.train.Features(feature={
        "question": tf.train.Feature(bytes_list=tf.train.BytesList(value=[q])),
        "context": tf.train.Feature(bytes_list=tf.train.BytesList(value=[c]))})).SerializeToString()
        for q, c in zip(*raw)]
    by_examples = functions["examples"](inputs=tf.constant(examples))
    assert by_examples["answer_text"].numpy().tolist() == served["answer_text"].tolist()


def test_token_classifier_entities_padded_with_a_count():
    tagger = _tagger(length=8, stride=3)
    functions = _functions(tagger, ("text", "ids"))
    texts = ["bob  visited paris .", "u.s. bob germans paris the cafe eu ann", "", "the cafe"]
    # Large random head weights tag the words with varied labels (two settings, many entities).
    checked = 0
    for seed in (0, 3):
        kernel = tagger.output_dense.kernel
        kernel.assign(np.random.default_rng(seed).normal(size=kernel.shape).astype("float32") * 5)
        expected = tagger.predict_entities(texts)
        served = {k: v.numpy() for k, v in functions["serving_default"](text=tf.constant(texts)).items()}
        assert served["num_entities"].tolist() == [len(e) for e in expected]
        width = served["entity_text"].shape[1]
        assert width == max([len(e) for e in expected] + [0])
        for i, entities in enumerate(expected):
            got = [{"type": served["entity_type"][i, j].decode(), "text": served["entity_text"][i, j].decode(),
                    "start": int(served["start_char"][i, j]), "end": int(served["end_char"][i, j])}
                   for j in range(served["num_entities"][i])]
            assert got == entities
            assert served["start_char"][i, len(entities):].tolist() == [-1] * (width - len(entities))
        checked += sum(len(e) for e in expected)
    assert checked > 5
    ids = tagger.preprocessor(texts[:2])
    by_ids = functions["ids"](**{k: tf.constant(v) for k, v in ids.items()})
    np.testing.assert_allclose(by_ids["probabilities"].numpy()[:, :8],
                               tagger.postprocess(tagger.predict(texts[:2], verbose=0))["probabilities"], atol=1e-5)


def test_pretrainer_fill_mask_equals_fill_mask():
    from keras_bert_zoo import BertBackbone, BertPreprocessor, BertPretrainer, BertTokenizer
    from keras_bert_zoo.pretraining import fill_mask as fm
    from tests.pretraining.test_fill_mask import VOCAB

    rng = np.random.default_rng(0)
    backbone = BertBackbone(len(VOCAB), 2, 2, 16, 32, max_sequence_length=16)
    tokenizer = BertTokenizer(VOCAB, lowercase=True)
    pretrainer = BertPretrainer(backbone, nsp=False, preprocessor=BertPreprocessor(tokenizer, sequence_length=16))
    head = pretrainer.mlm_head
    head.output_bias.assign(rng.normal(size=head.output_bias.shape).astype("float32"))
    functions = _functions(pretrainer, ("text",))
    texts = ["the cat [MASK] on the [MASK].", "a [MASK]", "no mask here", "[MASK] w1 w2 w3 w4 w5 w6 w7 w8 w9 w10 w11 w12 w13 w14 [MASK]"]
    served = {k: v.numpy() for k, v in functions["serving_default"](text=tf.constant(texts)).items()}
    assert served["num_masks"].tolist() == [2, 1, 0, 1]  # the second mask of the last row is cut
    for i, text in enumerate(texts):
        if "[MASK]" not in text:
            assert (served["tokens"][i] == b"").all()
            continue
        expected = fm.fill_mask(backbone, head, tokenizer, text, top_k=5, sequence_length=16)
        for m, candidates in enumerate(expected[: served["num_masks"][i]]):
            assert [t.decode() for t in served["tokens"][i, m]] == [t for t, _ in candidates]
            np.testing.assert_allclose(served["probabilities"][i, m], [p for _, p in candidates], atol=1e-5)


def test_feature_extractor_entities_equal_predict_entities():
    from tests.models.test_bert_feature_extractor import _extractor

    extractor = _extractor()
    tagger = extractor.output_dense
    tagger.kernel.assign(np.random.default_rng(1).normal(size=tagger.kernel.shape).astype("float32") * 5)
    texts = ["bob visited paris .", "u.s. bob germans paris the cafe eu ann", "the cafe"]
    expected = extractor.predict_entities(texts)
    serve = _functions(extractor, ("text",))["serving_default"]
    assert sum(map(len, expected)) > 2
    # All rows (padded to 16), then the short ones alone (cut to 8: the BiLSTM must mask the padding).
    for rows in ([0, 1, 2], [0, 2]):
        served = {k: v.numpy() for k, v in serve(text=tf.constant([texts[r] for r in rows])).items()}
        assert served["num_entities"].tolist() == [len(expected[r]) for r in rows]
        for i, r in enumerate(rows):
            assert [(served["entity_type"][i, j].decode(), int(served["start_char"][i, j]),
                     int(served["end_char"][i, j])) for j in range(len(expected[r]))] == [
                (e["type"], e["start"], e["end"]) for e in expected[r]]
