"""`BertClassifier`: sentence and sentence-pair classification or regression (GLUE, §4.1)."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.layers.masked_mean_pooling import MaskedMeanPooling
from keras_bert_zoo.models import answer_names as names
from keras_bert_zoo.models.classifier_head import ClassifierHead
from keras_bert_zoo.models.task import Task
from keras_bert_zoo.models.task_pipeline import answers_as_numpy
from keras_bert_zoo.models.task_inputs import packed_inputs


POOLINGS = ("pooled_output", "mean")


def _check_arguments(num_classes, labels, dropout, pooling):
    if pooling not in POOLINGS:
        raise ValueError(
            f"`pooling` must be one of {POOLINGS}. Received: pooling={pooling!r}. 'pooled_output' reads the "
            "pooler on [CLS] (the paper), 'mean' the mean of the real tokens' last-layer vectors."
        )
    if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 1:
        raise ValueError(
            "`num_classes` must be an int >= 1 (1 for regression, e.g. STS-B). "
            f"Received: num_classes={num_classes!r}."
        )
    if labels is not None:
        if num_classes == 1:
            raise ValueError(f"A regression task (num_classes=1) has no class names. Received: labels={labels!r}.")
        if len(labels) != num_classes or not all(isinstance(label, str) for label in labels):
            raise ValueError(
                f"`labels` must be {num_classes} strings, one name per class. Received: labels={labels!r}."
            )
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout!r}.")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertClassifier(ClassifierHead, Task):
    """Classifies a sentence or a sentence pair, or scores it (regression), from `[CLS]`.

    The pooled `[CLS]` output goes through dropout and a dense layer to one logit per
    class (`run_classifier.py`'s `output_weights`/`output_bias`, HF's `classifier`).
    With `pooling="mean"` the head reads the mean of the real tokens' last-layer vectors
    instead: the pooler is trained only by next-sentence prediction, so `from_preset` picks
    "mean" for a preset pretrained without NSP (and says so).
    `num_classes >= 2`: softmax cross-entropy on integer labels, accuracy. `num_classes=1`:
    regression (STS-B) with mean squared error on float targets; the output is the score.
    Pairs are packed `[CLS] A [SEP] B [SEP]` with segment ids 0 and 1.

    Args:
        backbone: `keras_bert_zoo.BertBackbone`.
        num_classes: int. Classes, or 1 for regression.
        preprocessor: `keras_bert_zoo.text.BertPreprocessor` or None (the caller feeds ids).
        labels: list of str or None. Class names, kept in the config, returned by
            `postprocess`.
        dropout: float. Dropout on the pooled output. Defaults to 0.1 (the paper).
        pooling: str. What the head reads: `"pooled_output"` (the backbone's pooler on
            `[CLS]`, the paper; default) or `"mean"` (`MaskedMeanPooling` of
            `sequence_output`; the backbone's pooler, unused, is then frozen).

    Call arguments:
        inputs: dict of `token_ids`, `segment_ids`, `padding_mask` (batch, seq).

    Returns:
        Logits (batch, num_classes); for regression (batch, 1) scores.

    Examples:
    >>> classifier = keras_bert_zoo.BertClassifier.from_preset(
    ...     "tiny_preset", num_classes=2, labels=["negative", "positive"])
    >>> history = classifier.fit(["a great film", "dull and long"], [1, 0], epochs=1, verbose=0)
    >>> classifier.predict([("A man is eating.", "Someone eats.")], verbose=0).shape
    (1, 2)
    """

    preset_defaults = {"num_classes": 2}
    skippable_padding = "always"  # its outputs and loss read [CLS] (or the real tokens' mean) only

    def __init__(self, backbone, num_classes, preprocessor=None, labels=None, dropout=0.1, pooling="pooled_output",
                 **kwargs):
        _check_arguments(num_classes, labels, dropout, pooling)
        # === Layers ===
        policy = backbone.dtype_policy
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=bert_initializer(), dtype=policy, name="logits"
        )
        # === Config ===
        self.num_classes = num_classes
        self.labels = None if labels is None else list(labels)
        self.dropout = dropout
        self.pooling = pooling
        # === Functional model ===
        inputs = packed_inputs(backbone)
        backbone_outputs = backbone(dict(inputs))
        pooled = backbone_outputs["pooled_output"]  # (batch, hidden)
        if pooling == "mean":
            pooled = MaskedMeanPooling(dtype=policy, name="mean_pooling")(
                backbone_outputs["sequence_output"], inputs["padding_mask"])  # (batch, hidden)
            # Outside this model's computation: frozen, so no optimizer slots and no "gradients do
            # not exist" warning; its weights are still saved with the backbone.
            backbone.get_layer("pooled_dense").trainable = False
        outputs = self.output_dense(self.output_dropout(pooled))  # (batch, num_classes)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def default_loss(self):
        if self.num_classes == 1:
            return keras.losses.MeanSquaredError()
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        if self.num_classes == 1:
            return None
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def postprocess(self, outputs):
        """Logits → `score` (regression), or `label_id`, `probabilities` and, with
        `labels`, `label` (the class name); the names are `models.answer_names`'.

        Called eagerly (`task.postprocess(task.predict(texts))`), NumPy arrays, `label` as
        `str`; in a traced graph (the export's), tensors, `label` as bytes."""
        logits = keras.ops.cast(outputs, "float32")
        if self.num_classes == 1:
            return {names.SCORE: logits[:, 0]}
        label_id = keras.ops.argmax(logits, axis=-1)
        result = {names.LABEL_ID: label_id, names.PROBABILITIES: keras.ops.softmax(logits, axis=-1)}
        if self.labels is not None and tf.executing_eagerly():
            result[names.LABEL] = np.asarray(self.labels)[keras.ops.convert_to_numpy(label_id)]
        elif self.labels is not None:
            # Strings are no Keras tensor type; serving graphs are TensorFlow.
            result[names.LABEL] = tf.gather(tf.constant(self.labels), label_id)
        return answers_as_numpy(result)

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "labels": self.labels, "dropout": self.dropout,
                       "pooling": self.pooling})
        return config

    @classmethod
    def from_preset(cls, preset, num_classes=None, labels=None, sequence_length=None, load_weights=True, **kwargs):
        """Builds a classifier from a preset (see `Task.from_preset`).

        Args:
            preset: str. A registry name or alias, or a local directory / zip /
                checkpoint in our, Google's or HF's layout.
            num_classes: int or None. None: the saved task's, else the number of
                classes of the checkpoint's fine-tuned head, else 2.
            labels: list of str or None. Class names (None: the saved task's).
            sequence_length: int or None. Defaults to the saved task's, else 128.
            load_weights: bool. Defaults to True.
            **kwargs: `dropout` (head and backbone) or backbone config overrides.
        """
        return super().from_preset(
            preset, load_weights=load_weights, sequence_length=sequence_length,
            num_classes=num_classes, labels=labels, **kwargs,
        )
