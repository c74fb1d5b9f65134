"""The writers' tokenizer spec `{"preset": dir}` takes the preset's casing, not always lower case."""

import numpy as np

from keras_bert_zoo.data.pretraining_writer import build_tokenizer
from keras_bert_zoo.models.bert_backbone import BertBackbone

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _preset(directory, tokens):
    backbone = BertBackbone(vocabulary_size=len(tokens), num_layers=1, num_heads=2, hidden_dim=8,
                            intermediate_dim=16, max_sequence_length=16)
    return backbone.save_to_preset(str(directory), vocabulary=tokens)


def test_preset_spec_keeps_a_cased_vocabulary_cased(tmp_path):
    cased = _preset(tmp_path / "model_a", SPECIALS + ["Paris", "paris", "is", "."])
    uncased = _preset(tmp_path / "model_b", SPECIALS + ["paris", "is", "."])
    ids = lambda tok: np.asarray(tok(["Paris is"]).to_list()[0]).tolist()  # noqa: E731
    assert ids(build_tokenizer({"preset": cased})) == [5, 7]
    assert ids(build_tokenizer({"preset": uncased})) == [5, 6]
    assert ids(build_tokenizer({"preset": cased, "lowercase": True})) == [6, 7]  # an explicit choice wins
