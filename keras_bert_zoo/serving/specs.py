"""What each task adds to `export`: its string inputs and its post-processing, as dense outputs.

A spec has `text_specs()` / `ids_specs()` (ordered `{name: tf.TensorSpec}`),
`preprocess(preprocessor, raw)` (raw strings by name -> packed ids),
`outputs(model_outputs, raw, packed)` (the task's answers, dense; `raw` is None on
the `ids` signature; `model_outputs` is `task(ids)`, or a spec's own `run_model(ids)`), and for the `examples` signature `example_features()`,
`examples_method()` and `example_outputs(outputs)`. Answers come from the task's own
`postprocess`, under its names (`models.answer_names`).
"""

import tensorflow as tf

from keras_bert_zoo.models import answer_names
from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from keras_bert_zoo.serving.entities import TokenClassifierSpec
from keras_bert_zoo.serving.features import FeatureExtractorSpec
from keras_bert_zoo.serving.fill_mask import FillMaskSpec
from keras_bert_zoo.serving.spec_base import CLASSIFY, IDS, PREDICT, REGRESS, refuse_text_inputs, string_spec


class ClassifierSpec:
    """`BertClassifier`: `text` (or `text_a`, `text_b`) -> `label`, `label_id`,
    `probabilities`; regression -> `score`."""

    def __init__(self, task, text_inputs=None):
        names = ("text",) if text_inputs is None else tuple(text_inputs)
        if len(names) not in (1, 2) or len(set(names)) != len(names) or not all(
            isinstance(n, str) and n.isidentifier() for n in names
        ):
            raise ValueError(
                "`text_inputs` must name one input (a sentence) or two (a pair), distinct "
                f"identifiers, e.g. ('text',) or ('text_a', 'text_b'). Received: text_inputs={text_inputs!r}."
            )
        self.task = task
        self.names = names
        self.regression = task.num_classes == 1
        labels = task.labels or [str(i) for i in range(task.num_classes)]
        self.labels = tf.constant(labels) if not self.regression else None

    def text_specs(self):
        return {name: string_spec(name) for name in self.names}

    def ids_specs(self):
        return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in IDS}

    def preprocess(self, preprocessor, raw):
        columns = tuple(raw[name] for name in self.names)
        return preprocessor(columns if len(columns) == 2 else columns[0])

    def outputs(self, logits, raw, packed):
        answers = self.task.postprocess(logits)
        if self.regression:
            return {answer_names.SCORE: tf.convert_to_tensor(answers[answer_names.SCORE])}
        label_id = tf.convert_to_tensor(answers[answer_names.LABEL_ID])
        return {
            answer_names.LABEL: tf.gather(self.labels, label_id),  # also without `task.labels` ("0", "1", ...)
            answer_names.LABEL_ID: label_id,
            answer_names.PROBABILITIES: tf.convert_to_tensor(answers[answer_names.PROBABILITIES]),
        }

    def example_features(self):
        # A missing feature reads as "" (a defined answer), not a failed batch.
        return {name: tf.io.FixedLenFeature([], tf.string, default_value="") for name in self.names}

    def examples_method(self):
        return REGRESS if self.regression else CLASSIFY

    def example_outputs(self, outputs):
        if self.regression:
            return {"outputs": outputs[answer_names.SCORE]}  # regress: float (batch,)
        probabilities = outputs[answer_names.PROBABILITIES]
        classes = tf.tile(self.labels[tf.newaxis, :], [tf.shape(probabilities)[0], 1])
        return {"classes": classes, "scores": probabilities}  # classify: (batch, classes) each


class MultipleChoiceSpec:
    """`BertMultipleChoice`: `context` (batch,), `endings` (batch, num_choices) -> `choice`,
    `probabilities`."""

    def __init__(self, task, text_inputs=None):
        refuse_text_inputs(text_inputs, "multiple-choice", "`context` and `endings`")
        self.task = task
        self.num_choices = task.num_choices

    def text_specs(self):
        return {"context": string_spec("context"), "endings": string_spec("endings", (None, self.num_choices))}

    def ids_specs(self):
        return {name: tf.TensorSpec([None, self.num_choices, None], tf.int32, name=name) for name in IDS}

    def preprocess(self, preprocessor, raw):
        return preprocessor((raw["context"], raw["endings"]))

    def outputs(self, scores, raw, packed):
        answers = self.task.postprocess(scores)
        return {key: tf.convert_to_tensor(answers[key]) for key in (answer_names.CHOICE, answer_names.PROBABILITIES)}

    def example_features(self):
        return {
            "context": tf.io.FixedLenFeature([], tf.string, default_value=""),
            "endings": tf.io.FixedLenFeature([self.num_choices], tf.string, default_value=[""] * self.num_choices),
        }

    def examples_method(self):
        return PREDICT

    def example_outputs(self, outputs):
        return outputs


class SpanExtractorSpec:
    """`BertSpanExtractor`: `question`, `context` -> `answer_text`, `answer_start`, `answer_end`
    (character span in the context, -1 without an answer), `score`, `has_answer`: the names of the
    task's `postprocess` (`models/answer_names.py`).

    Windows, n-best, the longest answer and the stored null threshold are the task's, in
    the graph (its `SpanDecoder`). The `ids` signature gives the windows' `start_logits`
    and `end_logits`: answers need the context's text.
    """

    def __init__(self, task, text_inputs=None):
        refuse_text_inputs(text_inputs, "span-extractor", "`question` and `context`")
        self.task = task

    def text_specs(self):
        return {"question": string_spec("question"), "context": string_spec("context")}

    def ids_specs(self):
        return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in IDS}

    def preprocess(self, preprocessor, raw):
        return preprocessor.windows(raw["question"], raw["context"])

    def outputs(self, logits, raw, packed):
        start_logits, end_logits = logits
        if raw is None:
            return {"start_logits": start_logits, "end_logits": end_logits}
        cut = tf.shape(start_logits)[1]
        outputs = {key: packed[key][:, :cut] for key in ("token_starts", "token_ends", "max_context")}
        outputs.update(example_index=packed["example_index"], start_logits=start_logits, end_logits=end_logits,
                       contexts=raw["context"])
        answers = self.task.postprocess(outputs)
        names = answer_names
        served = {key: answers[key] for key in (names.ANSWER_TEXT, names.ANSWER_START, names.ANSWER_END, names.SCORE)}
        served[names.HAS_ANSWER] = answers[names.ANSWER_START] >= 0
        return served

    def example_features(self):
        return {name: tf.io.FixedLenFeature([], tf.string, default_value="") for name in ("question", "context")}

    def examples_method(self):
        return PREDICT

    def example_outputs(self, outputs):
        return outputs


SERVING_SPECS = {
    BertClassifier: ClassifierSpec,
    BertMultipleChoice: MultipleChoiceSpec,
    BertSpanExtractor: SpanExtractorSpec,
    BertTokenClassifier: TokenClassifierSpec,
    BertFeatureExtractor: FeatureExtractorSpec,
    BertPretrainer: FillMaskSpec,
}
"""Each exportable task class -> its serving spec; a subclass takes its nearest listed ancestor's."""


def serving_spec(task, text_inputs=None):
    """The export spec of `task`'s class; ValueError for a task that has none."""
    for task_class in type(task).__mro__:
        if task_class in SERVING_SPECS:
            return SERVING_SPECS[task_class](task, text_inputs)
    raise ValueError(
        f"`task` must be one of the exportable tasks {sorted(c.__name__ for c in SERVING_SPECS)}. "
        f"Received: task of type {type(task).__name__}."
    )
