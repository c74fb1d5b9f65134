"""Real pretrained weights as frozen features (the paper's feature-based approach, §5.3), for the
demo's reference row: fine-tuning all-MiniLM-L6-v2 through the whole protocol takes about half an
hour on 2 cores, more than the demo's 10 minutes, so the demo encodes each task's rows once and
trains the same head on them that `BertClassifier(pooling="mean")` has (dropout 0.1, one dense
layer on the mean of the real tokens' last-layer vectors), with the same grid, seeds, epochs,
batch and optimizer as every other start. The fully fine-tuned row is in the transfer curve's run
(docs/demo.md)."""

import math

import keras
import numpy as np

from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
from keras_bert_zoo.training.finetuning_optimizer import FinetuningAdamW, RunSchedule


class FeatureHead(keras.Model):
    """Dropout and a dense layer over fixed sentence vectors, compiled as a task is
    (`compile(learning_rate=..., warmup_ratio=...)`: `FinetuningAdamW` with the paper's
    warm-up and linear decay over the steps each `fit` runs)."""

    def __init__(self, hidden_dim, num_classes=2, dropout=0.1, **kwargs):
        inputs = keras.Input((hidden_dim,), name="features")
        self.output_dropout = keras.layers.Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(num_classes, kernel_initializer=bert_initializer(), name="logits")
        super().__init__(inputs=inputs, outputs=self.output_dense(self.output_dropout(inputs)), **kwargs)
        self.rate = None

    def compile(self, learning_rate=5e-5, warmup_ratio=0.1, **kwargs):
        self.rate = (float(learning_rate), float(warmup_ratio))
        super().compile(optimizer=FinetuningAdamW(RunSchedule(learning_rate, 0, 1)),
                        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                        metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")], **kwargs)

    def fit(self, x, y, batch_size=32, epochs=1, **kwargs):
        total = math.ceil(len(x) / batch_size) * epochs
        peak, ratio = self.rate
        self.optimizer.learning_rate = RunSchedule(peak, int(total * ratio), total)
        return super().fit(x, y, batch_size=batch_size, epochs=epochs, **kwargs)


class FrozenFeatures:
    """A preset's encoder, frozen: each row's mean last-layer vector over its real tokens.

    Args:
        preset: str. The real weights (an HF folder, as all-MiniLM-L6-v2's).
        sequence_length: int. Of the preprocessor.
        lowercase: bool. The vocabulary's casing (all-MiniLM-L6-v2 is uncased).
    """

    def __init__(self, preset, sequence_length, lowercase=True):
        self.preset = preset
        self.backbone = BertBackbone.from_preset(preset)
        self.preprocessor = BertPreprocessor.from_preset(preset, sequence_length=sequence_length, lowercase=lowercase)

    def encode(self, x, batch_size=128):
        """`(rows, hidden_dim)` float32 sentence vectors of raw text (or text pairs)."""
        ids = self.preprocessor(x)
        out = self.backbone.predict(ids, batch_size=batch_size, verbose=0)
        mask = np.asarray(ids["padding_mask"], "float32")[:, :, None]
        return (np.asarray(out["sequence_output"]) * mask).sum(1) / np.maximum(mask.sum(1), 1.0)

    def task_data(self, data):
        """The protocol's `{split: (x, y)}` with every split's text replaced by its vectors."""
        return {split: (self.encode(x), np.asarray(y)) for split, (x, y) in data.items()}

    def build(self, seed):
        del seed  # the protocol seeds Keras before building: the head's init follows it
        return FeatureHead(self.backbone.hidden_dim)

    def classifier(self, head, labels=None):
        """The frozen encoder and a trained head as one `BertClassifier(pooling="mean")` on raw
        text: the same computation, so it exports and serves like any task."""
        task = BertClassifier(self.backbone, 2, preprocessor=self.preprocessor, pooling="mean", dropout=0.1,
                              labels=labels)
        task.output_dense.set_weights(head.output_dense.get_weights())
        return task
