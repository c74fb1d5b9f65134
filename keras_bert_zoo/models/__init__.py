"""Backbones and task models, and the layers their saved files name (`ScalarMix`, `InferenceCall`)."""

from keras_bert_zoo.models.base import Backbone
from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor, InferenceCall, ScalarMix
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from keras_bert_zoo.models.task import Task

__all__ = [
    "Backbone",
    "BertBackbone",
    "BertClassifier",
    "BertFeatureExtractor",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanExtractor",
    "BertTokenClassifier",
    "InferenceCall",
    "ScalarMix",
    "Task",
]
