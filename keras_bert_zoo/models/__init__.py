"""Backbones and task models."""

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from keras_bert_zoo.models.task import Task

__all__ = [
    "BertBackbone",
    "BertClassifier",
    "BertFeatureExtractor",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanExtractor",
    "BertTokenClassifier",
    "Task",
]
