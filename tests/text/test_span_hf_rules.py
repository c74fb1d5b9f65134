"""`rules="hf_pipeline"`: HF's QA-pipeline windows (checked against the `tokenizers` library's
overflowing encodings, which the pipeline calls) and its decoding (checked against a NumPy port
of transformers 4.57's `select_starts_ends` / `decode_spans` / `postprocess`)."""

import warnings

import numpy as np
import pytest

from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.text.span_decoder import SpanDecoder
from keras_bert_zoo.text.span_extractor_preprocessor import SpanExtractorPreprocessor
from tests.text.parity_corpus import build_vocabulary
from tests.text.span_passages import HAND_PASSAGES, lee_passages

QUESTIONS = ["Who was the leader?", "What is it?", "Where did the company go after the war?"]


@pytest.fixture(scope="module")
def passages():
    return (lee_passages(8) or HAND_PASSAGES[4:] * 4) + ["Short one."]


@pytest.fixture(scope="module")
def vocab(passages):
    return build_vocabulary(passages + QUESTIONS)


@pytest.fixture(scope="module")
def tokenizer(vocab):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BertTokenizer(vocab)


def _pairs(passages):
    return [QUESTIONS[i % len(QUESTIONS)] for i in range(len(passages))], list(passages)


@pytest.mark.parametrize("length, stride", [(48, 8), (40, 20), (64, 30)])
def test_windows_are_hf_tokenizers_overflowing_encodings(vocab, tokenizer, passages, length, stride):
    from tokenizers import BertWordPieceTokenizer

    hf = BertWordPieceTokenizer({token: i for i, token in enumerate(vocab)}, lowercase=True)
    hf.enable_truncation(max_length=length, stride=stride, strategy="only_second")
    questions, contexts = _pairs(passages)
    ours = SpanExtractorPreprocessor(tokenizer, length, doc_stride=stride, max_query_length=12, rules="hf_pipeline")
    windows = {k: v.numpy() for k, v in ours.windows(questions, contexts).items()}
    expected, owners = [], []
    for e, (q, c) in enumerate(zip(questions, contexts)):
        first = hf.encode(q, c)
        for encoding in [first] + first.overflowing:
            expected.append(encoding.ids)
            owners.append(e)
    assert windows["example_index"].tolist() == owners
    got = [row[mask.astype(bool)].tolist() for row, mask in zip(windows["token_ids"], windows["padding_mask"])]
    assert got == expected
    assert max(np.bincount(owners)) >= 3  # long contexts: several windows each
    # The original rule starts windows every `doc_stride` tokens: another count of them.
    original = SpanExtractorPreprocessor(tokenizer, length, doc_stride=stride, max_query_length=12)
    assert len(original.windows(questions, contexts)["example_index"]) != len(owners)


def hf_postprocess(start, end, windows, contexts, max_answer_len, handle_impossible_answer):
    """transformers 4.57 QuestionAnsweringPipeline, top_k=1, align_to_words=False, one
    question at a time over its windows (`select_starts_ends`, `decode_spans`, `postprocess`)."""
    results = []
    for e, context in enumerate(contexts):
        min_null_score, answers = 1000000, []
        for w in np.flatnonzero(windows["example_index"] == e):
            p_mask = (windows["token_starts"][w] < 0).astype(int)
            p_mask[0] = 0  # [CLS] is kept
            undesired_tokens = np.abs(p_mask - 1) & windows["padding_mask"][w]
            mask = undesired_tokens == 0.0
            s = np.where(mask, -10000.0, start[w][None])
            t = np.where(mask, -10000.0, end[w][None])
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s = s / s.sum()
            t = np.exp(t - t.max(axis=-1, keepdims=True))
            t = t / t.sum()
            if handle_impossible_answer:
                min_null_score = min(min_null_score, (s[0, 0] * t[0, 0]).item())
            s[0, 0] = t[0, 0] = 0.0
            outer = np.matmul(np.expand_dims(s, -1), np.expand_dims(t, 1))
            candidates = np.tril(np.triu(outer), max_answer_len - 1)
            i, j = np.unravel_index([np.argmax(candidates.flatten())], candidates.shape)[1:]
            keep = np.isin(i, undesired_tokens.nonzero()) & np.isin(j, undesired_tokens.nonzero())
            for a, b in zip(i[keep], j[keep]):
                score = candidates[0, a, b]
                begin, stop = windows["token_starts"][w, a], windows["token_ends"][w, b]
                text = context[begin:stop] if begin >= 0 else ""
                same = [x for x in answers if x["answer"].lower() == text.lower()]
                if same:
                    same[0]["score"] += score.item()
                else:
                    answers.append({"score": score.item(), "start": int(begin), "answer": text})
        if handle_impossible_answer:
            answers.append({"score": min_null_score, "start": -1, "answer": ""})
        results.append(sorted(answers, key=lambda x: x["score"], reverse=True)[0])
    return results


def _planted_logits(windows, rng):
    """Noise, plus per question one span planted in two overlapping windows and a
    stronger one in a single window: HF's sum of equal answers makes the first win."""
    shape = windows["token_ids"].shape
    start = rng.normal(0, 1, shape).astype("float32")
    end = rng.normal(0, 1, shape).astype("float32")
    planted = {}
    for e in np.unique(windows["example_index"]):
        rows = np.flatnonzero(windows["example_index"] == e)
        if len(rows) < 3:
            continue
        a, b, c = rows[:3]
        shared = sorted(set(windows["token_starts"][a][windows["token_starts"][a] >= 0])
                        & set(windows["token_starts"][b][windows["token_starts"][b] >= 0]))
        char = shared[len(shared) // 2]
        for row, boost in ((a, 6.0), (b, 6.0)):
            p = int(np.flatnonzero(windows["token_starts"][row] == char)[0])
            start[row, p] += boost
            end[row, p] += boost
        only = [p for p in np.flatnonzero(windows["max_context"][c])
                if windows["token_starts"][c, p] not in set(windows["token_starts"][a])]
        start[c, only[0]] += 7.0  # the original rule's pick: a higher logit, in its max-context window
        end[c, only[0]] += 7.0
        planted[e] = char
    return start, end, planted


@pytest.mark.parametrize("handle_impossible_answer", [False, True])
def test_decoding_matches_hf_pipeline_port(tokenizer, passages, handle_impossible_answer):
    questions, contexts = _pairs(passages)
    preprocessor = SpanExtractorPreprocessor(tokenizer, 48, doc_stride=16, max_query_length=12, rules="hf_pipeline")
    windows = {k: v.numpy() for k, v in preprocessor.windows(questions, contexts).items()}
    rng = np.random.default_rng(0)
    start, end, planted = _planted_logits(windows, rng)
    no_answer = windows["example_index"] % 2 == 1  # these questions' [CLS] dominates every window
    start[no_answer, 0] += 9.0
    end[no_answer, 0] += 9.0
    expected = hf_postprocess(start, end, windows, contexts, 5, handle_impossible_answer)
    decoder = SpanDecoder(max_answer_length=5, rules="hf_pipeline",
                          null_score_diff_threshold=0.0 if handle_impossible_answer else None)
    got = {k: v.numpy() for k, v in decoder(start, end, windows, contexts).items()}
    assert [t.decode() for t in got["answer_text"]] == [x["answer"] for x in expected]
    assert got["answer_start"].tolist() == [x["start"] for x in expected]
    answered = got["answer_start"] >= 0
    np.testing.assert_allclose(got["score"][answered], [x["score"] for x in expected if x["start"] >= 0], rtol=1e-5)
    if handle_impossible_answer:
        assert 0 < (~answered).sum() < len(contexts)  # both outcomes are exercised
    # Where [CLS] does not dominate, the planted answer won by the sum over its two windows.
    planted = {e: char for e, char in planted.items() if e % 2 == 0}
    assert planted and all(got["answer_start"][e] == char for e, char in planted.items())
    # The original rule on the same logits and windows answers differently somewhere.
    original = SpanDecoder(max_answer_length=5)(start, end, windows, contexts)["answer_text"].numpy()
    assert original.tolist() != got["answer_text"].tolist()


def test_rules_are_checked_and_configured(tokenizer):
    with pytest.raises(ValueError, match="rules"):
        SpanDecoder(rules="hf")
    with pytest.raises(ValueError, match="rules"):
        SpanExtractorPreprocessor(tokenizer, 48, doc_stride=8, max_query_length=8, rules="HF")
    with pytest.raises(ValueError, match="doc_stride=40"):
        SpanExtractorPreprocessor(tokenizer, 48, doc_stride=40, max_query_length=8, rules="hf_pipeline")
    decoder = SpanDecoder(rules="hf_pipeline")
    assert SpanDecoder.from_config(decoder.get_config()).rules == "hf_pipeline"
    preprocessor = SpanExtractorPreprocessor(tokenizer, 48, doc_stride=8, max_query_length=8, rules="hf_pipeline")
    assert SpanExtractorPreprocessor.from_config(preprocessor.get_config()).rules == "hf_pipeline"
