"""An HF folder saved by transformers 5 (tokenizer.json, no vocab.txt): the same vocabulary, casing
and ids as the folder with its vocab.txt; the user's folder is not written to."""

import json
import os
import shutil

import numpy as np
import pytest

from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.presets import hf_tokenizer, loading, sources

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "weights", "fixtures", "hf_tiny_gelu")
SENTENCES = ["Hello, World!", "the quick brown fox", "unknown wordsxyz"]


def tokenizer_json(tokens, lowercase=True):
    """What transformers 5 writes for a BertTokenizerFast (the parts we read)."""
    return {"version": "1.0", "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                             "strip_accents": None, "lowercase": lowercase},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                      "max_input_chars_per_word": 100, "vocab": {t: i for i, t in enumerate(tokens)}}}


def without_vocab_txt(tmp_path, lowercase=True, config=None):
    folder = tmp_path / "hf5"
    shutil.copytree(FIXTURE, folder)
    tokens = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
    os.remove(folder / "vocab.txt")
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer_json(tokens, lowercase)), encoding="utf-8")
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder, tokens


def test_a_folder_without_vocab_txt_reads_its_tokenizer_json(tmp_path):
    folder, tokens = without_vocab_txt(tmp_path, config={"do_lower_case": True, "tokenizer_class": "BertTokenizer"})
    before = sorted(os.listdir(folder))
    path = loading.get_preset_vocabulary(str(folder))
    assert open(path, encoding="utf-8").read().splitlines() == tokens
    assert not path.startswith(str(folder)) and sorted(os.listdir(folder)) == before  # the cache, not the folder
    with_txt = BertClassifier.from_preset(FIXTURE, num_classes=2)
    with_json = BertClassifier.from_preset(str(folder), num_classes=2)
    assert with_json.preprocessor.tokenizer.lowercase == with_txt.preprocessor.tokenizer.lowercase
    for key, value in with_txt.preprocessor(SENTENCES).items():
        np.testing.assert_array_equal(with_json.preprocessor(SENTENCES)[key], value)
    assert sorted(os.listdir(folder)) == before


def test_the_casing_comes_from_tokenizer_json_unless_tokenizer_config_states_it(tmp_path):
    folder, _ = without_vocab_txt(tmp_path, lowercase=False)
    assert sources.tokenizer_settings("hf", str(folder)) == {"lowercase": False}
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}), encoding="utf-8")
    assert sources.tokenizer_settings("hf", str(folder)) == {"lowercase": True}


def test_a_tokenizer_json_that_is_not_a_wordpiece_vocabulary_is_named(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps({"model": {"type": "BPE", "vocab": {"a": 0}}}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"tokenizer.json: its model is 'BPE', not a WordPiece vocabulary"):
        hf_tokenizer.wordpiece_tokens(str(path))
    path.write_text(json.dumps(tokenizer_json(["[PAD]", "a"]) | {"model": {"type": "WordPiece",
                                                                          "vocab": {"[PAD]": 0, "a": 2}}}))
    with pytest.raises(ValueError, match="no token has id 1"):
        hf_tokenizer.wordpiece_tokens(str(path))


def test_transformers_5_saved_tokenizer_gives_hfs_ids(tmp_path):
    transformers = pytest.importorskip("transformers")
    folder = tmp_path / "saved"
    shutil.copytree(FIXTURE, folder)
    hf = transformers.BertTokenizerFast(vocab=str(folder / "vocab.txt"), do_lower_case=True)
    os.remove(folder / "vocab.txt")
    hf.save_pretrained(str(folder))
    ours = BertClassifier.from_preset(str(folder), num_classes=2).preprocessor
    packed = ours(SENTENCES)
    for row, sentence in enumerate(SENTENCES):
        ids = hf(sentence)["input_ids"]
        np.testing.assert_array_equal(packed["token_ids"][row][: len(ids)], ids)
