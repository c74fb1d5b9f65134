"""keras_bert_zoo.text: the original BERT tokenization, in-graph, plus packing, masking and the
tasks' preprocessors."""

from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
from keras_bert_zoo.text.mlm_masker import MLMMasker
from keras_bert_zoo.text.multiple_choice_preprocessor import MultipleChoicePreprocessor
from keras_bert_zoo.text.segment_packer import SegmentPacker
from keras_bert_zoo.text.span_decoder import SpanDecoder
from keras_bert_zoo.text.span_extractor_preprocessor import SpanExtractorPreprocessor
from keras_bert_zoo.text.token_classifier_preprocessor import TokenClassifierPreprocessor
from keras_bert_zoo.text.vocabulary import (
    SPECIAL_TOKENS,
    google_reserved_tokens,
    learn_vocabulary,
    load_vocabulary,
    save_vocabulary,
    validate_vocabulary,
)

__all__ = [
    "SPECIAL_TOKENS",
    "BertPreprocessor",
    "BertTokenizer",
    "MLMMasker",
    "MultipleChoicePreprocessor",
    "SegmentPacker",
    "SpanDecoder",
    "SpanExtractorPreprocessor",
    "TokenClassifierPreprocessor",
    "google_reserved_tokens",
    "learn_vocabulary",
    "load_vocabulary",
    "save_vocabulary",
    "validate_vocabulary",
]
