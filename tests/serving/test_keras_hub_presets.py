"""keras-hub presets both ways (issue 47): a tiny BertBackbone / BertTextClassifier saved by keras-hub
loads into ours (outputs within 1e-5 on the same token ids, the tokenizer's casing and ids), locally
and by a kaggle:// handle; ours saved for keras-hub loads there within 1e-5."""

import json
import os

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor, BertTokenClassifier
from keras_bert_zoo.presets import sources
from tests.weights import weights_testlib as lib
from tests.presets.conftest import _isolated_cache  # noqa: F401  (autouse: an empty cache, as in tests/presets/)

keras_hub = pytest.importorskip("keras_hub", reason="keras-hub presets are written by keras-hub (the bench extra)")
from keras_bert_zoo.serving.keras_hub_preset import save_keras_hub_preset  # noqa: E402

VOCAB = [line.strip() for line in open(os.path.join(lib.fixture_dir("gelu"), "vocab.txt"))]
SENTENCES = ["w1 W2 w3 w4", "w5 w6", "W7 w8 w9 w10 w11 w12"]
PAIRS = (["w1 w2", "w3 w4 w5"], ["w6 w7 w8", "w9"])


def randomize(model, seed=0):
    """Weights far from keras-hub's small initialisation, so that a mapping error shows."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        variable.assign(rng.normal(0, 0.3, variable.shape) + (1.0 if variable.path.endswith("gamma") else 0.0))


def ids(batch):
    token_ids = np.array([[2, 10, 11, 12, 3, 0, 0], [2, 20, 21, 3, 30, 31, 3]], "int32")
    segments = np.array([[0] * 7, [0, 0, 0, 0, 1, 1, 1]], "int32")
    return {"token_ids": token_ids[:batch], "segment_ids": segments[:batch], "padding_mask": (token_ids > 0)[:batch].astype("int32")}


def their_logits(task, texts):
    """keras-hub's logits on texts (a tuple is a pair's segments). Its preprocessor reads a tuple
    as `(x, y)`, hence `x=`."""
    return np.asarray(task(task.preprocessor(x=texts)))


def same_ids(ours, theirs, texts):
    a = np.asarray(ours.preprocessor(texts)["token_ids"])
    b = np.asarray(theirs.preprocessor(x=texts)["token_ids"])
    width = max(a.shape[1], b.shape[1])
    np.testing.assert_array_equal(np.pad(a, ((0, 0), (0, width - a.shape[1]))), np.pad(b, ((0, 0), (0, width - b.shape[1]))))


def keras_hub_classifier(path, lowercase=True, num_classes=3):
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=lowercase)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=16)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=16,
                                             intermediate_dim=32, max_sequence_length=32)
    task = keras_hub.models.BertTextClassifier(backbone, num_classes=num_classes, preprocessor=preprocessor)
    randomize(task)
    task.save_to_preset(str(path))
    return task


def test_keras_hub_backbone_loads_into_ours(tmp_path):
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=16,
                                             intermediate_dim=32, max_sequence_length=32)
    randomize(backbone)
    backbone.save_to_preset(str(tmp_path / "kh"))
    keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True).save_to_preset(str(tmp_path / "kh"))
    assert sources.locate(str(tmp_path / "kh")) == ("keras_hub", str(tmp_path / "kh"))
    ours = BertBackbone.from_preset(str(tmp_path / "kh"), dropout=0.0)
    assert ours.activation == "gelu_approximate"  # keras-hub's BertBackbone runs the tanh GELU
    x = ids(2)
    theirs, mine = backbone(x), ours(x)
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(mine["sequence_output"])[real], np.asarray(theirs["sequence_output"])[real],
                               atol=1e-5)
    np.testing.assert_allclose(mine["pooled_output"], theirs["pooled_output"], atol=1e-5)


@pytest.mark.parametrize("lowercase", [True, False])
def test_keras_hub_classifier_loads_with_its_head_and_casing(tmp_path, lowercase):
    theirs = keras_hub_classifier(tmp_path / "kh", lowercase=lowercase)
    ours = BertClassifier.from_preset(str(tmp_path / "kh"), dropout=0.0)
    assert ours.num_classes == 3 and ours.labels is None and ours.preprocessor.sequence_length == 16
    assert ours.preprocessor.tokenizer.lowercase is lowercase
    # The preprocessor alone reads the same casing (keras-hub's uncased: lowercased, accents kept).
    alone = BertPreprocessor.from_preset(str(tmp_path / "kh")).tokenizer
    assert (alone.lowercase, alone.strip_accents) == (lowercase, ours.preprocessor.tokenizer.strip_accents)
    same_ids(ours, theirs, PAIRS)
    same_ids(ours, theirs, SENTENCES)  # capitals: lowercased or [UNK] as keras-hub's tokenizer does
    np.testing.assert_allclose(ours.predict(PAIRS, verbose=0), their_logits(theirs, PAIRS), atol=1e-5)
    with pytest.raises(ValueError, match=r"num_classes=2 contradicts the checkpoint's head .*BertTextClassifier.* "
                                         r"which has 3 classes"):
        BertClassifier.from_preset(str(tmp_path / "kh"), num_classes=2)
    with pytest.raises(ValueError, match=r"holds a BertClassifier head, not a BertTokenClassifier one"):
        BertTokenClassifier.from_preset(str(tmp_path / "kh"))


def test_kaggle_handle_reads_a_keras_hub_preset(tmp_path, monkeypatch):
    from keras_bert_zoo.presets import download

    root = tmp_path / "kagglehub"
    monkeypatch.setenv("KAGGLEHUB_CACHE", str(root))
    monkeypatch.setenv(download.OFFLINE_ENV, "1")
    folder = root / "models" / "keras" / "bert" / "keras" / "bert_tiny_en_uncased" / "2"
    theirs = keras_hub_classifier(folder)
    open(folder.parent / "2.complete", "w").close()
    ours = BertClassifier.from_preset("kaggle://keras/bert/keras/bert_tiny_en_uncased/2", dropout=0.0)
    np.testing.assert_allclose(ours.predict(SENTENCES, verbose=0), their_logits(theirs, SENTENCES), atol=1e-5)


def test_another_keras_hub_model_is_refused_by_name(tmp_path):
    folder = tmp_path / "gemma"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"module": "keras_hub.src.models.gemma.gemma_backbone",
                                                    "class_name": "GemmaBackbone", "config": {},
                                                    "registered_name": "keras_hub>GemmaBackbone"}))
    with pytest.raises(ValueError, match=r"is the keras-hub backbone 'keras_hub>GemmaBackbone': keras_bert_zoo "
                                         r"reads keras-hub's 'keras_hub>BertBackbone' only"):
        BertBackbone.from_preset(str(folder))


def test_ours_written_for_keras_hub_loads_there(tmp_path):
    task = BertClassifier.from_preset(lib.fixture_dir("gelu_new"), num_classes=3, labels=["a", "b", "c"],
                                      dropout=0.0, sequence_length=16, truncate="round_robin")
    randomize(task, seed=1)
    save_keras_hub_preset(task, str(tmp_path / "kh"))
    theirs = keras_hub.models.BertTextClassifier.from_preset(str(tmp_path / "kh"))
    same_ids(task, theirs, PAIRS)
    np.testing.assert_allclose(their_logits(theirs, PAIRS), task.predict(PAIRS, verbose=0), atol=1e-5)
    back = BertClassifier.from_preset(str(tmp_path / "kh"), dropout=0.0)
    assert back.labels == ["a", "b", "c"]  # keras-hub has no names: kept beside its files
    np.testing.assert_allclose(back.predict(PAIRS, verbose=0), task.predict(PAIRS, verbose=0), atol=1e-5)

    save_keras_hub_preset(task.backbone, str(tmp_path / "kh_backbone"), vocabulary=task.preprocessor.tokenizer)
    backbone = keras_hub.models.BertBackbone.from_preset(str(tmp_path / "kh_backbone"))
    x = ids(2)
    real = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(np.asarray(backbone(x)["sequence_output"])[real],
                               np.asarray(task.backbone(x)["sequence_output"])[real], atol=1e-5)
    tokenizer = keras_hub.models.BertTokenizer.from_preset(str(tmp_path / "kh_backbone"))
    assert tokenizer.lowercase is True


def test_what_keras_hub_cannot_hold_is_refused(tmp_path):
    exact = BertClassifier.from_preset(lib.fixture_dir("gelu"), num_classes=2, sequence_length=16)
    with pytest.raises(ValueError, match=r"activation='gelu' \(exact GELU\); keras-hub's BertBackbone always runs "
                                         r"the tanh approximation.*allow_gelu_approximation=True"):
        save_keras_hub_preset(exact, str(tmp_path / "exact"))
    tagger = BertTokenClassifier.from_preset(lib.fixture_dir("gelu_new"), labels=["O", "B-X", "I-X"], sequence_length=16)
    with pytest.raises(ValueError, match=r"keras-hub has no BERT class for a BertTokenClassifier: it has BertBackbone "
                                         r"and BertTextClassifier"):
        save_keras_hub_preset(tagger, str(tmp_path / "tagger"))
    assert not os.path.exists(tmp_path / "exact") and not os.path.exists(tmp_path / "tagger")
