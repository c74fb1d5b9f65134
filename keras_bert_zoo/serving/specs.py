"""What each task adds to `export`: its string inputs and its post-processing, as dense outputs.

A spec has `text_specs()` / `ids_specs()` (ordered `{name: tf.TensorSpec}`),
`preprocess(preprocessor, raw)` (raw strings by name -> packed ids),
`outputs(model_outputs, raw, packed)` (the task's answers, dense; `raw` is None on
the `ids` signature; `model_outputs` is `task(ids)`, or a spec's own `run_model(ids)`), and for the `examples` signature `example_features()`,
`examples_method()` and `example_outputs(outputs)`. Answers come from the task's own
`postprocess`, renamed to one name per row (`label`, not `labels`).
"""

import tensorflow as tf

CLASSIFY = "tensorflow/serving/classify"
REGRESS = "tensorflow/serving/regress"
PREDICT = "tensorflow/serving/predict"
_IDS = ("token_ids", "segment_ids", "padding_mask")


def _strings(name, shape=(None,)):
    return tf.TensorSpec(list(shape), tf.string, name=name)


def _refuse_text_inputs(text_inputs, task_name, inputs):
    if text_inputs is not None:
        raise ValueError(
            f"`text_inputs` is for classifiers; a {task_name} export takes {inputs}. "
            f"Received: text_inputs={text_inputs!r}. Drop the argument."
        )


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
        return {name: _strings(name) for name in self.names}

    def ids_specs(self):
        return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in _IDS}

    def preprocess(self, preprocessor, raw):
        columns = tuple(raw[name] for name in self.names)
        return preprocessor(columns if len(columns) == 2 else columns[0])

    def outputs(self, logits, raw, packed):
        answers = self.task.postprocess(logits)
        if self.regression:
            return {"score": tf.convert_to_tensor(answers["scores"])}
        label_id = tf.convert_to_tensor(answers["class_ids"])
        return {
            "label": tf.gather(self.labels, label_id),
            "label_id": label_id,
            "probabilities": tf.convert_to_tensor(answers["probabilities"]),
        }

    def example_features(self):
        # A missing feature reads as "" (a defined answer), not a failed batch.
        return {name: tf.io.FixedLenFeature([], tf.string, default_value="") for name in self.names}

    def examples_method(self):
        return REGRESS if self.regression else CLASSIFY

    def example_outputs(self, outputs):
        if self.regression:
            return {"outputs": outputs["score"]}  # regress: float (batch,)
        probabilities = outputs["probabilities"]
        classes = tf.tile(self.labels[tf.newaxis, :], [tf.shape(probabilities)[0], 1])
        return {"classes": classes, "scores": probabilities}  # classify: (batch, classes) each


class MultipleChoiceSpec:
    """`BertMultipleChoice`: `context` (batch,), `endings` (batch, num_choices) -> `choice`,
    `probabilities`."""

    def __init__(self, task, text_inputs=None):
        _refuse_text_inputs(text_inputs, "multiple-choice", "`context` and `endings`")
        self.task = task
        self.num_choices = task.num_choices

    def text_specs(self):
        return {"context": _strings("context"), "endings": _strings("endings", (None, self.num_choices))}

    def ids_specs(self):
        return {name: tf.TensorSpec([None, self.num_choices, None], tf.int32, name=name) for name in _IDS}

    def preprocess(self, preprocessor, raw):
        return preprocessor((raw["context"], raw["endings"]))

    def outputs(self, scores, raw, packed):
        answers = self.task.postprocess(scores)
        return {
            "choice": tf.convert_to_tensor(answers["choice_ids"]),
            "probabilities": tf.convert_to_tensor(answers["probabilities"]),
        }

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
    """`BertSpanExtractor`: `question`, `context` -> `answer_text`, `start_char`, `end_char`
    (character span in the context, -1 without an answer), `score`, `has_answer`.

    Windows, n-best, the longest answer and the stored null threshold are the task's, in
    the graph (its `SpanDecoder`). The `ids` signature gives the windows' `start_logits`
    and `end_logits`: answers need the context's text.
    """

    def __init__(self, task, text_inputs=None):
        _refuse_text_inputs(text_inputs, "span-extractor", "`question` and `context`")
        self.task = task

    def text_specs(self):
        return {"question": _strings("question"), "context": _strings("context")}

    def ids_specs(self):
        return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in _IDS}

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
        return {
            "answer_text": answers["answer_text"],
            "start_char": answers["answer_start"],
            "end_char": answers["answer_end"],
            "score": answers["score"],
            "has_answer": answers["answer_start"] >= 0,
        }

    def example_features(self):
        return {name: tf.io.FixedLenFeature([], tf.string, default_value="") for name in ("question", "context")}

    def examples_method(self):
        return PREDICT

    def example_outputs(self, outputs):
        return outputs


class TextExamples:
    """The `examples` signature of a task on one `text` feature: TF Serving's predict, the
    outputs of `serving_default` (a missing feature reads as "")."""

    def example_features(self):
        return {"text": tf.io.FixedLenFeature([], tf.string, default_value="")}

    def examples_method(self):
        return PREDICT

    def example_outputs(self, outputs):
        return outputs


class TokenClassifierSpec(TextExamples):
    """`BertTokenClassifier`: `text` -> the entities, padded:
    `entity_text`, `entity_type`, `start_char`, `end_char` (batch, max entities) and
    `num_entities`, as `predict_entities`. Invalid UTF-8 bytes are dropped first, so the
    offsets index the text as a client decodes it. `ids` gives per-piece `label_id` and
    `probabilities`."""

    def __init__(self, task, text_inputs=None):
        _refuse_text_inputs(text_inputs, "token-classifier", "`text`")
        if task.labels is None:
            raise ValueError(
                "A token-classifier export names its entities' types: set `task.labels` (the tag "
                "names, e.g. ['O', 'B-PER', 'I-PER']) before exporting. Received: labels=None."
            )
        self.task = task

    def text_specs(self):
        return {"text": _strings("text")}

    def ids_specs(self):
        return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in _IDS}

    def preprocess(self, preprocessor, raw):
        from keras_bert_zoo.serving.entities import clean_texts

        return preprocessor.windows(clean_texts(raw["text"]))

    def outputs(self, logits, raw, packed):
        from keras_bert_zoo.serving.entities import clean_texts, decode_entities

        answers = self.task.postprocess(logits)
        if raw is None:
            return {"label_id": tf.convert_to_tensor(answers["label_ids"]),
                    "probabilities": tf.convert_to_tensor(answers["probabilities"])}
        return decode_entities(clean_texts(raw["text"]), packed, answers["label_ids"], self.task.labels)



# By class name, so that this module imports no task model; a subclass of a listed task
# takes its nearest listed ancestor's spec.
_SPECS = {
    "BertClassifier": ClassifierSpec,
    "BertMultipleChoice": MultipleChoiceSpec,
    "BertSpanExtractor": SpanExtractorSpec,
    "BertTokenClassifier": TokenClassifierSpec,
}


def _fill_mask_spec(task, text_inputs=None):
    from keras_bert_zoo.serving.fill_mask import FillMaskSpec  # imports this module's helpers

    return FillMaskSpec(task, text_inputs)


def _feature_extractor_spec(task, text_inputs=None):
    from keras_bert_zoo.serving.features import FeatureExtractorSpec  # imports this module's helpers

    return FeatureExtractorSpec(task, text_inputs)


_SPECS["BertPretrainer"] = _fill_mask_spec
_SPECS["BertFeatureExtractor"] = _feature_extractor_spec


def serving_spec(task, text_inputs=None):
    """The export spec of `task`'s class; ValueError for a task that has none."""
    for task_class in type(task).__mro__:
        if task_class.__module__.startswith("keras_bert_zoo.") and task_class.__name__ in _SPECS:
            return _SPECS[task_class.__name__](task, text_inputs)
    raise ValueError(
        f"`task` must be one of the exportable tasks {sorted(_SPECS)}. "
        f"Received: task of type {type(task).__name__}."
    )
