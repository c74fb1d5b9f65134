import keras
import pytest

import keras_bert_zoo
from keras_bert_zoo import BertBackbone
from keras_bert_zoo.presets import registry as presets
from keras_bert_zoo.layers import bert_attention, bert_embeddings, transformer_encoder
from keras_bert_zoo.models import bert_backbone

REGISTRY = presets.load_registry()
# Published parameter counts (with pooler) of the released checkpoints.
PUBLISHED = {"bert_base_en_uncased": 109_482_240, "bert_large_en_uncased": 335_141_888}


@pytest.fixture
def fast_init(monkeypatch):
    """Zero initialisation: building BERT-Large's 335M weights then takes ~1 s instead of ~20 s
    of truncated-normal sampling. Architecture and parameter counts are unaffected."""
    for module in (bert_attention, bert_embeddings, transformer_encoder, bert_backbone):
        monkeypatch.setattr(module, "bert_initializer", lambda: keras.initializers.Zeros())


def _expected_params(c):
    v, h, i, p, s, n = (c[k] for k in ("vocabulary_size", "hidden_dim", "intermediate_dim", "max_sequence_length", "num_segments", "num_layers"))
    embeddings = (v + p + s) * h + 2 * h
    layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
    return embeddings + n * layer + h * h + h


def test_registry_lists_every_released_architecture():
    small = {(e["config"]["num_layers"], e["config"]["hidden_dim"]) for e in REGISTRY.values() if e["config"]["vocabulary_size"] == 30522 and e["config"]["num_layers"] <= 12}
    assert small >= {(l, h) for l in (2, 4, 6, 8, 10, 12) for h in (128, 256, 512, 768)}
    vocab = {name: e["config"]["vocabulary_size"] for name, e in REGISTRY.items()}
    assert vocab["bert_base_en"] == 28996 and vocab["bert_base_multi"] == 119547
    assert vocab["bert_base_multi_uncased"] == 105879 and vocab["bert_base_zh"] == 21128
    assert REGISTRY["bert_large_wwm_en_uncased"]["whole_word_masking"]
    for entry in REGISTRY.values():
        c = entry["config"]
        assert c["num_heads"] == c["hidden_dim"] // 64 and c["intermediate_dim"] == 4 * c["hidden_dim"]
        assert entry["weights"]["url"].startswith("https://storage.googleapis.com/bert_models/")
        assert entry["license"] and entry["description"] and isinstance(entry["lowercase"], bool)
        assert entry["parameters"] == _expected_params(c)


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_preset_builds_the_exact_architecture(name, fast_init):
    model = BertBackbone.from_preset(name, load_weights=False)
    config = REGISTRY[name]["config"]
    assert model.count_params() == REGISTRY[name]["parameters"]
    assert (model.num_layers, model.hidden_dim, model.num_heads, model.vocabulary_size) == (
        config["num_layers"], config["hidden_dim"], config["num_heads"], config["vocabulary_size"])
    if name in PUBLISHED:
        assert model.count_params() == PUBLISHED[name]
    keras.utils.clear_session()


@pytest.mark.parametrize(
    "alias, name",
    [
        ("uncased_L-12_H-768_A-12", "bert_base_en_uncased"),
        ("uncased_L-2_H-128_A-2", "bert_tiny_en_uncased"),
        ("bert_l2_h128_en_uncased", "bert_tiny_en_uncased"),
        ("uncased_L-4_H-256_A-4", "bert_mini_en_uncased"),
        ("uncased_L-4_H-512_A-8", "bert_small_en_uncased"),
        ("uncased_L-8_H-512_A-8", "bert_medium_en_uncased"),
        ("wwm_cased_L-24_H-1024_A-16", "bert_large_wwm_en"),
        ("multi_cased_L-12_H-768_A-12", "bert_base_multi"),
        ("multilingual_L-12_H-768_A-12", "bert_base_multi_uncased"),
        ("chinese_L-12_H-768_A-12.zip", "bert_base_zh"),
        ("BERT_BASE_EN_UNCASED", "bert_base_en_uncased"),
    ],
)
def test_google_folder_names_and_aliases_resolve(alias, name):
    assert presets.resolve_name(alias) == name


def test_unknown_name_lists_close_matches():
    with pytest.raises(ValueError, match="Did you mean: .*bert_base_en_uncased"):
        BertBackbone.from_preset("bert_base_en_uncase", load_weights=False)
    with pytest.raises(ValueError, match="Unknown preset 'gpt2'"):
        BertBackbone.from_preset("gpt2", load_weights=False)


def test_overrides_and_public_listing():
    model = BertBackbone.from_preset("bert_tiny_en_uncased", load_weights=False, dropout=0.0, max_sequence_length=64)
    assert model.dropout == 0.0 and model.max_sequence_length == 64
    assert "bert_base_en_uncased" in keras_bert_zoo.list_presets()
    assert keras_bert_zoo.presets.list_presets() == keras_bert_zoo.list_presets()


def test_a_backbone_saves_itself_and_loads_back(tmp_path):
    model = BertBackbone(vocabulary_size=8, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
                         max_sequence_length=16, dropout=0.0, activation="gelu_approximate")
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c"]
    directory = model.save_to_preset(str(tmp_path / "mine"), vocabulary=tokens)
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == [
        "config.json", "manifest.json", "vocab.txt", "weights.safetensors"]
    assert keras_bert_zoo.get_preset_vocabulary(directory) == str(tmp_path / "mine" / "vocab.txt")
    restored = BertBackbone.from_preset(directory)
    assert restored.get_config() == model.get_config() | {"name": restored.name}
    for a, b in zip(model.weights, restored.weights):
        assert (keras.ops.convert_to_numpy(a) == keras.ops.convert_to_numpy(b)).all(), a.path
