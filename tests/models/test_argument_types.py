"""R52 (issue 21 item 8): constructor arguments of the wrong type are named, not misread.

Before: `hidden_dim="32"` crashed inside string formatting, `dtype="int32"` failed in a
TensorFlow op, `causal="no"` built a causal model and `num_layers=True` a 1-layer one.
"""

import json

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.layers import BertAttention, BertEmbeddings, MaskedLMHead, TransformerEncoder
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from tests.conftest import TINY_BACKBONE


BACKBONE_CASES = [
    (dict(hidden_dim="32"), TypeError, r"`hidden_dim` must be a positive int\. Received: hidden_dim='32' of type str"),
    (dict(vocabulary_size=50.0), TypeError, "vocabulary_size=50.0 of type float"),
    (dict(num_layers=True), TypeError, "num_layers=True of type bool"),
    (dict(max_sequence_length=None), TypeError, "max_sequence_length=None"),
    (dict(causal="no"), TypeError, r"`causal` must be True or False\. Received: causal='no'"),
    (dict(causal=0), TypeError, "causal=0 of type int"),
    (dict(dropout="0.1"), TypeError, "dropout='0.1' of type str"),
    (dict(dropout=1.0), ValueError, r"must be in \[0, 1\)\. Received: dropout=1.0"),
    (dict(dtype="int32"), ValueError, r"float dtype policy .* Received: dtype='int32' \(compute dtype int32"),
    (dict(dtype="float33"), ValueError, "dtype='float33'"),
]


def test_backbone_names_wrong_types_and_values():
    # One test, not one per case: each test pays the suite's Keras-session reset.
    for kwargs, error, match in BACKBONE_CASES:
        with pytest.raises(error, match=match):
            BertBackbone(**dict(TINY_BACKBONE, **kwargs))


def test_numpy_integers_and_int_rates_are_stored_as_plain_numbers():
    model = BertBackbone(**dict(TINY_BACKBONE, vocabulary_size=np.int64(50), dropout=0))
    config = model.get_config()
    assert config["vocabulary_size"] == 50 and type(config["vocabulary_size"]) is int
    assert config["dropout"] == 0.0 and model.causal is False
    json.dumps(config)


LAYER_CASES = [
    (lambda: TransformerEncoder(2, 32, causal=1), TypeError, "causal=1 of type int"),
    (lambda: TransformerEncoder(2, "32"), TypeError, "intermediate_dim='32'"),
    (lambda: TransformerEncoder(2, 32, attention_dropout="x"), TypeError, "attention_dropout='x'"),
    (lambda: TransformerEncoder(2, 32, layer_norm_epsilon=0), ValueError, "layer_norm_epsilon=0.0"),
    (lambda: BertAttention(2.0), TypeError, "num_heads=2.0 of type float"),
    (lambda: BertAttention(2, dtype="int32"), ValueError, "dtype='int32'"),
    (lambda: BertEmbeddings(30, 16, num_segments=2.0), TypeError, "num_segments=2.0"),
    (lambda: BertEmbeddings(30, 16, dtype="int32"), ValueError, "compute dtype int32"),
    (lambda: MaskedLMHead("embeddings"), TypeError, "token_embedding.*type str"),
]


def test_layers_name_wrong_types():
    for build, error, match in LAYER_CASES:
        with pytest.raises(error, match=match):
            build()


def test_pretrainer_names_wrong_types():
    backbone = BertBackbone(**TINY_BACKBONE)
    with pytest.raises(TypeError, match=r"`nsp` must be True or False\. Received: nsp='yes'"):
        BertPretrainer(backbone, nsp="yes")
    with pytest.raises(TypeError, match="`backbone` must be a keras_bert_zoo.BertBackbone.*type Sequential"):
        BertPretrainer(keras.Sequential())
