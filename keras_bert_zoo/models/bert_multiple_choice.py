"""`BertMultipleChoice`: picks one of a fixed number of endings for a context (SWAG, §4.4)."""

import keras

from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.models import answer_names as names
from keras_bert_zoo.models.task import Task
from keras_bert_zoo.models.task_pipeline import answers_as_numpy
from keras_bert_zoo.models.task_inputs import packed_inputs
from keras_bert_zoo.text.multiple_choice_preprocessor import MultipleChoicePreprocessor


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class _FoldChoices(keras.layers.Layer):
    """Moves the choices axis into the batch: (batch, choices, seq) → (batch * choices, seq)."""

    def call(self, x):
        return keras.ops.reshape(x, (-1, keras.ops.shape(x)[-1]))


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class _UnfoldChoices(keras.layers.Layer):
    """One score per choice back in its row: (batch * choices, 1) → (batch, choices)."""

    def __init__(self, num_choices, **kwargs):
        super().__init__(**kwargs)
        self.num_choices = num_choices

    def call(self, x):
        return keras.ops.reshape(x, (-1, self.num_choices))

    def compute_output_shape(self, input_shape):
        # Given, not traced: JAX cannot split a symbolic (batch * choices) dimension by -1.
        rows = input_shape[0]
        return (None if rows is None else rows // self.num_choices, self.num_choices)

    def get_config(self):
        return dict(super().get_config(), num_choices=self.num_choices)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertMultipleChoice(Task):
    """Scores each (context, ending) pair through the shared encoder; softmax over the choices.

    As the paper's SWAG setup (§4.4): each of the `num_choices` sequences
    `[CLS] context [SEP] ending_i [SEP]` goes through BERT; a vector (the dense layer
    on the pooled `[CLS]` output, after dropout) scores it; the loss is the softmax
    cross-entropy over the choices' scores with the index of the right ending as label.

    Args:
        backbone: `keras_bert_zoo.BertBackbone`.
        num_choices: int >= 2. Choices per example (4 for SWAG), fixed per model.
        preprocessor: `keras_bert_zoo.text.MultipleChoicePreprocessor` or None (the
            caller feeds ids).
        dropout: float. Dropout on the pooled output. Defaults to 0.1.

    Call arguments:
        inputs: dict of `token_ids`, `segment_ids`, `padding_mask`, each
            (batch, num_choices, seq).

    Returns:
        Scores (logits) (batch, num_choices).

    Examples:
    >>> model = keras_bert_zoo.BertMultipleChoice.from_preset("tiny_preset", num_choices=4)
    >>> (contexts, endings), labels = keras_bert_zoo.data.read_swag("swag/val.csv")
    >>> history = model.fit((contexts, endings), labels, epochs=1, verbose=0)  # endings: (N, 4) strings
    >>> sorted(history.history)
    ['accuracy', 'loss']
    """

    preprocessor_cls = MultipleChoicePreprocessor
    preset_defaults = {"num_choices": 4}
    skippable_padding = "always"  # its outputs and loss read [CLS] only

    def __init__(self, backbone, num_choices, preprocessor=None, dropout=0.1, **kwargs):
        if not isinstance(num_choices, int) or isinstance(num_choices, bool) or num_choices < 2:
            raise ValueError(f"`num_choices` must be an int >= 2. Received: num_choices={num_choices!r}.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"`dropout` must be in [0, 1). Received: dropout={dropout!r}.")
        # === Layers ===
        policy = backbone.dtype_policy
        self.backbone = backbone
        self.preprocessor = preprocessor
        fold = _FoldChoices(name="fold_choices")
        self.output_dropout = keras.layers.Dropout(dropout, dtype=policy, name="output_dropout")
        self.output_dense = keras.layers.Dense(1, kernel_initializer=bert_initializer(), dtype=policy, name="scores")
        unfold = _UnfoldChoices(num_choices, name="unfold_choices")
        # === Config ===
        self.num_choices = num_choices
        self.dropout = dropout
        # === Functional model ===
        inputs = packed_inputs(backbone, num_choices)
        folded = {name: fold(value) for name, value in inputs.items()}  # (batch * choices, seq)
        pooled = backbone(folded)["pooled_output"]  # (batch * choices, hidden)
        outputs = unfold(self.output_dense(self.output_dropout(pooled)))  # (batch, choices)
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def default_loss(self):
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def default_metrics(self):
        return [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]

    def head_variables(self):
        """The scoring vector under the classifier's names (HF `BertForMultipleChoice`'s
        `classifier` is (1, hidden), `output_weights` [1, hidden] in canonical layout)."""
        return {"output_weights": self.output_dense.kernel, "output_bias": self.output_dense.bias}

    def postprocess(self, outputs):
        """Scores → `choice` (the best ending) and `probabilities` over the choices."""
        scores = keras.ops.cast(outputs, "float32")
        return answers_as_numpy({names.CHOICE: keras.ops.argmax(scores, axis=-1),
                                 names.PROBABILITIES: keras.ops.softmax(scores, axis=-1)})

    def get_config(self):
        config = super().get_config()
        config.update({"num_choices": self.num_choices, "dropout": self.dropout})
        return config

    @classmethod
    def from_preset(cls, preset, num_choices=None, sequence_length=None, load_weights=True, **kwargs):
        """Builds the task from a preset (see `Task.from_preset`).

        Args:
            preset: str. Registry name or alias, or a local directory / zip /
                checkpoint in our, Google's or HF's layout.
            num_choices: int or None. None: the saved task's, else 4 (SWAG).
            sequence_length: int or None. Per (context, ending) pair; defaults to the
                saved task's, else 128.
            load_weights: bool. Defaults to True.
            **kwargs: `dropout` (head and backbone) or backbone config overrides.
        """
        return super().from_preset(
            preset, load_weights=load_weights, sequence_length=sequence_length, num_choices=num_choices, **kwargs
        )
