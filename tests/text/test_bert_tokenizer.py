"""BertTokenizer: id-for-id parity with the original, offsets, bad input, saving."""

import json
import os
import time
import zipfile
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.text import BertTokenizer
from tests.helpers import assert_config_round_trip
from tests.text.parity_corpus import build_vocabulary, parity_corpus
from references.tokenizer import FullTokenizer

SMALL_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", ",", "!",
               "##s", "cafe", "the", "un", "##aff", "##able", "a", "##b", "i", "##stanbul"]


@pytest.fixture(scope="module")
def corpus():
    return parity_corpus()


@pytest.fixture(scope="module")
def corpus_vocab(corpus):
    return build_vocabulary(corpus)


def _quiet(vocab, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BertTokenizer(vocab, **kwargs)


@pytest.mark.parametrize(
    "lowercase,strip_accents", [(True, None), (False, None), (True, False), (False, True)]
)
def test_parity_with_original(corpus, corpus_vocab, lowercase, strip_accents):
    assert len(corpus) >= 300
    reference = FullTokenizer(corpus_vocab, do_lower_case=lowercase, strip_accents=strip_accents)
    tokenizer = _quiet(corpus_vocab, lowercase=lowercase, strip_accents=strip_accents)
    ids = tokenizer(corpus).to_list()
    offset_ids = tokenizer.tokenize_with_offsets(corpus)[0].to_list()
    mismatches = []
    for text, got, got_offsets in zip(corpus, ids, offset_ids):
        expected = reference.convert_tokens_to_ids(reference.tokenize(text))
        if got != expected or got_offsets != expected:
            mismatches.append((text[:40], got[:8], expected[:8]))
    assert not mismatches, mismatches[:5]
    # The corpus exercises every outcome: whole words, continuations and [UNK].
    flat = [i for row in ids for i in row]
    assert tokenizer.unk_token_id in flat
    assert any(corpus_vocab[i].startswith("##") for i in flat)


def test_nfkc_differences_follow_original():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "ß", "ss", "…", ".", "ﬁ", "fi",
             "ne", "##ne", "ａ", "a", "ς", "σ", "οδος", "##ς"]
    tokenizer = _quiet(vocab)
    reference = FullTokenizer(vocab)
    for text in ("ß", "…", "ﬁne", "Ａ", "ΟΔΟΣ", "ς"):
        expected = reference.convert_tokens_to_ids(reference.tokenize(text))
        assert tokenizer(text).numpy().tolist() == expected, text
    assert tokenizer.detokenize(tokenizer("ß …")).numpy() == "ß …".encode()


def test_scalar_batch_and_dataset_map():
    tokenizer = BertTokenizer(SMALL_VOCAB)
    scalar = tokenizer("Hello, worlds!")
    assert isinstance(scalar, tf.Tensor) and scalar.dtype == tf.int32
    assert scalar.numpy().tolist() == [5, 7, 6, 9, 8]
    batch = tokenizer(["hello", "", "unaffable café"])
    assert isinstance(batch, tf.RaggedTensor) and batch.dtype == tf.int32
    assert batch.to_list() == [[5], [], [12, 13, 14, 10]]
    ds = tf.data.Dataset.from_tensor_slices(["hello world", "worlds"]).map(tokenizer)
    assert [x.tolist() for x in ds.as_numpy_iterator()] == [[5, 6], [6, 9]]
    ds = tf.data.Dataset.from_tensor_slices(["hello world", "worlds"]).batch(2).map(tokenizer.tokenize)
    assert next(iter(ds)).to_list() == [[5, 6], [6, 9]]


def test_vocabulary_accessors():
    tokenizer = BertTokenizer(SMALL_VOCAB)
    assert tokenizer.vocabulary_size() == len(SMALL_VOCAB)
    assert tokenizer.get_vocabulary() == SMALL_VOCAB
    assert tokenizer.token_to_id("[MASK]") == 4 and tokenizer.id_to_token(9) == "##s"
    assert (tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id) == (2, 3, 0)
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tokenizer.token_to_id("nope")
    with pytest.raises(ValueError, match="id"):
        tokenizer.id_to_token(len(SMALL_VOCAB))
    assert tokenizer.detokenize([[12, 13, 14], [5, 6, 9]]).numpy().tolist() == [b"unaffable", b"hello worlds"]
    assert tokenizer.detokenize(tf.constant([5, 6])).numpy() == b"hello world"


def test_offsets_are_characters_of_the_original(corpus, corpus_vocab):
    tokenizer = _quiet(corpus_vocab)
    texts = ["Héllo, WORLD! café", "  x\u200by 中文 İstanbul", "ΟΔΟΣ e\u0301t\u00e9", "a\x00b\tc"]
    ids, begins, ends = tokenizer.tokenize_with_offsets(texts)
    assert ids.to_list() == tokenizer(texts).to_list()
    got = [[t[b:e] for b, e in zip(bs, es)] for t, bs, es in zip(texts, begins.to_list(), ends.to_list())]
    assert got[0] == ["Héllo", ",", "WORLD", "!", "café"]
    # "İ" lower-cases to "i" + a dropped dot: the piece "ist" spans the 3 source characters.
    assert got[1] == ["x", "y", "中", "文", "İst", "a", "n", "b", "ul"]
    assert got[2] == ["ΟΔΟΣ", "e\u0301t\u00e9"]
    assert got[3] == ["a", "b", "c"]  # "ab" is not in this vocabulary: "a" "##b"
    # On the whole corpus, spans are ordered, inside the string and non-empty.
    ids, begins, ends = tokenizer.tokenize_with_offsets(corpus)
    for text, bs, es in zip(corpus, begins.to_list(), ends.to_list()):
        assert all(0 <= b < e <= len(text) for b, e in zip(bs, es)), text[:30]
        assert bs == sorted(bs)


def test_scalar_offsets_for_squad():
    tokenizer = BertTokenizer(SMALL_VOCAB)
    text = "The café's worlds"
    ids, begins, ends = tokenizer.tokenize_with_offsets(text)
    assert [text[b:e] for b, e in zip(begins.numpy(), ends.numpy())] == ["The", "café", "'", "s", "world", "s"]
    assert ids.numpy().tolist()[:2] == [11, 10]


def test_invalid_utf8_row_is_cleaned_others_unchanged():
    tokenizer = BertTokenizer(SMALL_VOCAB)
    batch = tf.constant([b"hello world", b"hel\xfflo wor\xc3ld", b"cafe\xe9"])
    assert tokenizer(batch).to_list() == [[5, 6], [5, 6], [10]]  # "cafe" without the bad byte
    strict = BertTokenizer(SMALL_VOCAB, errors="strict")
    with pytest.raises(ValueError, match=r"rows \[1, 2\]"):
        strict(batch)
    assert strict(["hello"]).to_list() == [[5]]


def test_control_and_invisible_characters_are_cleaned():
    tokenizer = BertTokenizer(SMALL_VOCAB)
    noisy = ["hel\x00lo\x07 wo\u200brld", "\ufeffhello\u202e\r\n\tworld", "Café", "\u3000 \t"]
    clean = ["hello world", "hello world", "cafe", ""]
    assert tokenizer(noisy).to_list() == tokenizer(clean).to_list()
    assert tokenizer(["Café"]).to_list() == [[10]]


def test_huge_input_is_capped_and_long_words_are_unk():
    tokenizer = BertTokenizer(SMALL_VOCAB, max_input_chars=100_000)
    huge = ("hello world " * 900_000)[:10_000_000]
    start = time.perf_counter()
    ids = tokenizer([huge, "a" + "b" * 100_000])
    assert time.perf_counter() - start < 20
    assert ids.row_lengths().numpy().tolist() == [100_000 // 6 + 1, 1]
    assert ids[1].numpy().tolist() == [tokenizer.unk_token_id]
    assert tokenizer("a" + "b" * 199).numpy().tolist() == [15] + [16] * 199
    assert tokenizer("a" + "b" * 200).numpy().tolist() == [1]



@pytest.mark.parametrize("lowercase", [True, False])
def test_ascii_fast_path_and_other_rows_mixed_in_one_batch(lowercase):
    # ASCII rows skip the normalisation passes and the exact long-word check; the others
    # take them. Interleaved in one batch, every row must still match the original.
    vocab = SMALL_VOCAB + ["ж", "##ж", "Hello", "##bé", "é", "##é", "中"]
    tokenizer = _quiet(vocab, lowercase=lowercase)
    reference = FullTokenizer(vocab, do_lower_case=lowercase)
    batch = [
        "Hello,\tworld!\r\nUNAFFABLE",  # ASCII with tab/CR/LF
        "Héllo wörld café",  # accents
        "a" + "b" * 199,  # 200 ASCII characters: pieces
        "ж" * 150,  # 150 characters but 300 bytes: pieces, not [UNK]
        "a" + "b" * 200,  # 201 ASCII characters: [UNK]
        "ж" * 201 + " hello",  # 201 characters: [UNK]
        "a" + "bé" * 66 + " " + "a" + "b" * 60,  # a 133-character, 200-byte word
        "a" + "bé" * 100,  # 201 characters, some non-ASCII: [UNK]
        "",
        "hel\x00lo\x7f wor\x1bld",  # ASCII control characters are not the fast path
        "x" * 51 + "中" + "hello",
        " \t ",
        "[MASK] hello",
    ]
    for order in (batch, batch[::-1], batch[1::2] + batch[::2]):
        expected = [reference.convert_tokens_to_ids(reference.tokenize(text)) for text in order]
        assert tokenizer(order).to_list() == expected
        assert tokenizer.tokenize_with_offsets(order)[0].to_list() == expected
    # Only ASCII rows, only other rows, no rows.
    for rows in ([batch[0], batch[2]], [batch[1], batch[3]]):
        expected = [reference.convert_tokens_to_ids(reference.tokenize(text)) for text in rows]
        assert tokenizer(rows).to_list() == expected
    assert tokenizer(tf.constant([], tf.string)).to_list() == []


def test_batched_dataset_map_matches_eager(corpus, corpus_vocab):
    tokenizer = _quiet(corpus_vocab)
    ds = tf.data.Dataset.from_tensor_slices(corpus).batch(64).map(tokenizer, num_parallel_calls=2)
    got = [row for batch in ds for row in batch.to_list()]
    assert got == tokenizer(corpus).to_list()

def test_bad_arguments_name_the_argument(tmp_path):
    with pytest.raises(ValueError, match="errors"):
        BertTokenizer(SMALL_VOCAB, errors="replace")
    with pytest.raises(ValueError, match="max_input_chars"):
        BertTokenizer(SMALL_VOCAB, max_input_chars=0)
    with pytest.raises(ValueError, match="no vocabulary"):
        BertTokenizer()("hello")
    with pytest.raises(ValueError, match="strings"):
        BertTokenizer(SMALL_VOCAB)(tf.constant([1, 2]))
    with pytest.raises(ValueError, match="1-D"):
        BertTokenizer(SMALL_VOCAB)(tf.constant([["a"]]))


def test_case_mismatch_warns():
    with pytest.warns(UserWarning, match="looks uncased"):
        BertTokenizer(SMALL_VOCAB, lowercase=False)
    cased = SMALL_VOCAB + ["Hello", "World", "The", "Paris"]
    with pytest.warns(UserWarning, match="looks cased"):
        BertTokenizer(cased, lowercase=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BertTokenizer(SMALL_VOCAB, lowercase=True)


def test_config_round_trip_and_keras_file(tmp_path):
    tokenizer = BertTokenizer(SMALL_VOCAB, strip_accents=True, max_input_chars=1000)
    clone = assert_config_round_trip(tokenizer)
    assert clone.get_config()["vocabulary"] is None
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, _dense(tokenizer, inputs))
    path = os.path.join(str(tmp_path), "tok.keras")
    model.save(path)
    restored = keras.saving.load_model(path, safe_mode=True)
    texts = tf.constant(["hello worlds!", "unaffable"])
    np.testing.assert_array_equal(restored(texts), model(texts))
    inner = restored.layers[-1].tokenizer
    assert inner.get_vocabulary() == SMALL_VOCAB and inner.max_input_chars == 1000


def _dense(tokenizer, inputs):
    return DenseIds(tokenizer)(inputs)


@keras.saving.register_keras_serializable(package="keras_bert_zoo_tests")
class DenseIds(keras.layers.Layer):
    """Test helper: tokenizer output padded to a dense (batch, 8) tensor."""

    def __init__(self, tokenizer, **kwargs):
        super().__init__(**kwargs)
        self.tokenizer = tokenizer

    def call(self, x):
        return self.tokenizer(x).to_tensor(shape=[None, 8])

    def compute_output_spec(self, x):
        return keras.KerasTensor((x.shape[0], 8), dtype="int32")

    def get_config(self):
        return {**super().get_config(), "tokenizer": keras.saving.serialize_keras_object(self.tokenizer)}

    @classmethod
    def from_config(cls, config):
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)


def test_vocabulary_path_in_config_refused_in_safe_mode(tmp_path):
    """R15: a .keras whose tokenizer config names a file outside the archive is refused."""
    outside = tmp_path / "outside_vocab.txt"
    outside.write_text("\n".join(SMALL_VOCAB) + "\n", encoding="utf-8")
    inputs = keras.Input(shape=(), dtype="string")
    model = keras.Model(inputs, _dense(BertTokenizer(SMALL_VOCAB), inputs))
    good, bad = str(tmp_path / "good.keras"), str(tmp_path / "bad.keras")
    model.save(good)
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(bad, "w") as dst:
        for item in src.namelist():
            data = src.read(item)
            if item == "config.json":
                data = data.replace(b'"vocabulary": null', b'"vocabulary": ' + json.dumps(str(outside)).encode())
            elif item.endswith("vocabulary.txt"):
                continue  # the tokenizer must not fall back to reading the outside file
            dst.writestr(item, data)
    with pytest.raises((ValueError, TypeError), match="safe mode"):
        keras.saving.load_model(bad, safe_mode=True)
    config = BertTokenizer(SMALL_VOCAB).get_config()
    config["vocabulary"] = str(outside)  # outside safe mode a path is an ordinary argument
    assert BertTokenizer.from_config(config).vocabulary_size() == len(SMALL_VOCAB)
