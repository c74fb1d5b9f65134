"""Writers: our preset (`model.save_to_preset`, atomic, R5), Google TF1 and HF safetensors, the CLI."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo.presets import loading, config as preset_config, preset_format
from keras_bert_zoo.serving import client
from tests.weights import weights_testlib as lib
from tools import convert_checkpoint

VOCAB = os.path.join(lib.fixture_dir("gelu"), "vocab.txt")


def test_save_to_preset_round_trip_with_heads(tmp_path):
    exp = lib.expected("gelu_new")
    pretrainer = lib.build_pretrainer(lib.fixture_dir("gelu_new"))
    target = str(tmp_path / "preset")
    pretrainer.save_to_preset(target, vocabulary=VOCAB)
    assert sorted(os.listdir(target)) == ["README.md", "config.json", "manifest.json", "vocab.txt",
                                          "weights.safetensors"]  # README.md: a task's model card
    config = json.load(open(os.path.join(target, "config.json")))
    assert config["backbone"]["activation"] == "gelu_approximate" and config["heads"] == ["predictions", "seq_relationship"]
    reloaded = lib.build_pretrainer(target)
    lib.assert_matches_hf(lib.pretrainer_outputs(reloaded, exp), exp)
    assert loading.get_preset_vocabulary(target) == os.path.join(target, "vocab.txt")


def _files(directory):
    return {name: open(os.path.join(directory, name), "rb").read() for name in sorted(os.listdir(directory))}


@pytest.mark.parametrize("kind", ["backbone", "pretrainer"])
def test_save_to_preset_writes_the_writers_files_and_a_tasks_settings(tmp_path, kind):
    """One way to save: `model.save_to_preset(directory)`: a backbone's files are the low-level
    writer's; a pretrainer's add its settings."""
    pretrainer = lib.build_pretrainer(lib.fixture_dir("gelu"))
    model = pretrainer.backbone if kind == "backbone" else pretrainer
    method = model.save_to_preset(str(tmp_path / "method"), vocabulary=VOCAB)
    assert loading.write_model_preset(model, str(tmp_path / "writer"), vocabulary=VOCAB)
    if kind == "backbone":
        assert _files(tmp_path / "writer") == _files(method)
        assert loading.read_task_config(method) == {}
    else:  # the method adds the task's settings, which serving's loader needs
        assert loading.read_task_config(method) == {
            "task": {"class_name": "BertPretrainer", "config": {"nsp": True, "objective": "mlm"}},
            "pretraining": {"nsp": True, "objective": "mlm"}}  # what a task built from it reads (pooling)
        loaded = client.load_task(method)
        assert isinstance(loaded, BertPretrainer)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded.nsp_head.kernel),
                                      keras.ops.convert_to_numpy(pretrainer.nsp_head.kernel))


def test_public_names_of_what_other_rooms_need():
    pretrainer = lib.build_pretrainer(lib.fixture_dir("gelu"), load_weights=False)
    assert loading.backbone_of(pretrainer) is pretrainer.backbone is loading.backbone_of(pretrainer.backbone)
    with pytest.raises(ValueError, match="backbone or task"):
        loading.backbone_of(object())
    assert preset_format.vocabulary_bytes(["a", b"b"]) == b"a\nb\n" and preset_format.vocabulary_bytes(None) is None
    assert preset_format.vocabulary_bytes(VOCAB) == open(VOCAB, "rb").read()


def test_failed_second_save_keeps_the_good_preset(tmp_path, monkeypatch):
    # R5
    exp = lib.expected("gelu")
    pretrainer = lib.build_pretrainer(lib.fixture_dir("gelu"))
    target = str(tmp_path / "preset")
    pretrainer.save_to_preset(target, vocabulary=VOCAB)
    before = {n: open(os.path.join(target, n), "rb").read() for n in os.listdir(target)}

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(preset_format.files, "atomic_write_json", boom)
    pretrainer.backbone.pooled_dense.bias.assign(np.ones(16, "float32"))
    with pytest.raises(OSError, match="disk full"):
        pretrainer.save_to_preset(target, vocabulary=VOCAB)
    monkeypatch.undo()
    assert {n: open(os.path.join(target, n), "rb").read() for n in os.listdir(target)} == before
    assert sorted(os.listdir(tmp_path)) == ["preset"]
    lib.assert_matches_hf(lib.pretrainer_outputs(lib.build_pretrainer(target), exp), exp)


def test_save_refuses_a_foreign_directory(tmp_path):
    backbone = lib.build_pretrainer(lib.fixture_dir("gelu"), load_weights=False).backbone
    (tmp_path / "mine.txt").write_text("precious")
    with pytest.raises(ValueError, match="not a keras_bert_zoo preset"):
        backbone.save_to_preset(str(tmp_path))
    assert (tmp_path / "mine.txt").read_text() == "precious"


def _tensors(path):
    return loading.read_preset_tensors(path)[0]


def test_cli_google_hf_ours_round_trip(tmp_path):
    exp = lib.expected("gelu_new")
    source = lib.fixture_dir("gelu_new")
    google, hf, ours = (str(tmp_path / n) for n in ("google", "hf", "ours"))
    convert_checkpoint.main([source, google, "--to", "google"])
    convert_checkpoint.main([google, hf, "--to", "hf"])
    convert_checkpoint.main([hf, ours, "--to", "keras_bert_zoo"])
    reference = _tensors(source)
    for path in (google, hf, ours):
        got = _tensors(path)
        assert sorted(got) == sorted(reference)
        for name in reference:
            np.testing.assert_array_equal(got[name], reference[name], err_msg=f"{path}: {name}")
        assert preset_config.read_local_config(path) == preset_config.read_local_config(source)
    lib.assert_matches_hf(lib.pretrainer_outputs(lib.build_pretrainer(ours), exp), exp)
    assert open(os.path.join(google, "vocab.txt")).read() == open(os.path.join(source, "vocab.txt")).read()


def test_google_writer_restores_in_tf1_graph_under_original_names(tmp_path):
    target = str(tmp_path / "google")
    convert_checkpoint.main([lib.fixture_dir("gelu"), target, "--to", "google"])
    want = lib.google_from_hf(lib.hf_tensors("gelu"), 2)
    assert dict(tf.train.list_variables(os.path.join(target, "bert_model.ckpt"))) == {
        n: list(v.shape) for n, v in want.items()
    }
    graph = tf.Graph()
    with graph.as_default():
        variables = {n: tf.compat.v1.Variable(np.zeros_like(v), name=n) for n, v in want.items()}
        saver = tf.compat.v1.train.Saver(list(variables.values()))
        with tf.compat.v1.Session(graph=graph) as sess:
            saver.restore(sess, os.path.join(target, "bert_model.ckpt"))
            for name, var in variables.items():
                np.testing.assert_array_equal(sess.run(var), want[name], err_msg=name)
    config = json.load(open(os.path.join(target, "bert_config.json")))
    assert config["hidden_act"] == "gelu" and config["vocab_size"] == 64


def test_hf_writer_loads_in_transformers(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    exp = lib.expected("gelu")
    pretrainer = lib.build_pretrainer(lib.fixture_dir("gelu"))
    google = str(tmp_path / "google")
    pretrainer.save_to_preset(str(tmp_path / "ours"), vocabulary=VOCAB)
    convert_checkpoint.main([str(tmp_path / "ours"), google, "--to", "google"])
    hf = str(tmp_path / "hf")
    convert_checkpoint.main([google, hf, "--to", "hf"])
    model = transformers.BertForPreTraining.from_pretrained(hf, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(exp["token_ids"].astype("int64")),
                    token_type_ids=torch.tensor(exp["segment_ids"].astype("int64")),
                    attention_mask=torch.tensor(exp["padding_mask"].astype("int64")))
    mlm = np.take_along_axis(out.prediction_logits.numpy(), exp["mask_positions"][:, :, None].astype("int64"), axis=1)
    np.testing.assert_allclose(mlm, exp["mlm_logits"], atol=lib.ATOL)
    np.testing.assert_allclose(out.seq_relationship_logits.numpy(), exp["nsp_logits"], atol=lib.ATOL)


def test_real_bert_pretrainer_class_is_used():
    pretrainer = lib.build_pretrainer(lib.fixture_dir("gelu"))
    assert isinstance(pretrainer, BertPretrainer) and isinstance(pretrainer.nsp_head, keras.layers.Dense)


def test_backbone_only_preset_and_pretrainer_heads_missing(tmp_path, caplog):
    exp = lib.expected("gelu")
    backbone = lib.build_pretrainer(lib.fixture_dir("gelu")).backbone
    target = str(tmp_path / "backbone_only")
    backbone.save_to_preset(target, vocabulary=["[PAD]", "[UNK]"])
    assert json.load(open(os.path.join(target, "config.json")))["heads"] == []
    assert open(os.path.join(target, "vocab.txt")).read() == "[PAD]\n[UNK]\n"
    with caplog.at_level("WARNING", logger="keras_bert_zoo.weights"):
        pretrainer = lib.build_pretrainer(target)
    assert any("no mlm/nsp head" in r.getMessage() for r in caplog.records)
    lib.assert_matches_hf(lib.pretrainer_outputs(pretrainer, exp), exp, keys=("sequence_output", "pooled_output"))
    with pytest.raises(ValueError, match="no mlm and no nsp head"):
        loading.load_pretrainer_weights(pretrainer, target, missing_heads="error")
