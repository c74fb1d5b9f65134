"""Backbones and task models."""

from keras_bert_zoo.models.bert_backbone import BertBackbone

__all__ = ["BertBackbone"]
