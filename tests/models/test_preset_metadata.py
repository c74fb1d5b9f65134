"""Presets describe themselves (issue #58): the registry's metadata in `list_presets()`'s table and
in `Class.presets` (a dict, as keras-hub's); an `org/name` or Kaggle-shaped preset that is no
local path is answered with its `hf://` / `kaggle://` handle; typo suggestions come best first."""

import os

import pytest
import safetensors.numpy

import keras_bert_zoo as kbz
from keras_bert_zoo.presets import registry


def test_list_presets_prints_a_table_of_what_each_preset_is():
    table = kbz.list_presets()
    assert isinstance(table, list) and "bert_base_en_uncased" in table and table == sorted(table)
    lines = str(table).splitlines()
    assert lines[0].split() == ["name", "params", "size", "L/H/A", "casing", "language", "source", "license"]
    assert len(lines) == len(table) + 2  # the header, its rule, a row per preset
    row = next(line for line in lines if line.startswith("bert_base_en_uncased "))
    assert row.split() == ["bert_base_en_uncased", "109.5M", "440", "MB", "12/768/12", "uncased", "en",
                           "google-research/bert", "Apache-2.0"]
    assert next(line for line in lines if line.startswith("bert_base_zh ")).split()[5:7] == ["uncased", "zh"]
    assert next(line for line in lines if line.startswith("bert_large_en ")).split()[5] == "cased"
    assert repr(table) == str(table)
    assert table.metadata["bert_tiny_en_uncased"]["params"] == 4_385_920


def test_class_presets_are_dicts_of_metadata_as_in_keras_hub():
    for cls in (kbz.BertBackbone, kbz.BertClassifier, kbz.BertTokenClassifier, kbz.BertSpanExtractor,
                kbz.BertPreprocessor):
        presets = cls.presets
        assert isinstance(presets, dict) and sorted(presets) == list(kbz.list_presets()), cls
    metadata = kbz.BertClassifier.presets["bert_base_en_uncased"]["metadata"]
    assert {k: metadata[k] for k in ("params", "num_layers", "hidden_dim", "num_heads", "lowercase", "language",
                                     "source", "license", "path")} == {
        "params": 109_482_240, "num_layers": 12, "hidden_dim": 768, "num_heads": 12, "lowercase": True,
        "language": "en", "source": "google-research/bert", "license": "Apache-2.0", "path": "bert"}
    assert metadata["description"] and metadata["url"].endswith("uncased_L-12_H-768_A-12.zip")
    assert "uncased_L-12_H-768_A-12" in metadata["aliases"]


def test_the_size_on_disk_is_what_a_converted_preset_holds(tmp_path):
    """A converted Google checkpoint keeps the MLM and NSP heads: the size counts them, in float32."""
    config = dict(vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                  max_sequence_length=24, num_segments=2)
    pretrainer = kbz.BertPretrainer(kbz.BertBackbone(**config))
    path = pretrainer.save_to_preset(str(tmp_path / "p"), vocabulary=[f"t{i}" for i in range(40)])
    tensors = safetensors.numpy.load_file(os.path.join(path, "weights.safetensors"))
    stored = sum(array.nbytes for array in tensors.values())
    assert stored == 4 * (pretrainer.backbone.count_params() + registry.pretraining_head_parameters(config))


def test_an_hf_or_kaggle_shaped_name_is_answered_with_its_handle():
    with pytest.raises(ValueError) as error:
        kbz.BertBackbone.from_preset("sentence-transformers/all-MiniLM-L6-v2", load_weights=False)
    assert str(error.value) == (
        f"No such directory or file: 'sentence-transformers/all-MiniLM-L6-v2' "
        f"({os.path.abspath('sentence-transformers/all-MiniLM-L6-v2')} does not exist). If "
        "'sentence-transformers/all-MiniLM-L6-v2' is a Hugging Face Hub model id, pass "
        "'hf://sentence-transformers/all-MiniLM-L6-v2'.")
    with pytest.raises(ValueError, match=r"pass 'hf://google-bert/bert-base-uncased@v1\.0'\.$"):
        kbz.BertClassifier.from_preset("google-bert/bert-base-uncased@v1.0", load_weights=False)
    with pytest.raises(ValueError, match=r"is a Kaggle Models handle, pass "
                                         r"'kaggle://keras/bert/keras/bert_tiny_en_uncased/2'\.$"):
        kbz.BertBackbone.from_preset("keras/bert/keras/bert_tiny_en_uncased/2", load_weights=False)
    for path in ("runs/clf/preset", "my_models/model.zip", "./runs/clf"):  # no hub shape: no hub hint
        with pytest.raises(ValueError) as error:
            kbz.BertBackbone.from_preset(path, load_weights=False)
        assert "hf://" not in str(error.value) and "kaggle://" not in str(error.value), path


@pytest.mark.parametrize("typo, meant", [("bert_base_en_uncasd", "bert_base_en_uncased"),
                                         ("bert_tiny_en_uncase", "bert_tiny_en_uncased"),
                                         ("bert_larg_en", "bert_large_en"),
                                         ("uncased_L-12_H-768_A-13", "bert_base_en_uncased")])
def test_typo_suggestions_come_best_first(typo, meant):
    with pytest.raises(ValueError) as error:
        registry.resolve_name(typo)
    suggested = str(error.value).split("Did you mean: ")[1].split("?")[0].split(", ")
    assert suggested[0] == meant and len(suggested) == len(set(suggested)) <= 5
