"""Our outputs equal HF transformers' (committed fixtures) to 1e-4, from safetensors and
from a Google TF1 checkpoint written with `tf.compat.v1.train.Saver`; both GELU variants."""

import json
import os
import shutil

import numpy as np
import pytest
import safetensors.numpy

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.presets import loading, config as preset_config
from tests.weights import weights_testlib as lib


@pytest.mark.parametrize("variant", lib.VARIANTS)
def test_safetensors_pretrainer_matches_hf(variant):
    exp = lib.expected(variant)
    pretrainer = lib.build_pretrainer(lib.fixture_dir(variant))
    want_act = "gelu" if variant == "gelu" else "gelu_approximate"
    assert pretrainer.backbone.activation == want_act
    lib.assert_matches_hf(lib.pretrainer_outputs(pretrainer, exp), exp)


@pytest.mark.parametrize("variant", lib.VARIANTS)
def test_google_tf1_checkpoint_matches_hf(variant, tmp_path):
    exp = lib.expected(variant)
    google_dir = lib.make_google_dir(variant, str(tmp_path / "uncased_L-2_H-16_A-2"))
    pretrainer = lib.build_pretrainer(google_dir)
    lib.assert_matches_hf(lib.pretrainer_outputs(pretrainer, exp), exp)


def test_activation_matters():
    # The same gelu_new weights in an exact-GELU model must NOT match HF: the test above
    # passes because the activation is read from config.json, not by luck.
    exp = lib.expected("gelu_new")
    backbone = BertBackbone.from_preset(lib.fixture_dir("gelu_new"), activation="gelu", dropout=0.0)
    out = backbone(lib.inputs_of(exp), training=False)
    with pytest.raises(AssertionError):
        lib.assert_matches_hf(out, exp, keys=("sequence_output",))


def _rewrite(tmp_path, variant, transform):
    """Copies the fixture with its safetensors keys rewritten by `transform(dict)`."""
    target = tmp_path / "hf"
    shutil.copytree(lib.fixture_dir(variant), target)
    tensors = transform(dict(lib.hf_tensors(variant)))
    safetensors.numpy.save_file(tensors, str(target / "model.safetensors"))
    return str(target)


def test_bare_model_old_layernorm_names_and_tied_decoder(tmp_path):
    def transform(t):
        out = {}
        for k, v in t.items():
            if k.startswith("bert."):
                k = k[len("bert."):]
            k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
            out[k] = v
        out["cls.predictions.decoder.weight"] = t["bert.embeddings.word_embeddings.weight"]
        out["cls.predictions.decoder.bias"] = t["cls.predictions.bias"]
        out["embeddings.position_ids"] = np.arange(32, dtype="int64")[None]
        return out

    exp = lib.expected("gelu")
    pretrainer = lib.build_pretrainer(_rewrite(tmp_path, "gelu", transform))
    lib.assert_matches_hf(lib.pretrainer_outputs(pretrainer, exp), exp)


def test_untied_decoder_is_refused(tmp_path):
    def transform(t):
        t["cls.predictions.decoder.weight"] = t["bert.embeddings.word_embeddings.weight"] + 1.0
        return t

    with pytest.raises(ValueError, match="cls.predictions.decoder.weight"):
        loading.read_preset_tensors(_rewrite(tmp_path, "gelu", transform))


def test_unexpected_tensor_is_named(tmp_path):
    def transform(t):
        t["bert.encoder.layer.0.attention.self.rotary.weight"] = np.zeros((2, 2), "float32")
        t["lm_head.weight"] = np.zeros((2, 2), "float32")
        return t

    with pytest.raises(ValueError, match="lm_head.weight"):
        loading.read_preset_tensors(_rewrite(tmp_path, "gelu", transform))


def test_missing_tensor_is_named_and_nothing_assigned(tmp_path):
    path = _rewrite(tmp_path, "gelu", lambda t: {k: v for k, v in t.items() if "layer.1.output.dense.bias" not in k})
    backbone = BertBackbone.from_preset(path, load_weights=False)
    before = [np.array(w) for w in backbone.weights]
    with pytest.raises(ValueError, match="bert/encoder/layer_1/output/dense/bias"):
        loading.load_backbone_weights(backbone, path)
    assert all(np.array_equal(b, np.array(w)) for b, w in zip(before, backbone.weights))


def test_shape_mismatch_and_extra_layer_are_errors():
    path = lib.fixture_dir("gelu")
    wrong_width = BertBackbone(vocabulary_size=64, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=32,
                               max_sequence_length=32)
    with pytest.raises(ValueError, match="Shape mismatch for bert/embeddings/word_embeddings"):
        loading.load_backbone_weights(wrong_width, path)
    one_layer = BertBackbone(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             max_sequence_length=32)
    with pytest.raises(ValueError, match="layer_1"):
        loading.load_backbone_weights(one_layer, path)


def test_shorter_max_sequence_length_uses_first_positions():
    exp = lib.expected("gelu")
    backbone = BertBackbone.from_preset(lib.fixture_dir("gelu"), max_sequence_length=16, dropout=0.0)
    lib.assert_matches_hf(backbone(lib.inputs_of(exp), training=False), exp, keys=("sequence_output", "pooled_output"))


def test_backbone_mapping_covers_every_weight():
    from keras_bert_zoo.weights import mapping

    backbone = BertBackbone.from_preset(lib.fixture_dir("gelu"), load_weights=False)
    targets = mapping.backbone_targets(backbone)
    assert {id(v) for v in targets.values()} == {id(v) for v in backbone.trainable_weights}
    assert len(targets) == len(backbone.trainable_weights) == 5 + 2 + 16 * 2


def test_backbone_load_reports_heads_in_one_line(caplog):
    backbone = BertBackbone.from_preset(lib.fixture_dir("gelu"), load_weights=False)
    with caplog.at_level("INFO", logger="keras_bert_zoo.weights"):
        report = loading.load_backbone_weights(backbone, lib.fixture_dir("gelu"))
    assert report["unused_heads"] == ["mlm", "nsp"]
    lines = [r.getMessage() for r in caplog.records if "not loaded" in r.getMessage()]
    assert len(lines) == 1 and "mlm (5 tensors)" in lines[0] and "nsp (2 tensors)" in lines[0]


def test_configs_from_google_and_hf_tolerate_extra_keys(tmp_path):
    hf_config = preset_config.read_local_config(lib.fixture_dir("gelu_new"))
    assert hf_config == dict(vocabulary_size=64, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                             max_sequence_length=32, num_segments=2, activation="gelu_approximate")
    google = lib.make_google_dir("gelu", str(tmp_path / "g"))
    assert preset_config.read_local_config(google) == dict(hf_config, activation="gelu")
    with open(os.path.join(google, "bert_config.json")) as f:
        config = json.load(f)
    config["hidden_act"] = "relu"
    with open(os.path.join(google, "bert_config.json"), "w") as f:
        json.dump(config, f)
    with pytest.raises(ValueError, match="hidden_act='relu'"):
        preset_config.read_local_config(google)


def test_pytorch_pickles_are_refused(tmp_path):
    # R15: the file is never opened by an unpickler; its content is a bomb if it were.
    bomb = tmp_path / "pytorch_model.bin"
    bomb.write_bytes(b"\x80\x04cos\nsystem\n(S'touch /tmp/pwned'\ntR.")
    with pytest.raises(ValueError, match="never loaded"):
        loading.read_preset_tensors(str(bomb))
    hf_dir = tmp_path / "hf_bin"
    hf_dir.mkdir()
    shutil.copy(os.path.join(lib.fixture_dir("gelu"), "config.json"), hf_dir)
    shutil.copy(bomb, hf_dir / "pytorch_model.bin")
    with pytest.raises(ValueError, match="pytorch_model.bin"):
        BertBackbone.from_preset(str(hf_dir))
    pt = tmp_path / "model.pt"
    pt.write_bytes(bomb.read_bytes())
    with pytest.raises(ValueError, match="never loaded"):
        BertBackbone.from_preset(str(pt))


def test_sharded_safetensors_and_google_without_prefix(tmp_path):
    exp = lib.expected("gelu")
    tensors = dict(lib.hf_tensors("gelu"))
    target = tmp_path / "sharded"
    shutil.copytree(lib.fixture_dir("gelu"), target)
    os.remove(target / "model.safetensors")
    names = sorted(tensors)
    shards = {"model-00001-of-00002.safetensors": names[::2], "model-00002-of-00002.safetensors": names[1::2]}
    for shard, keys in shards.items():
        safetensors.numpy.save_file({k: tensors[k] for k in keys}, str(target / shard))
    index = {"metadata": {}, "weight_map": {k: s for s, keys in shards.items() for k in keys}}
    (target / "model.safetensors.index.json").write_text(json.dumps(index))
    backbone = BertBackbone.from_preset(str(target), dropout=0.0)
    lib.assert_matches_hf(backbone(lib.inputs_of(exp), training=False), exp, keys=("sequence_output", "pooled_output"))

    google = lib.google_from_hf(tensors, 2)
    bare = {k[len("bert/"):] if k.startswith("bert/") else k: v for k, v in google.items()}
    ckpt = lib.write_tf1_checkpoint(bare, str(tmp_path / "bare"), optimizer_slots=False)
    shutil.copy(os.path.join(lib.make_google_dir("gelu", str(tmp_path / "g")), "bert_config.json"), ckpt)
    backbone = BertBackbone.from_preset(ckpt, dropout=0.0)
    lib.assert_matches_hf(backbone(lib.inputs_of(exp), training=False), exp, keys=("sequence_output", "pooled_output"))


def test_defaults_load_float32_and_match_hf_on_a_cpu_with_native_bf16(monkeypatch):
    # No `dtype`, nothing forced: float32 even where bf16 is native (the old default switched
    # to mixed_bfloat16 there, 4e-2 away from HF), so a checkpoint matches its reference.
    from keras_bert_zoo.utils import precision

    monkeypatch.delenv(precision.ENV, raising=False)
    monkeypatch.setattr(precision, "has_accelerator", lambda: False)
    monkeypatch.setattr(precision, "cpu_flags", lambda path=None: frozenset({"avx2", "avx512f", "avx512_bf16"}))
    exp = lib.expected("gelu")
    backbone = BertBackbone.from_preset(lib.fixture_dir("gelu"), dropout=0.0)
    assert backbone.dtype_policy.compute_dtype == "float32"
    out = backbone(lib.inputs_of(exp), training=False)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(out[key]), exp[key], atol=1e-5, rtol=0, err_msg=key)


def test_loads_into_mixed_precision_backbone():
    exp = lib.expected("gelu")
    full = BertBackbone.from_preset(lib.fixture_dir("gelu"), dropout=0.0)
    mixed = BertBackbone.from_preset(lib.fixture_dir("gelu"), dropout=0.0, dtype="mixed_bfloat16")
    for a, b in zip(full.weights, mixed.weights):
        if "seed" not in a.path:
            np.testing.assert_array_equal(np.array(a), np.array(b), err_msg=a.path)
    out = mixed(lib.inputs_of(exp), training=False)
    np.testing.assert_allclose(np.asarray(out["pooled_output"], "float32"), exp["pooled_output"], atol=0.1)


def test_loads_by_google_checkpoint_prefix(tmp_path):
    # Users often pass the checkpoint prefix (`…/bert_model.ckpt`), as the original flags do.
    exp = lib.expected("gelu")
    directory = lib.make_google_dir("gelu", str(tmp_path / "g"))
    prefix = os.path.join(directory, "bert_model.ckpt")
    assert not os.path.exists(prefix) and os.path.exists(prefix + ".index")
    backbone = BertBackbone.from_preset(prefix, dropout=0.0)
    lib.assert_matches_hf(backbone(lib.inputs_of(exp), training=False), exp, keys=("sequence_output", "pooled_output"))
