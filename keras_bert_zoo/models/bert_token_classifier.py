"""`BertTokenClassifier`: a label per word (NER, CoNLL-2003, §5.3 fine-tuning)."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.data.input_checks import check_texts
from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.models import answer_names as names
from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.models.classifier_head import ClassifierHead
from keras_bert_zoo.models.task import Task
from keras_bert_zoo.models.task_pipeline import answers_as_numpy
from keras_bert_zoo.models.task_inputs import packed_inputs
from keras_bert_zoo.text.token_classifier_preprocessor import TokenClassifierPreprocessor

PACKED_KEYS = ("token_ids", "segment_ids", "padding_mask")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTokenClassifier(ClassifierHead, Task):
    """Labels every word-piece position from `sequence_output`; a word's label is its first piece's.

    Dropout and a dense layer give one logit per label at every position (HF's
    `BertForTokenClassification` `classifier.*`, loaded by declaration). Training, as
    in the paper, scores only the first piece of each word: the preprocessor's sample
    weights are 1.0 there and 0.0 elsewhere, and the default loss and accuracy average
    over those pieces only (Keras' `sample_weight`, no custom loss).

    Args:
        backbone: `keras_bert_zoo.BertBackbone`. Its pooler (`pooled_dense`), which no
            output reads, is set non-trainable.
        num_classes: int. Labels (with "O").
        preprocessor: `keras_bert_zoo.text.TokenClassifierPreprocessor` or None.
        labels: list of str or None. Label names (IOB2 tags such as "B-PER"; from
            `data.conll.conll_labels`); needed to return tags and entities.
        dropout: float. Dropout on the sequence output. Defaults to 0.1.

    Call arguments:
        inputs: dict of `token_ids`, `segment_ids`, `padding_mask` (windows, seq).

    Returns:
        Logits (windows, seq, num_classes).

    Examples:
    >>> data = keras_bert_zoo.data.read_conll("conll2003/eng.train")
    >>> labels = keras_bert_zoo.data.conll_labels(data.tags)
    >>> tagger = keras_bert_zoo.BertTokenClassifier.from_preset("tiny_preset", labels=labels)
    >>> tagger.compile()
    >>> sentences, label_ids = keras_bert_zoo.data.conll_inputs(data, labels)
    >>> history = tagger.fit(sentences, label_ids, epochs=1, verbose=0)
    >>> tags = tagger.predict_tags(["Angela Merkel visited Paris ."])  # a tag per word
    >>> len(tags[0]), set(tags[0]) <= set(labels)
    (5, True)
    """

    preprocessor_cls = TokenClassifierPreprocessor
    target_kind = "word_labels"  # `y`: a label per word (ids, or tag names through `labels`), checked before fit

    def __init__(self, backbone, num_classes, preprocessor=None, labels=None, dropout=0.1, **kwargs):
        if not isinstance(num_classes, int) or isinstance(num_classes, bool) or num_classes < 2:
            raise ValueError(f"`num_classes` must be an int >= 2 (labels with 'O'). Received: num_classes={num_classes!r}.")
        if labels is not None and (len(labels) != num_classes or not all(isinstance(t, str) for t in labels)):
            raise ValueError(f"`labels` must be {num_classes} strings, one per class. Received: labels={labels!r}.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout!r}.")
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        # === Config ===
        self.num_classes = num_classes
        self.labels = None if labels is None else list(labels)
        self.dropout = dropout
        # No output reads `pooled_output`, so the pooler gets no gradient: frozen, it is out of
        # the trained set (else Keras warns "Gradients do not exist for variables [pooled_dense ...]"
        # at every fit, and the optimizer keeps slots for it). Its weights stay in the backbone,
        # loaded and saved with it (presets, Google and HF checkpoints).
        backbone.pooled_dense.trainable = False
        # === Functional model ===
        inputs = packed_inputs(backbone)
        outputs, head = self._head(backbone, inputs, num_classes, dropout, backbone.dtype_policy)
        for name, layer in head.items():  # the head's layers
            setattr(self, name, layer)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def _head(self, backbone, inputs, num_classes, dropout, policy):
        """Packed inputs -> (logits, {attribute: head layer}); subclasses change the head here."""
        output_dropout = keras.layers.Dropout(dropout, dtype=policy, name="output_dropout")
        output_dense = keras.layers.Dense(num_classes, kernel_initializer=bert_initializer(), dtype=policy, name="logits")
        sequence = backbone(dict(inputs))["sequence_output"]  # (batch, seq, hidden)
        outputs = output_dense(output_dropout(sequence))  # (batch, seq, num_classes)
        return outputs, {"output_dropout": output_dropout, "output_dense": output_dense}

    def default_loss(self):
        # Averaged over the scored pieces (sum of weights), not over all positions.
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="mean_with_sample_weight")

    def compile(self, optimizer="auto", loss="auto", metrics="auto", weighted_metrics="auto", **kwargs):
        """`Task.compile`; `weighted_metrics="auto"` is accuracy over the scored first pieces."""
        if isinstance(weighted_metrics, str) and weighted_metrics == "auto":
            weighted_metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, weighted_metrics=weighted_metrics, **kwargs)

    def postprocess(self, outputs):
        """Logits -> `label_id` and `probabilities` per position."""
        logits = keras.ops.cast(outputs, "float32")
        return answers_as_numpy({names.LABEL_ID: keras.ops.argmax(logits, axis=-1),
                                 names.PROBABILITIES: keras.ops.softmax(logits, axis=-1)})

    # === Raw text ===
    def _raw(self, x):
        return not isinstance(x, tf.data.Dataset) and not inputs_lib.is_packed(x) and self.preprocessor is not None

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """Logits (windows, sequence_length, num_classes), in the preprocessor's window order.

        Raw sentences give the same rows as `predict(preprocessor(x))`: one window per
        sentence unless a sentence needs more (see `TokenClassifierPreprocessor`).
        `predict_tags`/`predict_entities` map windows back to words.
        """
        if not self._raw(x):
            return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)
        self.checked_inputs(x, call="predict")
        columns = inputs_lib.as_columns(x)
        dataset = inputs_lib.in_memory_dataset(columns, batch_size=batch_size).map(self.preprocessor)
        return super().predict(dataset, verbose=verbose, steps=steps, callbacks=callbacks)

    def predict_tags(self, x, batch_size=None):
        """Sentences (or `(sentences, left, right)`) -> a list of tag lists, one tag per word."""
        if self.labels is None or self.preprocessor is None:
            raise ValueError("predict_tags needs `labels` (tag names) and a preprocessor. Set both on the task.")
        columns = inputs_lib.as_columns(x)
        check_texts(keras.tree.flatten(columns))  # an empty list is answered with an empty list
        count = inputs_lib.num_rows(columns)
        size = batch_size or inputs_lib.DEFAULT_BATCH_SIZE
        tags = []
        for begin in range(0, count, size):
            chunk = keras.tree.map_structure(lambda c: c[begin : begin + size], columns)
            windows = self.preprocessor.windows(chunk)
            packed = {k: windows[k] for k in PACKED_KEYS}
            ids = np.argmax(keras.Model.predict(self, packed, batch_size=size, verbose=0), axis=-1)
            words = TokenClassifierPreprocessor.word_predictions(windows, ids, len(keras.tree.flatten(chunk)[0]))
            tags.extend([[self.labels[i] for i in row] for row in words])
        return tags

    def predict_entities(self, texts, batch_size=None):
        """Texts (whitespace-separated words) -> per text, entities `{"type", "text", "start", "end"}`.

        A word is what whitespace separates, so `"Paris."` is one word: split
        punctuation off (as CoNLL does) for spans without it.
        """
        texts = [texts] if isinstance(texts, str) else list(texts)  # one string is a batch of one
        return TokenClassifierPreprocessor.entities(texts, self.predict_tags(texts, batch_size))

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "labels": self.labels, "dropout": self.dropout})
        return config

    @classmethod
    def from_preset(cls, preset, num_classes=None, labels=None, sequence_length=None, load_weights=True,
                    window_stride=None, **kwargs):
        """Builds a token classifier from a preset (see `Task.from_preset`).

        Args:
            preset: str. A registry name or alias, or a local directory / zip / checkpoint.
            num_classes: int or None. None: `len(labels)`, else the saved task's or the
                checkpoint head's.
            labels: list of str or None. Tag names (None: the saved task's).
            sequence_length: int or None. Defaults to the saved task's, else 128.
            load_weights: bool. Defaults to True.
            window_stride: int or None. Pieces between a long sentence's windows;
                None is the saved task's, else half a window.
            **kwargs: `dropout` (head and backbone) or backbone config overrides.
        """
        if num_classes is None and labels is not None:
            num_classes = len(labels)
        # window_stride is a preprocessor setting: the saved one unless given (Task.from_preset).
        return super().from_preset(
            preset, load_weights=load_weights, sequence_length=sequence_length,
            num_classes=num_classes, labels=labels, window_stride=window_stride, **kwargs,
        )
