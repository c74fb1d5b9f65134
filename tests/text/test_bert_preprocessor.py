"""BertPreprocessor: strings and pairs -> backbone inputs; presets; saving."""

import json
import os
import time
import warnings

import keras
import pytest
import tensorflow as tf

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.text import BertPreprocessor, BertTokenizer
from keras_bert_zoo.presets.config import preset_lowercase
from tests.helpers import assert_config_round_trip, assert_saved_model_equal
from references.tokenizer import FullTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "man", "is", "eating", ".",
         "someone", "eat", "##s", "the", "dog", "runs", "!"]


def _reference_pack(a, b, length):
    """The original run_classifier.py feature building, with its pair truncation."""
    ref = FullTokenizer(VOCAB)
    ta, tb = ref.tokenize(a), ref.tokenize(b) if b is not None else None
    if tb is None:
        ta = ta[: length - 2]
        tokens, seg = ["[CLS]"] + ta + ["[SEP]"], [0] * (len(ta) + 2)
    else:
        while len(ta) + len(tb) > length - 3:
            (ta if len(ta) > len(tb) else tb).pop()
        tokens = ["[CLS]"] + ta + ["[SEP]"] + tb + ["[SEP]"]
        seg = [0] * (len(ta) + 2) + [1] * (len(tb) + 1)
    ids = ref.convert_tokens_to_ids(tokens)
    pad = length - len(ids)
    return ids + [0] * pad, seg + [0] * pad, [1] * len(ids) + [0] * pad


def test_pairs_match_original_feature_building():
    pre = BertPreprocessor(BertTokenizer(VOCAB), sequence_length=9)
    a = ["A man is eating.", "The dog runs!", "a a a a a a a a a"]
    b = ["Someone eats.", "someone eats the dog runs", "dog"]
    out = pre((a, b))
    for i in range(3):
        expected = _reference_pack(a[i], b[i], 9)
        got = tuple(out[k][i].numpy().tolist() for k in ("token_ids", "segment_ids", "padding_mask"))
        assert got == expected
    single = pre(a)
    assert single["token_ids"][0].numpy().tolist() == _reference_pack(a[0], None, 9)[0]
    assert pre("A man is eating.")["token_ids"].numpy().tolist() == _reference_pack(a[0], None, 9)[0]
    as_list = pre([("A man is eating.", "Someone eats.")])
    assert as_list["token_ids"].numpy().tolist() == out["token_ids"][:1].numpy().tolist()


def test_dataset_map_with_labels_and_backbone():
    pre = BertPreprocessor(BertTokenizer(VOCAB), sequence_length=12)
    ds = tf.data.Dataset.from_tensor_slices(((["a man", "the dog"], ["eats", "runs"]), [0, 1]))
    x, y = next(iter(ds.batch(2).map(pre)))
    assert y.numpy().tolist() == [0, 1]
    assert x["token_ids"].numpy().tolist()[0][:5] == [2, 5, 6, 3, 11]
    backbone = BertBackbone(len(VOCAB), 2, 2, 16, 32, max_sequence_length=12)
    out = backbone(x)
    assert out["sequence_output"].shape == (2, 12, 16)


def test_huge_document_packs_quickly():
    pre = BertPreprocessor(BertTokenizer(VOCAB), sequence_length=16)
    huge = "the dog runs! " * 750_000  # 10.5 MB
    start = time.perf_counter()
    out = pre([huge])
    assert time.perf_counter() - start < 30
    assert out["token_ids"].shape == (1, 16)
    assert out["token_ids"][0, :5].numpy().tolist() == [2, 13, 14, 15, 16]


def test_config_and_keras_file(tmp_path):
    pre = BertPreprocessor(BertTokenizer(VOCAB), sequence_length=10, truncate="waterfall")
    clone = assert_config_round_trip(pre)
    assert clone.truncate == "waterfall" and clone.sequence_length == 10
    inputs = keras.Input(shape=(), dtype="string")
    backbone = BertBackbone(len(VOCAB), 2, 2, 16, 32, max_sequence_length=10)
    model = keras.Model(inputs, backbone(pre(inputs))["pooled_output"])
    texts = tf.constant(["a man is eating.", "the dog runs"])
    restored = assert_saved_model_equal(model, texts, tmp_path)
    restored_pre = next(layer for layer in restored.layers if isinstance(layer, BertPreprocessor))
    assert restored_pre.tokenizer.get_vocabulary() == VOCAB


def test_bad_arguments():
    with pytest.raises(ValueError, match="tokenizer"):
        BertPreprocessor(VOCAB)
    with pytest.raises(ValueError, match="truncate"):
        BertPreprocessor(BertTokenizer(VOCAB), truncate="head")


def _google_dir(tmp_path, name):
    directory = tmp_path / name
    directory.mkdir()
    (directory / "vocab.txt").write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    config = {"vocab_size": len(VOCAB), "hidden_size": 16, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 32, "max_position_embeddings": 16,
              "type_vocab_size": 2, "hidden_act": "gelu"}
    (directory / "bert_config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(directory)


def test_from_preset_uses_vocabulary_and_casing(tmp_path):
    path = _google_dir(tmp_path, "uncased_L-2_H-16_A-2")
    pre = BertPreprocessor.from_preset(path, sequence_length=8)
    assert pre.tokenizer.lowercase is True and pre.tokenizer.get_vocabulary() == VOCAB
    assert pre("A MAN")["token_ids"].numpy().tolist() == [2, 5, 6, 3, 0, 0, 0, 0]
    with pytest.warns(UserWarning, match="uncased"):
        BertPreprocessor.from_preset(path, lowercase=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cased = BertPreprocessor.from_preset(_google_dir(tmp_path, "cased_L-2_H-16_A-2"))
    assert cased.tokenizer.lowercase is False
    assert preset_lowercase("bert_base_en_uncased") is True


def test_from_preset_without_vocabulary_is_clear(tmp_path):
    path = _google_dir(tmp_path, "uncased_novocab")
    os.remove(os.path.join(path, "vocab.txt"))
    with pytest.raises(ValueError, match="vocab.txt"):
        BertPreprocessor.from_preset(path)


class _Serving(tf.Module):
    def __init__(self, preprocessor):
        super().__init__()
        self.preprocessor = preprocessor

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.string)])
    def serve(self, a, b):
        return self.preprocessor((a, b))


@pytest.mark.slow
def test_saved_model_runs_with_only_tensorflow_text(tmp_path):
    """R16 (text part): the exported graph needs tensorflow + tensorflow_text only, no PyFunc."""
    import subprocess
    import sys

    pre = BertPreprocessor(BertTokenizer(VOCAB), sequence_length=10)
    a, b = ["A man is eating.", "Ünïcode\u200b dog"], ["Someone eats.", "runs!"]
    expected = pre((a, b))["token_ids"].numpy().tolist()
    tf.saved_model.save(_Serving(pre), str(tmp_path / "sm"))
    script = (
        "import json, sys, tensorflow as tf, tensorflow_text\n"
        f"m = tf.saved_model.load({str(tmp_path / 'sm')!r})\n"
        f"out = m.serve(tf.constant({a!r}), tf.constant({b!r}))['token_ids'].numpy().tolist()\n"
        "g = m.serve.get_concrete_function().graph.as_graph_def()\n"
        "ops = {n.op for n in g.node} | {n.op for f in g.library.function for n in f.node_def}\n"
        "print(json.dumps([out, sorted(o for o in ops if 'PyFunc' in o)]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
        cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": ""},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out, pyfuncs = json.loads(result.stdout.strip().splitlines()[-1])
    assert out == expected and pyfuncs == []


def test_dataset_iterator_checkpoint_resumes_exactly(tmp_path):
    """The preprocessor inside `tf.data.map` keeps the iterator checkpointable (no
    external state), so a resumed pipeline yields the same next batch."""
    pre = BertPreprocessor(BertTokenizer(VOCAB), sequence_length=8)
    ds = tf.data.Dataset.from_tensor_slices(["a man", "the dog runs!", "someone eats", "a"]).map(pre)
    iterator = iter(ds)
    next(iterator)
    path = tf.train.Checkpoint(iterator=iterator).save(str(tmp_path / "ckpt"))
    expected = next(iterator)["token_ids"].numpy().tolist()
    resumed = iter(ds)
    tf.train.Checkpoint(iterator=resumed).restore(path)
    assert next(resumed)["token_ids"].numpy().tolist() == expected == [2, 13, 14, 15, 16, 3, 0, 0]
