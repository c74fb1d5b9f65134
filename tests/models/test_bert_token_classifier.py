"""BertTokenClassifier: first-piece loss, windows back to words, entities, saving, learning."""

import warnings

import keras
import numpy as np
import pytest

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.text.token_classifier_preprocessor import TokenClassifierPreprocessor
from tests.task_contract import assert_task_contract

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "bob", "visited", "paris", ".", "the", "german",
         "call", "u", "s", "##s", "cafe", "eu", "met", "ann", "in", "rome"]
LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
X = np.array(["bob visited paris .", "the german call", "u.s. bob germans paris the cafe eu ann"])
Y = np.array([[3, 0, 1, 0, -1, -1, -1, -1], [0, 0, 0, -1, -1, -1, -1, -1], [1, 3, 0, 1, 0, 0, 1, 3]])


def _tagger(length=8, stride=3, dropout=0.0):
    keras.utils.set_random_seed(1)
    backbone = BertBackbone(vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=16,
                            intermediate_dim=32, max_sequence_length=16, dropout=dropout)
    preprocessor = TokenClassifierPreprocessor(BertTokenizer(VOCAB), length, window_stride=stride)
    return BertTokenClassifier(backbone, len(LABELS), preprocessor=preprocessor, labels=LABELS, dropout=dropout)


def test_task_contract(tmp_path):
    # Windows of 16 hold every sentence whole: one row per input, as the contract's
    # length-sorted predict expects (long sentences: see the windows test below).
    assert_task_contract(_tagger(length=16), X, Y, tmp_path)


def test_loss_and_accuracy_count_first_pieces_only():
    tagger = _tagger()
    tagger.compile()
    x, y, w = tagger.preprocessor(X, Y)
    x, y, w = (keras.tree.map_structure(np.asarray, t) for t in (x, y, w))
    logits = tagger.predict(x, verbose=0)
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    picked = np.take_along_axis(log_probs, y[..., None], -1)[..., 0]
    expected = -(picked * w).sum() / w.sum()  # mean over the scored first pieces
    assert w.sum() == 15  # 4 + 3 + 8 words
    results = tagger.evaluate(x, y, sample_weight=w, batch_size=len(y), verbose=0, return_dict=True)
    assert results["loss"] == pytest.approx(expected, rel=1e-5)
    hits = (logits.argmax(-1) == y) * w
    assert results["accuracy"] == pytest.approx(hits.sum() / w.sum(), rel=1e-6)
    # Labels under weight 0 (continuation pieces, [CLS]/[SEP], padding) do not count.
    noisy = np.where(w == 0, 4, y)
    again = tagger.evaluate(x, noisy, sample_weight=w, batch_size=len(y), verbose=0, return_dict=True)
    assert again["loss"] == pytest.approx(results["loss"], rel=1e-6)


def test_raw_predict_equals_ids_and_windows_map_back_to_words():
    tagger = _tagger()
    raw = tagger.predict(X, verbose=0)
    windows = tagger.preprocessor.windows(X)
    ids = tagger.predict({k: windows[k] for k in ("token_ids", "segment_ids", "padding_mask")}, verbose=0)
    assert raw.shape == (5, 8, 5)  # the third sentence (11 pieces) needs three windows
    np.testing.assert_allclose(raw, ids, atol=1e-6)
    tags = tagger.predict_tags(X)
    best = raw.argmax(-1)
    example, word = windows["example"].numpy(), windows["word_index"].numpy()
    for row, col in zip(*np.nonzero(word >= 0)):
        assert tags[example[row]][word[row, col]] == LABELS[best[row, col]]
    assert [len(t) for t in tags] == [4, 3, 8]


def test_learns_entities_and_survives_keras_round_trip(tmp_path):
    tagger = _tagger()
    tagger.compile(learning_rate=1e-2)
    x, y, w = tagger.preprocessor(X, Y)
    before = tagger.evaluate(x, y, sample_weight=w, verbose=0, return_dict=True)["loss"]
    # 30 steps in one epoch (no per-epoch overhead): the five windows, 30 times over.
    x, y, w = (keras.tree.map_structure(lambda a: np.concatenate([np.asarray(a)] * 30), t) for t in (x, y, w))
    tagger.fit(x, y, sample_weight=w, epochs=1, batch_size=5, shuffle=False, verbose=0)
    first = keras.tree.map_structure(lambda a: a[:5], x)
    after = tagger.evaluate(first, y[:5], sample_weight=w[:5], verbose=0, return_dict=True)["loss"]
    assert after < 0.1 * before
    texts = ["bob  visited paris .", "u.s. bob germans paris the cafe eu ann"]
    entities = tagger.predict_entities(texts)
    assert entities[0] == [{"type": "PER", "text": "bob", "start": 0, "end": 3},
                           {"type": "LOC", "text": "paris", "start": 13, "end": 18}]
    assert [(e["type"], e["text"]) for e in entities[1]] == [
        ("LOC", "u.s."), ("PER", "bob"), ("LOC", "paris"), ("LOC", "eu"), ("PER", "ann")]
    path = str(tmp_path / "tagger.keras")
    tagger.save(path)
    restored = keras.saving.load_model(path)
    assert restored.labels == LABELS and restored.preprocessor.window_stride == 3
    assert restored.predict_entities(texts) == entities


def test_arguments_are_checked():
    backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16)
    with pytest.raises(ValueError, match="num_classes=1"):
        BertTokenClassifier(backbone, 1)
    with pytest.raises(ValueError, match="labels=.'O'."):
        BertTokenClassifier(backbone, 2, labels=["O"])
    with pytest.raises(ValueError, match="predict_tags needs `labels`"):
        BertTokenClassifier(backbone, 2).predict_tags(["a"])


def test_preset_keeps_the_window_stride_and_predicts_the_same(tmp_path):
    tagger = _tagger()  # windows of 8 pieces every 3: the third sentence needs three
    directory = tagger.save_to_preset(str(tmp_path / "preset"))
    reloaded = BertTokenClassifier.from_preset(directory)
    assert reloaded.preprocessor.window_stride == 3 and reloaded.preprocessor.sequence_length == 8
    assert reloaded.labels == LABELS
    np.testing.assert_allclose(reloaded.predict(X, verbose=0), tagger.predict(X, verbose=0), atol=1e-5)
    assert reloaded.predict_tags(X) == tagger.predict_tags(X)
    assert BertTokenClassifier.from_preset(directory, window_stride=2).preprocessor.window_stride == 2
    with pytest.raises(ValueError, match="window_stride=0"):
        BertTokenClassifier.from_preset(directory, window_stride=0)


def _fit_recording_warnings(task, *args, **kwargs):
    """`task.fit(...)`, every warning recorded (none filtered out as already shown)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        task.fit(*args, **kwargs)
    return [str(w.message) for w in caught]


def test_fit_trains_no_pooler_and_the_preset_keeps_it(tmp_path, caplog, capfd):
    """No output reads the pooler: it is not trained, so Keras has no "Gradients do not exist"
    warning to give; its weights still load and save with the backbone."""
    tagger = _tagger()
    pooler = [w.numpy() for w in tagger.backbone.pooled_dense.weights]
    tagger.compile()
    x, y, w = tagger.preprocessor(X, Y)
    messages = _fit_recording_warnings(tagger, x, y, sample_weight=w, epochs=1, batch_size=5, verbose=0)
    out, err = capfd.readouterr()
    said = "\n".join(messages) + caplog.text + out + err
    assert "Gradients do not exist" not in said, said[-2000:]
    trained = {id(v) for v in tagger.trainable_weights}
    assert not any(id(v) in trained for v in tagger.backbone.pooled_dense.weights)
    for before, after in zip(pooler, tagger.backbone.pooled_dense.weights):
        np.testing.assert_array_equal(before, after.numpy())
    tagger.save_to_preset(str(tmp_path / "preset"))
    again = BertTokenClassifier.from_preset(str(tmp_path / "preset"))
    for before, after in zip(pooler, again.backbone.pooled_dense.weights):
        np.testing.assert_array_equal(before, after.numpy())
