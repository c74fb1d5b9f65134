"""BERT layers (keras.ops only, backend-independent)."""

from keras_bert_zoo.layers.bert_attention import BertAttention
from keras_bert_zoo.layers.bert_embeddings import BertEmbeddings
from keras_bert_zoo.layers.masked_lm_head import MaskedLMHead
from keras_bert_zoo.layers.masked_mean_pooling import MaskedMeanPooling
from keras_bert_zoo.layers.transformer_encoder import TransformerEncoder

__all__ = ["BertAttention", "BertEmbeddings", "MaskedLMHead", "MaskedMeanPooling", "TransformerEncoder"]
