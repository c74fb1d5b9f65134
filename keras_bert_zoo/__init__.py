"""keras_bert_zoo: BERT (Devlin et al., 2018) for Keras 3 on TensorFlow.

The public API: the names a user types (the models, the tokenizer and preprocessors,
vocabularies, presets, export, the run functions and their configs, the optimizer and
fit loop) and the subpackages, each exporting what its folder holds for users
(`keras_bert_zoo.data.read_glue`, `keras_bert_zoo.metrics.glue_metrics`, ...). Run plumbing
(input pipelines' pieces, checkpoint files, replica steps) stays in its module.

A model is saved with its own method, `model.save_to_preset(directory)`.
"""

import importlib as _importlib
import importlib.util as _importlib_util
import os as _os
import sys as _sys


def _load_console():
    """`keras_bert_zoo.utils.console` (standard library only), loaded from its file: importing it
    by name would run `keras_bert_zoo/utils/__init__.py` first, whose modules import TensorFlow,
    unfiltered."""
    name = "keras_bert_zoo.utils.console"
    if name not in _sys.modules:
        spec = _importlib_util.spec_from_file_location(name, _os.path.join(_os.path.dirname(__file__), "utils", "console.py"))
        module = _importlib_util.module_from_spec(spec)
        _sys.modules[name] = module
        spec.loader.exec_module(module)
    return _sys.modules[name]


# The package's text and data code is TensorFlow; the Keras backend defaults to it. TensorFlow is
# imported here first, without its start-up noise on stderr (see utils/console.py).
_load_console().import_tensorflow_quietly()

from keras_bert_zoo import layers, text, utils, weights  # noqa: E402
from keras_bert_zoo import data, metrics, presets, training  # noqa: E402
from keras_bert_zoo import models  # noqa: E402
from keras_bert_zoo import finetuning, pretraining, serving  # noqa: E402
from keras_bert_zoo.finetuning.config import FinetuningConfig  # noqa: E402
from keras_bert_zoo.finetuning.run import run_finetuning  # noqa: E402
from keras_bert_zoo.models.bert_backbone import BertBackbone  # noqa: E402
from keras_bert_zoo.models.bert_classifier import BertClassifier  # noqa: E402
from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor  # noqa: E402
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice  # noqa: E402
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer  # noqa: E402
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor  # noqa: E402
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier  # noqa: E402
from keras_bert_zoo.presets.loading import get_preset_vocabulary  # noqa: E402
from keras_bert_zoo.presets.registry import list_presets  # noqa: E402
from keras_bert_zoo.pretraining.config import PretrainingConfig  # noqa: E402
from keras_bert_zoo.pretraining.fill_mask import fill_mask  # noqa: E402
from keras_bert_zoo.pretraining.run import run_pretraining  # noqa: E402
from keras_bert_zoo.serving.export import export  # noqa: E402  (the function shadows the module name)
from keras_bert_zoo.serving.hf_checkpoint import save_hf_checkpoint  # noqa: E402
from keras_bert_zoo.serving.hub import export_encoder, export_preprocessor  # noqa: E402
from keras_bert_zoo.serving.keras_hub_preset import save_keras_hub_preset  # noqa: E402
from keras_bert_zoo.text import (  # noqa: E402
    BertPreprocessor,
    BertTokenizer,
    MLMMasker,
    MultipleChoicePreprocessor,
    SegmentPacker,
    SpanDecoder,
    SpanExtractorPreprocessor,
    TokenClassifierPreprocessor,
    learn_vocabulary,
    load_vocabulary,
    save_vocabulary,
)
from keras_bert_zoo.training.checkpoints import TrainingCheckpoint  # noqa: E402
from keras_bert_zoo.training.distribute import get_strategy  # noqa: E402
from keras_bert_zoo.training.optimizer import BertAdamW, LinearWarmupLinearDecay  # noqa: E402
from keras_bert_zoo.training.resumable_fit import fit_resumable  # noqa: E402
utils.console = _sys.modules["keras_bert_zoo.utils.console"]  # loaded by file above: a submodule like the others

__version__ = "0.1.0"

# Loaded on first use: the search imports keras-tuner, which imports scikit-learn (most of
# the package's import time, paid by every process that never searches).
_LAZY = {"tune": "keras_bert_zoo.finetuning.search.tuner", "run_tuning": "keras_bert_zoo.finetuning.search.run"}


def __getattr__(name):
    if name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'keras_bert_zoo' has no attribute {name!r}")


def __dir__():
    # The public API and the module's dunders only: not the submodules the import system binds
    # here as it loads them, nor this file's own helpers and imports.
    return sorted(set(__all__) | {name for name in globals() if name.startswith("__")})


__all__ = [
    # Models (each task and the backbone load with `.from_preset(...)`, save with `.save_to_preset(...)`).
    "BertBackbone",
    "BertClassifier",
    "BertFeatureExtractor",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanExtractor",
    "BertTokenClassifier",
    # Tokenizer, preprocessors and vocabularies.
    "BertTokenizer", "BertPreprocessor", "MLMMasker", "MultipleChoicePreprocessor", "SegmentPacker",
    "SpanDecoder", "SpanExtractorPreprocessor", "TokenClassifierPreprocessor",
    "learn_vocabulary", "load_vocabulary", "save_vocabulary",
    # Presets.
    "get_preset_vocabulary",
    "list_presets",
    # Runs: pretraining, fine-tuning, search; their optimizer, strategies and fit loop.
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
    # Export, and checkpoints for the other hubs (transformers' folders, keras-hub presets).
    "export",
    "export_encoder",
    "export_preprocessor",
    "save_hf_checkpoint",
    "save_keras_hub_preset",
    # Subpackages.
    "data",
    "finetuning",
    "layers",
    "metrics",
    "models",
    "presets",
    "pretraining",
    "serving",
    "text",
    "training",
    "utils",
    "weights",
]
