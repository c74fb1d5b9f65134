"""keras_bert_zoo: BERT (Devlin et al., 2018) for Keras 3 on TensorFlow.

The public API: explicit re-exports, nothing else.
"""

import os

# The package's text and data code is TensorFlow; default the Keras backend to it.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_bert_zoo import layers, text  # noqa: E402
from keras_bert_zoo.data.pretraining import pretraining_dataset  # noqa: E402
from keras_bert_zoo.data.pretraining_report import format_report, pretraining_report  # noqa: E402
from keras_bert_zoo.data.pretraining_writer import write_pretraining_tfrecords  # noqa: E402
from keras_bert_zoo.data.tfrecords import read_pretraining_tfrecords  # noqa: E402
from keras_bert_zoo.export import export  # noqa: E402  (the function shadows the module name)
from keras_bert_zoo.models.bert_backbone import BertBackbone  # noqa: E402
from keras_bert_zoo.models.bert_classifier import BertClassifier  # noqa: E402
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice  # noqa: E402
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer  # noqa: E402
from keras_bert_zoo.presets import list_presets  # noqa: E402
from keras_bert_zoo.text import (  # noqa: E402
    BertPreprocessor,
    BertTokenizer,
    SegmentPacker,
    learn_vocabulary,
    load_vocabulary,
)
from keras_bert_zoo.text.mlm_masker import MLMMasker  # noqa: E402
from keras_bert_zoo.training.checkpoints import TrainingCheckpoint  # noqa: E402
from keras_bert_zoo.training.distribute import get_strategy  # noqa: E402
from keras_bert_zoo.training.optimizer import BertAdamW, LinearWarmupLinearDecay  # noqa: E402
from keras_bert_zoo.training.pretraining_config import PretrainingConfig  # noqa: E402
from keras_bert_zoo.training.pretraining_loop import fit_resumable  # noqa: E402
from keras_bert_zoo.training.pretraining_run import run_pretraining  # noqa: E402
from keras_bert_zoo.weights.loading import get_preset_vocabulary, save_to_preset  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "BertAdamW",
    "BertBackbone",
    "BertClassifier",
    "BertMultipleChoice",
    "BertPreprocessor",
    "BertPretrainer",
    "BertTokenizer",
    "LinearWarmupLinearDecay",
    "MLMMasker",
    "PretrainingConfig",
    "SegmentPacker",
    "TrainingCheckpoint",
    "export",
    "fit_resumable",
    "format_report",
    "get_preset_vocabulary",
    "get_strategy",
    "layers",
    "learn_vocabulary",
    "list_presets",
    "load_vocabulary",
    "pretraining_dataset",
    "pretraining_report",
    "read_pretraining_tfrecords",
    "run_pretraining",
    "save_to_preset",
    "text",
    "write_pretraining_tfrecords",
]
