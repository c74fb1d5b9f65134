"""keras_bert_zoo.training: the machinery pretraining and fine-tuning share.

The optimizer and its schedule, distribution strategies, and the resumable fit loop with its
checkpoints; replica steps, losses and callbacks stay in their modules.
"""

from keras_bert_zoo.training.checkpoints import TrainingCheckpoint
from keras_bert_zoo.training.distribute import get_strategy
from keras_bert_zoo.training.optimizer import BertAdamW, LinearWarmupLinearDecay
from keras_bert_zoo.training.resumable_fit import fit_resumable

__all__ = ["BertAdamW", "LinearWarmupLinearDecay", "TrainingCheckpoint", "fit_resumable", "get_strategy"]
