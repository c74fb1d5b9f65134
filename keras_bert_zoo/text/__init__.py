"""keras_bert_zoo.text: the original BERT tokenization, in-graph, plus packing."""

from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
from keras_bert_zoo.text.vocabulary import (
    SPECIAL_TOKENS,
    load_vocabulary,
    save_vocabulary,
    validate_vocabulary,
)

__all__ = [
    "SPECIAL_TOKENS",
    "BertTokenizer",
    "load_vocabulary",
    "save_vocabulary",
    "validate_vocabulary",
]
