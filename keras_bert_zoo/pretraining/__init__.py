"""keras_bert_zoo.pretraining: BERT's pretraining run, its config, phases and evaluation.

Fill-mask is `keras_bert_zoo.fill_mask` (its module, `pretraining.fill_mask`, keeps the name).
"""

from keras_bert_zoo.pretraining.config import PretrainingConfig
from keras_bert_zoo.pretraining.run import run_pretraining

__all__ = ["PretrainingConfig", "run_pretraining"]
