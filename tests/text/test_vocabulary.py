"""Vocabulary loading/validation (R9) and learning."""

import subprocess
import sys

import pytest

from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.text.vocabulary import (
    google_reserved_tokens,
    learn_vocabulary,
    load_vocabulary,
    save_vocabulary,
    validate_vocabulary,
)
from references.tokenizer import FullTokenizer

TOKENS = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "ü"]
CORPUS = [
    "The cat sat on the mat. The cats sat on the mats!",
    "A dog chased the cat; the dogs chased the cats.",
    "Cats and dogs, dogs and cats: the mat is flat.",
] * 20


def _write(path, data):
    path.write_bytes(data)
    return str(path)


def test_load_lf_and_crlf_give_same_ids(tmp_path):
    lf = _write(tmp_path / "lf.txt", "\n".join(TOKENS).encode() + b"\n")
    crlf = _write(tmp_path / "crlf.txt", "\r\n".join(TOKENS).encode() + b"\r\n")
    assert load_vocabulary(lf) == TOKENS
    assert load_vocabulary(crlf) == TOKENS
    texts = ["hello worlds", "Hello ü"]
    assert BertTokenizer(lf)(texts).to_list() == BertTokenizer(crlf)(texts).to_list() == [[6, 7, 8], [6, 2]]  # "ü" -> "u": [UNK]
    # The reference reads the same file the same way.
    assert FullTokenizer(crlf).convert_tokens_to_ids(FullTokenizer(crlf).tokenize("hello worlds")) == [6, 7, 8]


def test_utf8_byte_order_mark_is_not_part_of_the_first_token(tmp_path):
    # R53: a BOM made "[PAD]" on line 1 read as "\ufeff[PAD]" ("lacks ['[PAD]']").
    bom = _write(tmp_path / "bom.txt", b"\xef\xbb\xbf" + "\r\n".join(TOKENS).encode() + b"\r\n")
    assert load_vocabulary(bom) == TOKENS
    assert BertTokenizer(bom).pad_token_id == 0


def test_duplicate_token_names_token_and_both_lines(tmp_path):
    path = _write(tmp_path / "v.txt", "\n".join(TOKENS + ["world"]).encode())
    with pytest.raises(ValueError, match=r"duplicate token 'world' at lines 8 and 11"):
        load_vocabulary(path)


def test_missing_specials_listed_together(tmp_path):
    path = _write(tmp_path / "v.txt", b"[PAD]\n[UNK]\nhello\n")
    with pytest.raises(ValueError, match=r"\['\[CLS\]', '\[SEP\]', '\[MASK\]'\]"):
        load_vocabulary(path)


def test_invalid_utf8_names_line(tmp_path):
    path = _write(tmp_path / "v.txt", "\n".join(TOKENS).encode() + b"\nbad\xff\xfe\n")
    with pytest.raises(ValueError, match="line 11"):
        load_vocabulary(path)


def test_other_bad_inputs(tmp_path):
    with pytest.raises(ValueError, match="path"):
        load_vocabulary(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="empty token at line 2"):
        validate_vocabulary(["[PAD]", "", "[UNK]"])
    with pytest.raises(ValueError, match="list of str"):
        validate_vocabulary("hello")


def test_save_is_atomic_and_round_trips(tmp_path):
    path = tmp_path / "out.txt"
    save_vocabulary(TOKENS, path)
    assert load_vocabulary(str(path)) == TOKENS
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_reserved_tokens_match_google_ids():
    reserved = google_reserved_tokens()
    assert reserved.index("[PAD]") == 0 and reserved.index("[UNK]") == 100
    assert reserved[101:104] == ["[CLS]", "[SEP]", "[MASK]"] and reserved[99] == "[unused98]"


@pytest.mark.parametrize("algorithm", ["tokenizers", "tensorflow_text"])
def test_learn_vocabulary_covers_corpus(algorithm):
    if algorithm == "tokenizers":
        pytest.importorskip("tokenizers")
    tokens = learn_vocabulary(CORPUS, 60, num_unused=3, algorithm=algorithm)
    assert tokens[:9] == ["[PAD]", "[unused0]", "[unused1]", "[unused2]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", tokens[8]]
    assert len(tokens) <= 60 and len(set(tokens)) == len(tokens)
    assert "the" in tokens and "cat" in tokens
    # Every word of the corpus is covered: no [UNK] with the learned vocabulary.
    ids = BertTokenizer(tokens)(CORPUS[:3]).to_list()
    assert all(i != tokens.index("[UNK]") for row in ids for i in row)
    reference = FullTokenizer(tokens)
    assert ids[0] == reference.convert_tokens_to_ids(reference.tokenize(CORPUS[0]))


def test_learn_vocabulary_rejects_bad_arguments():
    with pytest.raises(ValueError, match="vocabulary_size"):
        learn_vocabulary(CORPUS, 10)
    with pytest.raises(ValueError, match="algorithm"):
        learn_vocabulary(CORPUS, 200, algorithm="bpe")
    with pytest.raises(ValueError, match="no words"):
        learn_vocabulary(["", "  "], 200)


def test_learn_vocab_cli(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    out = tmp_path / "vocab.txt"
    result = subprocess.run(
        [sys.executable, "tools/learn_vocab.py", str(corpus), "--output", str(out),
         "--vocabulary-size", "150", "--num-unused", "5"],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    tokens = load_vocabulary(str(out))
    assert tokens[6] == "[UNK]" and "cats" in tokens
    assert "counting words" in result.stderr
