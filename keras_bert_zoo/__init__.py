"""keras_bert_zoo: BERT (Devlin et al., 2018) for Keras 3 on TensorFlow.

The public API: explicit re-exports, nothing else.
"""

import os

# The package's text and data code is TensorFlow; default the Keras backend to it.
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_bert_zoo import layers  # noqa: E402
from keras_bert_zoo.models.bert_backbone import BertBackbone  # noqa: E402
from keras_bert_zoo.presets import list_presets  # noqa: E402
from keras_bert_zoo.weights.loading import get_preset_vocabulary, save_to_preset  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "BertBackbone",
    "get_preset_vocabulary",
    "layers",
    "list_presets",
    "save_to_preset",
]
