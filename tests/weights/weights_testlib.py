"""Shared pieces of the weights tests: fixtures, an independent HF→Google renaming
(written from REFERENCE.md's table, not from the package's mapping), a TF1 `Saver`
checkpoint writer, and a model built the way `BertPretrainer` is."""

import os
import shutil

import keras
import numpy as np
import safetensors.numpy
import tensorflow as tf

from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
VARIANTS = ("gelu", "gelu_new")
ATOL = 1e-4


def fixture_dir(variant):
    return os.path.join(FIXTURES, f"hf_tiny_{variant}")


def expected(variant):
    with np.load(os.path.join(fixture_dir(variant), "expected.npz"), allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def inputs_of(exp):
    return {k: exp[k] for k in ("token_ids", "segment_ids", "padding_mask")}


def hf_tensors(variant):
    return safetensors.numpy.load_file(os.path.join(fixture_dir(variant), "model.safetensors"))


def google_from_hf(hf, num_layers):
    """The REFERENCE.md table, spelled out: HF key → Google variable (T = transpose)."""
    out = {}

    def put(google, key, transpose=False):
        out[google] = hf[key].T if transpose else hf[key]

    for emb in ("word_embeddings", "position_embeddings", "token_type_embeddings"):
        put(f"bert/embeddings/{emb}", f"bert.embeddings.{emb}.weight")
    put("bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight")
    put("bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias")
    for i in range(num_layers):
        g, h = f"bert/encoder/layer_{i}", f"bert.encoder.layer.{i}"
        dense = {
            "attention/self/query": "attention.self.query",
            "attention/self/key": "attention.self.key",
            "attention/self/value": "attention.self.value",
            "attention/output/dense": "attention.output.dense",
            "intermediate/dense": "intermediate.dense",
            "output/dense": "output.dense",
        }
        for gname, hname in dense.items():
            put(f"{g}/{gname}/kernel", f"{h}.{hname}.weight", transpose=True)
            put(f"{g}/{gname}/bias", f"{h}.{hname}.bias")
        for gname, hname in (("attention/output/LayerNorm", "attention.output.LayerNorm"), ("output/LayerNorm", "output.LayerNorm")):
            put(f"{g}/{gname}/gamma", f"{h}.{hname}.weight")
            put(f"{g}/{gname}/beta", f"{h}.{hname}.bias")
    put("bert/pooler/dense/kernel", "bert.pooler.dense.weight", transpose=True)
    put("bert/pooler/dense/bias", "bert.pooler.dense.bias")
    put("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight", transpose=True)
    put("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias")
    put("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight")
    put("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias")
    put("cls/predictions/output_bias", "cls.predictions.bias")
    put("cls/seq_relationship/output_weights", "cls.seq_relationship.weight")
    put("cls/seq_relationship/output_bias", "cls.seq_relationship.bias")
    return out


def write_tf1_checkpoint(tensors, directory, optimizer_slots=True):
    """Writes `bert_model.ckpt` with `tf.compat.v1.train.Saver` in graph mode, as the
    original `run_pretraining.py` does (with Adam slots and `global_step`)."""
    os.makedirs(directory, exist_ok=True)
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.Variable(np.asarray(v, "float32"), name=n) for n, v in tensors.items()]
        if optimizer_slots:
            for name, value in list(tensors.items())[:3]:
                for slot in ("adam_m", "adam_v"):
                    variables.append(tf.compat.v1.Variable(np.zeros_like(value, "float32"), name=f"{name}/{slot}"))
            variables.append(tf.compat.v1.Variable(np.int64(1000), name="global_step"))
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            saver.save(sess, os.path.join(directory, "bert_model.ckpt"), write_meta_graph=False)
    # Google's zips hold no `checkpoint` state file.
    os.remove(os.path.join(directory, "checkpoint"))
    return directory


def make_google_dir(variant, directory):
    """A Google-layout directory (ckpt + bert_config.json + vocab.txt) from the HF fixture."""
    exp_dir = fixture_dir(variant)
    hf = hf_tensors(variant)
    import json

    with open(os.path.join(exp_dir, "config.json")) as f:
        hf_config = json.load(f)
    write_tf1_checkpoint(google_from_hf(hf, hf_config["num_hidden_layers"]), directory)
    bert_config = {k: hf_config[k] for k in (
        "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
        "hidden_act", "hidden_dropout_prob", "attention_probs_dropout_prob", "max_position_embeddings",
        "type_vocab_size", "initializer_range")}
    bert_config["directionality"] = "bidi"  # an extra key, as in the Chinese config
    with open(os.path.join(directory, "bert_config.json"), "w") as f:
        json.dump(bert_config, f)
    shutil.copy(os.path.join(exp_dir, "vocab.txt"), directory)
    return directory


def build_pretrainer(preset, load_weights=True):
    """A `BertPretrainer` with dropout 0 (inference equality), weights from `preset`."""
    keras.utils.clear_session()
    return BertPretrainer.from_preset(preset, load_weights=load_weights, dropout=0.0)


def pretrainer_outputs(pretrainer, exp):
    x = dict(inputs_of(exp), mask_positions=exp["mask_positions"])
    out = pretrainer(x, training=False)
    backbone_out = pretrainer.backbone(inputs_of(exp), training=False)
    return {
        "sequence_output": backbone_out["sequence_output"],
        "pooled_output": backbone_out["pooled_output"],
        "mlm_logits": out["mlm_logits"],
        "nsp_logits": out["nsp_logits"],
    }


def assert_matches_hf(outputs, exp, keys=("sequence_output", "pooled_output", "mlm_logits", "nsp_logits")):
    mask = exp["padding_mask"].astype(bool)
    for key in keys:
        actual = keras.ops.convert_to_numpy(outputs[key])
        want = exp[key]
        if key == "sequence_output":  # padded positions are not defined outputs
            actual, want = actual[mask], want[mask]
        np.testing.assert_allclose(actual, want, atol=ATOL, rtol=0, err_msg=key)

