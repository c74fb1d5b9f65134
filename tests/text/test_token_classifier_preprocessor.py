"""TokenClassifierPreprocessor: first-piece labels, max-context windows, document context, entities."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.text.token_classifier_preprocessor import TokenClassifierPreprocessor
from tests.helpers import assert_config_round_trip

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "eu", "rejects", "german", "call", ".",
         "u", "s", "##s", "the", "cafe", "ze", "##ur", "##ich", ",", "to", "in", "a"]
CLS, SEP = 2, 3


_TOKENIZER = []


def _preprocessor(length=16, stride=None):
    # One tokenizer for the module: its traced graph is built once (seconds on a busy host).
    if not _TOKENIZER:
        _TOKENIZER.append(BertTokenizer(VOCAB, lowercase=True))
    return TokenClassifierPreprocessor(_TOKENIZER[0], length, window_stride=stride)


def test_first_piece_carries_the_word_label_hand_checked():
    # Words: "EU" "rejects" "Germans," "U.S." "café" "Zéurich" "\x01" -> pieces (checked by hand):
    # eu | rejects | german ##s , | u . s . | cafe | ze ##ur ##ich | [UNK] (a word of control
    # characters only still gets a piece to carry its label).
    pre = _preprocessor(length=20)
    x, y, w = pre(["EU rejects Germans, U.S. café Zéurich \x01"], [[1, 0, 2, 3, 0, 4, 5]])
    assert x["token_ids"].numpy().tolist() == [
        [CLS, 5, 6, 7, 12, 18, 10, 9, 11, 9, 14, 15, 16, 17, 1, SEP, 0, 0, 0, 0]]
    assert y.numpy().tolist() == [[0, 1, 0, 2, 0, 0, 3, 0, 0, 0, 0, 4, 0, 0, 5, 0, 0, 0, 0, 0]]
    assert w.numpy().tolist() == [[0, 1, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0]]
    assert x["padding_mask"].numpy().sum() == 16 and x["segment_ids"].numpy().sum() == 0
    # Dense labels padded with anything beyond the words are read the same way.
    _, y_dense, _ = pre(np.array(["EU rejects Germans, U.S. café Zéurich \x01"]), np.array([[1, 0, 2, 3, 0, 4, 5, -1]]))
    assert y_dense.numpy().tolist() == y.numpy().tolist()


def _labelled_words(out, batch):
    """(example, word) pairs scored, from the windows' word_index."""
    seen = []
    example, word = out["example"].numpy(), out["word_index"].numpy()
    for row, col in zip(*np.nonzero(word >= 0)):
        seen.append((int(example[row]), int(word[row, col])))
    return seen


@pytest.mark.parametrize("length,stride", [(6, 1), (6, 2), (7, 3), (8, 6), (12, None)])
def test_windows_label_every_word_exactly_once(length, stride):
    rng = np.random.default_rng(length)
    words = ["eu", "Germans,", "U.S.", "call", "Zéurich", "a"]
    sentences = [" ".join(rng.choice(words, size=n)) for n in (0, 1, 3, 9, 17)]
    counts = [len(s.split()) for s in sentences]
    labels = [list(range(10, 10 + n)) for n in counts]
    pre = _preprocessor(length, stride)
    out = pre.windows(sentences, tf.ragged.constant(labels))
    seen = _labelled_words(out, len(sentences))
    assert sorted(seen) == [(i, j) for i, n in enumerate(counts) for j in range(n)]
    # Each scored piece holds its word's label; every window fits and starts with [CLS].
    example, word, got = out["example"].numpy(), out["word_index"].numpy(), out["labels"].numpy()
    for row, col in zip(*np.nonzero(word >= 0)):
        assert got[row, col] == labels[example[row]][word[row, col]]
    assert (out["token_ids"].numpy()[:, 0] == CLS).all()
    assert (out["sample_weight"].numpy() == (word >= 0)).all()


def test_long_sentence_words_scored_in_their_max_context_window():
    pre = _preprocessor(length=6, stride=2)  # 4 pieces per window, windows start at 0, 2, 4
    out = pre.windows(["a eu call the in to"])  # 6 one-piece words
    assert out["token_ids"].numpy().tolist() == [
        [CLS, 21, 5, 8, 13, SEP], [CLS, 8, 13, 20, 19, SEP]]
    # Piece 2 ("call"): min(2, 1) in window 0 vs min(0, 3) in window 1 -> window 0;
    # piece 3 ("the"): min(3, 0) vs min(1, 2) -> window 1.
    assert out["word_index"].numpy().tolist() == [[-1, 0, 1, 2, -1, -1], [-1, -1, 3, 4, 5, -1]]


def test_document_context_fills_the_window_and_only_the_centre_is_scored():
    pre = _preprocessor(length=8)  # 6 pieces of room
    sentences, left, right = ["call ."], ["eu rejects the german"], ["u s"]
    out = pre.windows((sentences, left, right), [[7, 0]])
    # Room for 4 context pieces: 2 each side (the right has 2).
    assert out["token_ids"].numpy().tolist() == [[CLS, 13, 7, 8, 9, 10, 11, SEP]]
    assert out["word_index"].numpy().tolist() == [[-1, -1, -1, 0, 1, -1, -1, -1]]
    assert out["labels"].numpy().tolist() == [[0, 0, 0, 7, 0, 0, 0, 0]]
    # A short right context leaves its room to the left.
    out = pre.windows((["call"], ["a eu rejects the german"], [""]))
    assert out["token_ids"].numpy().tolist() == [[CLS, 21, 5, 6, 13, 7, 8, SEP]]


def test_maps_over_a_dataset():
    pre = _preprocessor(length=8)
    ds = tf.data.Dataset.from_tensor_slices((["eu call", "the u.s."], [[1, 0, -1], [0, 2, -1]])).batch(2)
    x, y, w = next(iter(ds.map(pre)))
    assert x["token_ids"].numpy().tolist() == [[CLS, 5, 8, SEP, 0, 0, 0, 0], [CLS, 13, 10, 9, 11, 9, SEP, 0]]
    assert y.numpy().tolist() == [[0, 1, 0, 0, 0, 0, 0, 0], [0, 0, 2, 0, 0, 0, 0, 0]]


def test_word_predictions_and_entities_are_exact_substrings():
    texts = ["  Zéurich  cafe\u00a0EU rejects", "the U.S. (Inc.)"]
    tags = [["B-LOC", "I-LOC", "B-ORG", "O"], ["O", "I-LOC", "B-ORG"]]
    got = TokenClassifierPreprocessor.entities(texts, tags)
    assert got == [
        [{"type": "LOC", "text": "Zéurich  cafe", "start": 2, "end": 15},
         {"type": "ORG", "text": "EU", "start": 16, "end": 18}],
        [{"type": "LOC", "text": "U.S.", "start": 4, "end": 8},
         {"type": "ORG", "text": "(Inc.)", "start": 9, "end": 15}],
    ]
    for text, found in zip(texts, got):
        assert all(text[e["start"]:e["end"]] == e["text"] for e in found)
    pre = _preprocessor(length=6, stride=2)
    out = pre.windows(["a eu call the in to", "u"])
    pieces = out["word_index"].numpy() * 10  # a stand-in "prediction" per piece
    words = TokenClassifierPreprocessor.word_predictions(out, pieces, 2)
    assert [w.tolist() for w in words] == [[0, 10, 20, 30, 40, 50], [0]]
    with pytest.raises(ValueError, match="2 words but 1 tags"):
        TokenClassifierPreprocessor.entities(["a b"], [["O"]])


def test_arguments_checked_and_config_round_trip():
    tok = _preprocessor().tokenizer
    with pytest.raises(ValueError, match="sequence_length=2"):
        TokenClassifierPreprocessor(tok, 2)
    with pytest.raises(ValueError, match="window_stride=0"):
        TokenClassifierPreprocessor(tok, 8, window_stride=0)
    with pytest.raises(ValueError, match="tuple of 2 items"):
        TokenClassifierPreprocessor(tok, 8)((["a"], ["b"]))
    with pytest.raises(ValueError, match="sample_weight"):
        TokenClassifierPreprocessor(tok, 8)(["a"], [[0]], [[1.0]])
    clone = assert_config_round_trip(TokenClassifierPreprocessor(tok, 8, window_stride=3))
    assert clone.window_stride == 3 and clone.sequence_length == 8
