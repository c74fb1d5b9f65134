"""Backbones and task models."""

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier

__all__ = ["BertBackbone", "BertFeatureExtractor", "BertPretrainer", "BertSpanExtractor", "BertTokenClassifier"]
