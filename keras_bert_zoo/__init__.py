"""keras_bert_zoo: BERT (Devlin et al., 2018) for Keras 3 on TensorFlow.

The public API: explicit re-exports of what a user calls, nothing else. Run plumbing
(input pipelines' pieces, checkpoint files, replica steps) stays in its module.
`prepare_wikipedia` is not re-exported: it needs gensim (the `demo` extra); import it
from `keras_bert_zoo.data.wikipedia`.
"""

import os

# The package's text and data code is TensorFlow; default the Keras backend to it.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_bert_zoo import layers, text  # noqa: E402
from keras_bert_zoo.data.beam_pipeline import write_pretraining_tfrecords_beam  # noqa: E402
from keras_bert_zoo.data.conll import conll_inputs, conll_labels, load_conll2003_tfds, read_conll  # noqa: E402
from keras_bert_zoo.data.documents import documents_dataset  # noqa: E402
from keras_bert_zoo.data.glue import glue_labels, read_glue, write_glue_submission  # noqa: E402
from keras_bert_zoo.data.glue_tfds import load_glue_tfds  # noqa: E402
from keras_bert_zoo.data.polarity import read_polarity  # noqa: E402
from keras_bert_zoo.data.pretraining import pretraining_dataset  # noqa: E402
from keras_bert_zoo.data.pretraining_report import format_report, pretraining_report  # noqa: E402
from keras_bert_zoo.data.pretraining_writer import write_pretraining_tfrecords  # noqa: E402
from keras_bert_zoo.data.sentences import split_sentences  # noqa: E402
from keras_bert_zoo.data.squad import load_squad_tfds, read_squad  # noqa: E402
from keras_bert_zoo.data.swag import read_swag  # noqa: E402
from keras_bert_zoo.data.tfrecords import read_pretraining_tfrecords  # noqa: E402
from keras_bert_zoo.serving.export import export  # noqa: E402  (the function shadows the module name)
from keras_bert_zoo.serving.hub import export_encoder, export_preprocessor  # noqa: E402
from keras_bert_zoo.metrics.glue import glue_metrics  # noqa: E402
from keras_bert_zoo.metrics.glue_dev_metrics import GlueDevMetrics  # noqa: E402
from keras_bert_zoo.metrics.squad import squad_v1_metrics, squad_v2_metrics  # noqa: E402
from keras_bert_zoo.metrics.tagging import entity_scores, tagging_metrics  # noqa: E402
from keras_bert_zoo.models.bert_backbone import BertBackbone  # noqa: E402
from keras_bert_zoo.models.bert_classifier import BertClassifier  # noqa: E402
from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor  # noqa: E402
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice  # noqa: E402
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer  # noqa: E402
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor  # noqa: E402
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier  # noqa: E402
from keras_bert_zoo.presets.registry import list_presets  # noqa: E402
from keras_bert_zoo.text import (  # noqa: E402
    BertPreprocessor,
    BertTokenizer,
    MultipleChoicePreprocessor,
    SegmentPacker,
    SpanDecoder,
    SpanExtractorPreprocessor,
    learn_vocabulary,
    load_vocabulary,
    save_vocabulary,
)
from keras_bert_zoo.text.mlm_masker import MLMMasker  # noqa: E402
from keras_bert_zoo.text.token_classifier_preprocessor import TokenClassifierPreprocessor  # noqa: E402
from keras_bert_zoo.training.checkpoints import TrainingCheckpoint  # noqa: E402
from keras_bert_zoo.training.distribute import get_strategy  # noqa: E402
from keras_bert_zoo.pretraining.fill_mask import fill_mask  # noqa: E402
from keras_bert_zoo.finetuning.config import FinetuningConfig  # noqa: E402
from keras_bert_zoo.finetuning.run import run_finetuning  # noqa: E402
from keras_bert_zoo.training.optimizer import BertAdamW, LinearWarmupLinearDecay  # noqa: E402
from keras_bert_zoo.pretraining.config import PretrainingConfig  # noqa: E402
from keras_bert_zoo.training.resumable_fit import fit_resumable  # noqa: E402
from keras_bert_zoo.pretraining.run import run_pretraining  # noqa: E402
from keras_bert_zoo.presets.loading import get_preset_vocabulary, save_to_preset  # noqa: E402

__version__ = "0.1.0"

# Loaded on first use: the search imports keras-tuner, which imports scikit-learn (~1.2 s of the
# package's ~1.6 s import on a 2-core host, paid by every process that never searches).
_LAZY = {"tune": "keras_bert_zoo.finetuning.search.tuner", "run_tuning": "keras_bert_zoo.finetuning.search.run"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'keras_bert_zoo' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

__all__ = [
    # Models (each task and the backbone load with `.from_preset(...)`).
    "BertBackbone",
    "BertClassifier",
    "BertFeatureExtractor",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanExtractor",
    "BertTokenClassifier",
    # Tokenizer, preprocessors and vocabularies.
    "BertPreprocessor",
    "BertTokenizer",
    "MLMMasker",
    "MultipleChoicePreprocessor",
    "SegmentPacker",
    "SpanDecoder",
    "SpanExtractorPreprocessor",
    "TokenClassifierPreprocessor",
    "learn_vocabulary",
    "load_vocabulary",
    "save_vocabulary",
    # Presets.
    "get_preset_vocabulary",
    "list_presets",
    "save_to_preset",
    # Data: pretraining pipelines and the task readers.
    "conll_inputs",
    "conll_labels",
    "documents_dataset",
    "format_report",
    "glue_labels",
    "load_conll2003_tfds",
    "load_glue_tfds",
    "load_squad_tfds",
    "pretraining_dataset",
    "pretraining_report",
    "read_conll",
    "read_glue",
    "read_polarity",
    "read_pretraining_tfrecords",
    "read_squad",
    "read_swag",
    "split_sentences",
    "write_glue_submission",
    "write_pretraining_tfrecords",
    "write_pretraining_tfrecords_beam",
    # Training: optimizer, strategies, drivers, search.
    "BertAdamW",
    "FinetuningConfig",
    "LinearWarmupLinearDecay",
    "PretrainingConfig",
    "TrainingCheckpoint",
    "fill_mask",
    "fit_resumable",
    "get_strategy",
    "run_finetuning",
    "run_pretraining",
    "run_tuning",
    "tune",
    # Metrics.
    "GlueDevMetrics",
    "entity_scores",
    "glue_metrics",
    "squad_v1_metrics",
    "squad_v2_metrics",
    "tagging_metrics",
    # Export.
    "export",
    "export_encoder",
    "export_preprocessor",
    # Subpackages.
    "layers",
    "text",
]
