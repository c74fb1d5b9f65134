"""Backbones and task models."""

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

__all__ = ["BertBackbone", "BertPretrainer"]
