"""BertFeatureExtractor (§5.3): features are the backbone's layers, BERT stays frozen, the tagger learns."""

import keras
import numpy as np
import pytest

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_feature_extractor import FEATURES, BertFeatureExtractor, ScalarMix
from keras_bert_zoo.text import BertTokenizer
from keras_bert_zoo.text.token_classifier_preprocessor import TokenClassifierPreprocessor
from tests.task_contract import assert_task_contract

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "bob", "visited", "paris", ".", "the", "german",
         "call", "u", "s", "##s", "cafe", "eu", "met", "ann", "in", "rome"]
LABELS = ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
X = np.array(["bob visited paris .", "the german call", "u.s. bob germans paris the cafe eu ann"])
Y = np.array([[3, 0, 1, 0, -1, -1, -1, -1], [0, 0, 0, -1, -1, -1, -1, -1], [1, 3, 0, 1, 0, 0, 1, 3]])
# Encoder outputs of a 5-layer backbone (0 = embeddings) each choice reads.
EXPECTED_LAYERS = {
    "embeddings": [0], "second_to_last": [4], "last": [5], "weighted_sum_last_four": [2, 3, 4, 5],
    "concat_last_four": [2, 3, 4, 5], "weighted_sum_all": [1, 2, 3, 4, 5],
}


def _backbone(num_layers=2, dropout=0.0):
    keras.utils.set_random_seed(2)
    return BertBackbone(vocabulary_size=len(VOCAB), num_layers=num_layers, num_heads=2, hidden_dim=8,
                        intermediate_dim=16, max_sequence_length=16, dropout=dropout)


def _extractor(feature="concat_last_four", backbone=None, dropout=0.0):
    preprocessor = TokenClassifierPreprocessor(BertTokenizer(VOCAB), 16)
    return BertFeatureExtractor(backbone or _backbone(), len(LABELS), feature=feature, preprocessor=preprocessor,
                                labels=LABELS, lstm_units=4, dropout=dropout)


def test_features_are_the_backbones_layers_for_every_choice():
    backbone = _backbone(num_layers=5, dropout=0.1)
    ids = None
    for feature, layers in EXPECTED_LAYERS.items():
        extractor = _extractor(feature, backbone)
        ids = ids or extractor.preprocessor(X)
        encoder_outputs = [np.asarray(t) for t in backbone(ids, training=False)["encoder_outputs"]]
        # Eager calls (no predict function traced per model); `features()` is checked once below.
        features = np.asarray(extractor.feature_model(ids, training=False))
        assert features.shape == (3, 16, len(layers), 8)
        for k, layer in enumerate(layers):
            np.testing.assert_array_equal(features[:, :, k], encoder_outputs[layer])
        # Frozen and in inference mode: no backbone weight trains, dropout is off.
        assert not backbone.trainable_weights
        np.testing.assert_array_equal(np.asarray(extractor.feature_model(ids, training=True)), features)
    assert sorted(FEATURES) == sorted(EXPECTED_LAYERS)
    np.testing.assert_array_equal(extractor.features(X), features)


def test_combinations_concat_and_weighted_sum():
    stacked = np.random.default_rng(0).normal(size=(2, 3, 4, 8)).astype("float32")
    # ScalarMix starts as the plain mean (softmax of zeros, scale 1).
    np.testing.assert_allclose(np.asarray(ScalarMix()(stacked)), stacked.mean(axis=2), atol=1e-6)
    mix = ScalarMix()
    mix.build(stacked.shape)
    mix.layer_weights.assign([0.0, 0.0, 0.0, 50.0])
    np.testing.assert_allclose(np.asarray(mix(stacked)), stacked[:, :, 3], atol=1e-5)
    extractor = _extractor("concat_last_four")
    concat = keras.Model(extractor.tagger.inputs, extractor.tagger.get_layer("concat").output)
    out = np.asarray(concat([stacked[:, :, :2, :], np.ones((2, 3), "int32")]))
    np.testing.assert_array_equal(out, np.concatenate([stacked[:, :, 0], stacked[:, :, 1]], axis=-1))


def test_fit_cached_trains_the_tagger_only():
    extractor = _extractor("weighted_sum_all")
    backbone_before = [np.asarray(w) for w in extractor.backbone.weights]
    history = extractor.fit_cached(X, Y, epochs=20, batch_size=3, learning_rate=1e-2, verbose=0)
    assert history.history["loss"][-1] < 0.7 * history.history["loss"][0]
    for before, after in zip(backbone_before, extractor.backbone.weights):
        np.testing.assert_array_equal(before, np.asarray(after))
    # The scalar mix learned away from the uniform start.
    assert np.abs(np.asarray(extractor.tagger.get_layer("scalar_mix").layer_weights)).max() > 0


def test_task_contract(tmp_path):
    assert_task_contract(_extractor("weighted_sum_last_four"), X, Y, tmp_path)


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="feature='first'"):
        _extractor("first")
    with pytest.raises(ValueError, match="lstm_units=0"):
        BertFeatureExtractor(_backbone(), 5, lstm_units=0)
