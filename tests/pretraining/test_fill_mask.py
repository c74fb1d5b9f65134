"""Fill-mask helpers: exact encoding, probabilities against a NumPy softmax, masking."""

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.layers import MaskedLMHead
from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
from keras_bert_zoo.pretraining import fill_mask as fm

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", ".",
         "a", "dog", "house", "##s", "big", "[", "]"] + [f"w{i}" for i in range(22)]


@pytest.fixture
def tokenizer():
    return BertTokenizer(VOCAB, lowercase=True)


def _model():
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(len(VOCAB), 2, 2, 16, 32, max_sequence_length=16)
    head = MaskedLMHead(backbone.token_embedding)
    return backbone, head


def test_encode_masked_text_exact_ids(tokenizer):
    x = fm.encode_masked_text(tokenizer, "The [MASK] sat on the [MASK].", sequence_length=10)
    np.testing.assert_array_equal(x["token_ids"], [[2, 5, 4, 7, 8, 5, 4, 10, 3, 0]])
    np.testing.assert_array_equal(x["padding_mask"], [[1] * 9 + [0]])
    np.testing.assert_array_equal(x["segment_ids"], np.zeros((1, 10)))
    np.testing.assert_array_equal(x["mask_positions"], [[2, 6]])


def test_encode_masked_text_errors(tokenizer):
    with pytest.raises(ValueError, match="text"):
        fm.encode_masked_text(tokenizer, "no mask here")
    with pytest.raises(ValueError, match="sequence_length"):
        fm.encode_masked_text(tokenizer, "the cat sat on the mat [MASK]", sequence_length=4)


def test_fill_mask_matches_numpy_softmax(tokenizer):
    backbone, head = _model()
    text = "the cat [MASK] on the mat."
    x = fm.encode_masked_text(tokenizer, text, sequence_length=16)
    positions = x.pop("mask_positions")
    logits = np.asarray(head(backbone(x)["sequence_output"], positions), "float64")[0, 0]
    probs = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    best = np.argsort(-probs)[:3]
    result = fm.fill_mask(backbone, head, tokenizer, text, top_k=3, sequence_length=16)
    assert [t for t, _ in result[0]] == [VOCAB[i] for i in best]
    np.testing.assert_allclose([p for _, p in result[0]], probs[best], rtol=1e-5)


def test_fill_mask_follows_the_output_bias(tokenizer):
    backbone, head = _model()
    fm.fill_mask(backbone, head, tokenizer, "a [MASK]", sequence_length=16)  # builds the head
    bias = np.zeros(len(VOCAB), "float32")
    bias[VOCAB.index("dog")] = 50.0
    head.output_bias.assign(bias)
    result = fm.fill_mask(backbone, head, tokenizer, "the [MASK] sat on a [MASK].", sequence_length=16)
    assert [r[0][0] for r in result] == ["dog", "dog"]
    assert result[0][0][1] > 0.999
    with pytest.raises(ValueError, match="top_k"):
        fm.fill_mask(backbone, head, tokenizer, "a [MASK]", top_k=0)


def test_mask_one_word_picks_the_middle_single_piece_word(tokenizer):
    # "houses" is two pieces and "w1" is not alphabetic: "big" is too short (min 4)
    # unless min_chars allows it; the middle-most candidate wins.
    assert fm.mask_one_word(tokenizer, "the houses house big w1 mat") == (
        "the houses [MASK] big w1 mat", "house")
    assert fm.mask_one_word(tokenizer, "the big cat", min_chars=3) == ("the [MASK] cat", "big")
    assert fm.mask_one_word(tokenizer, "a w1 .") is None
