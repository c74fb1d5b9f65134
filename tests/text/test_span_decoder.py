"""SpanDecoder: hand-made logits into exact substrings; random logits against the port."""

import warnings

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.text.span_decoder import SpanDecoder
from keras_bert_zoo.text.span_extractor_preprocessor import SpanExtractorPreprocessor
from tests.helpers import assert_config_round_trip
from references import run_squad as ref
from tests.text.parity_corpus import build_vocabulary
from references.tokenizer import FullTokenizer
from tests.text.span_passages import HAND_PASSAGES, make_examples


@pytest.fixture(scope="module")
def tokenizers():
    vocab = build_vocabulary(HAND_PASSAGES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BertTokenizer(vocab), FullTokenizer(vocab)


def _logits_for(windows, row, start, end, size=None):
    shape = windows["token_ids"].shape
    start_logits, end_logits = np.zeros(shape, "float32"), np.zeros(shape, "float32")
    start_logits[row, start], end_logits[row, end] = 5.0, 4.0
    return start_logits, end_logits


def _position(windows, row, char):
    return int(np.flatnonzero(windows["token_starts"][row] == char)[0])


def test_hand_made_logits_give_exact_substrings(tokenizers):
    tokenizer, _ = tokenizers
    contexts = [HAND_PASSAGES[0], HAND_PASSAGES[2], HAND_PASSAGES[3]]
    wanted = ["Zürich  is\tthe largest city in Switzerland\u202fand", "北京市) had 21.9", "Hà Nội, Đà Nẵng.\t\tThe"]
    preprocessor = SpanExtractorPreprocessor(tokenizer, 128, 32, 8)
    windows = {k: v.numpy() for k, v in preprocessor.windows(["q?"] * 3, contexts).items()}
    assert windows["example_index"].tolist() == [0, 1, 2]
    start_logits = np.zeros(windows["token_ids"].shape, "float32")
    end_logits = np.zeros_like(start_logits)
    for row, (context, answer) in enumerate(zip(contexts, wanted)):
        begin = context.index(answer)
        start_logits[row, _position(windows, row, begin)] = 6.0
        last = max(p for p in range(128) if 0 <= windows["token_starts"][row, p] < begin + len(answer))
        end_logits[row, last] = 5.0
    decoded = SpanDecoder()(start_logits, end_logits, windows, contexts)
    assert [t.decode() for t in decoded["answer_text"].numpy()] == wanted
    assert decoded["answer_start"].numpy().tolist() == [c.index(a) for c, a in zip(contexts, wanted)]
    np.testing.assert_allclose(decoded["score"].numpy(), 11.0)
    # In a traced function (as export runs it) the answers are the same.
    traced = tf.function(lambda s, e: SpanDecoder()(s, e, windows, contexts))(start_logits, end_logits)
    assert traced["answer_text"].numpy().tolist() == decoded["answer_text"].numpy().tolist()


def test_validity_rules_and_the_null_threshold(tokenizers):
    tokenizer, _ = tokenizers
    context = HAND_PASSAGES[4]
    windows = {k: v.numpy() for k, v in SpanExtractorPreprocessor(tokenizer, 64, 16, 8).windows(["q"], [context]).items()}
    start = _position(windows, 0, context.index("Japanese"))
    end = _position(windows, 0, context.index("industry"))
    start_logits, end_logits = _logits_for(windows, 0, start, end)
    start_logits[0, 0], end_logits[0, 0] = 4.0, 4.0  # null score 8 (and [CLS] is never a span)
    start_logits[0, 1] = end_logits[0, 1] = 9.0  # the question token: not context
    end_logits[0, start - 1] = 8.5  # ends before the start: invalid
    v1 = SpanDecoder()(start_logits, end_logits, windows, [context])
    assert v1["answer_text"].numpy().tolist() == [b"Japanese electronics industry"]
    np.testing.assert_allclose(v1["score_diff"].numpy(), [8.0 - 9.0])
    assert SpanDecoder(max_answer_length=2)(start_logits, end_logits, windows, [context])["answer_text"].numpy()[0] != (
        b"Japanese electronics industry")
    for threshold, expected in ((-0.5, b"Japanese electronics industry"), (-1.5, b"")):
        out = SpanDecoder(null_score_diff_threshold=threshold)(start_logits, end_logits, windows, [context])
        assert out["answer_text"].numpy().tolist() == [expected]
    assert out["answer_start"].numpy().tolist() == [-1]
    # No valid span at all (only the question scores): empty answer, -inf score.
    out = SpanDecoder(n_best_size=1)(np.pad(start_logits[:, :2], ((0, 0), (0, 62))), end_logits * 0, windows, [context])
    assert out["answer_text"].numpy().tolist() == [b""] and out["score"].numpy()[0] == -np.inf


@pytest.mark.parametrize("seed", [0, 1])
def test_random_logits_choose_the_original_span(tokenizers, seed):
    tokenizer, port = tokenizers
    questions, contexts, _ = make_examples(HAND_PASSAGES, per_passage=2, seed=seed)
    setting = (40, 9, 8)
    windows = {k: v.numpy() for k, v in SpanExtractorPreprocessor(tokenizer, *setting).windows(questions, contexts).items()}
    rng = np.random.default_rng(seed)
    # Rounded logits make ties, which must break in the original's order.
    start_logits = np.round(rng.normal(size=windows["token_ids"].shape), 1).astype("float32")
    end_logits = np.round(rng.normal(size=windows["token_ids"].shape), 1).astype("float32")
    out = SpanDecoder(n_best_size=5, max_answer_length=6)(start_logits, end_logits, windows, contexts)
    out = {k: v.numpy() for k, v in out.items()}
    for i, (question, context) in enumerate(zip(questions, contexts)):
        features = ref.convert_example(i, question, context, None, port, *setting, False)
        rows = np.flatnonzero(windows["example_index"] == i)
        as_list = lambda logits: [[float(v) for v in logits[r]] for r in rows]  # noqa: E731
        best, null = ref.best_span(features, as_list(start_logits), as_list(end_logits), 5, 6)
        f, s, e, score = best
        char_start, char_end = windows["token_starts"][rows[f], s], windows["token_ends"][rows[f], e]
        assert (out["answer_start"][i], out["answer_end"][i]) == (char_start, char_end), i
        assert out["answer_text"][i].decode() == context[char_start:char_end]
        np.testing.assert_allclose([out["score"][i], out["null_score"][i]], [score, null], rtol=1e-6)


def test_config_and_arguments():
    decoder = SpanDecoder(n_best_size=5, max_answer_length=7, null_score_diff_threshold=-1)
    assert assert_config_round_trip(decoder).null_score_diff_threshold == -1.0
    with pytest.raises(ValueError, match="n_best_size"):
        SpanDecoder(n_best_size=0)
    with pytest.raises(ValueError, match="null_score_diff_threshold"):
        SpanDecoder(null_score_diff_threshold="high")
