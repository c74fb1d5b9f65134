"""Per-task-kind adapters of the fine-tuning search: read the data, build a trial's task, score dev.

`run_tuning` is the same for every task; what differs is here. An adapter takes a
`FinetuningConfig` and supplies:

- `objectives`: the dev metrics its `evaluate` returns (an objective outside them is refused
  before any trial), and `default_objective`, the paper's official one;
- `read()`: the training `(x, y)` for `task.fit` (kept as `self.train`) and the dev set;
- `build(learning_rate, seed)`: the compiled task from the preset, *without* entering a
  distribution strategy: keras-tuner's `run_trial` builds it under the search's strategy
  (entering a second strategy object inside it is an error);
- `evaluate(task)`: the official dev metrics over the whole dev set;
- `task_class` and `text_inputs`: what reloads the best preset and exports it.

Kinds: GLUE and SWAG (`GlueKind`), SQuAD v1.1/v2.0 (`SquadKind`, objective `f1`), CoNLL NER
(`TaggingKind`, entity-level micro `f1`, conlleval's counting).
"""

import numpy as np

from keras_bert_zoo.finetuning.config import SQUAD_TASKS, TAGGING_TASKS, flag

# The paper's dev metric per GLUE task (GLUE's official one); accuracy for the others.
GLUE_OBJECTIVES = {"cola": "matthews_corrcoef", "mrpc": "f1", "qqp": "f1", "stsb": "pearson"}


class TaskKind:
    """Base adapter: the preset's casing settled once, as `run_finetuning` does."""

    objectives = ()
    default_objective = None
    text_inputs = None

    def __init__(self, config, lowercase, detected):
        self.config, self.lowercase, self.detected = config, lowercase, detected
        self.train = self.dev = None

    def _recase(self, task):
        if self.lowercase != self.detected:
            from keras_bert_zoo.finetuning.run import _recased

            task.preprocessor = _recased(task.preprocessor, self.config.preset, self.lowercase)
        return task

    def _compile(self, task, learning_rate):
        task.compile(learning_rate=learning_rate, warmup_ratio=self.config.warmup_ratio)
        return task


class GlueKind(TaskKind):
    """GLUE tasks and SWAG: `BertClassifier` / `BertMultipleChoice`, `glue_metrics` on dev."""

    def __init__(self, config, lowercase, detected):
        from keras_bert_zoo.metrics.glue import TASK_METRICS

        super().__init__(config, lowercase, detected)
        self.objectives = TASK_METRICS[config.task]
        self.default_objective = GLUE_OBJECTIVES.get(config.task, "accuracy")

    @property
    def task_class(self):
        if self.config.task == "swag":
            from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice

            return BertMultipleChoice
        from keras_bert_zoo.models.bert_classifier import BertClassifier

        return BertClassifier

    def read(self):
        from keras_bert_zoo.finetuning import run as ft

        x, y, _ = ft._read(self.config, "train_file", labelled=True)
        if self.config.max_train_examples is not None:
            x, y = ft._head(x, self.config.max_train_examples), y[: self.config.max_train_examples]
        self.train = (x, y)
        dev_x, dev_y, _ = ft._read(self.config, "dev_file", labelled=True)
        self.dev = (dev_x, dev_y)
        if self.config.task != "swag" and isinstance(x, tuple):
            self.text_inputs = ("text_a", "text_b")  # a sentence pair: two string inputs in the export
        return self.train, self.dev

    def build(self, learning_rate, seed):
        c = self.config
        if c.task == "swag":
            task = self.task_class.from_preset(c.preset, num_choices=len(self.train[0][1][0]),
                                               sequence_length=c.sequence_length, dtype=c.precision)
        else:
            from keras_bert_zoo.data.glue import glue_labels

            labels = glue_labels(c.task)
            task = self.task_class.from_preset(c.preset, num_classes=len(labels) if labels else 1, labels=labels,
                                               sequence_length=c.sequence_length, dtype=c.precision)
        return self._recase(self._compile(task, learning_rate))

    def evaluate(self, task):
        from keras_bert_zoo.metrics.glue import glue_metrics

        x, y = self.dev
        outputs = np.asarray(task.predict(x, batch_size=self.config.batch_size, verbose=0), dtype="float32")
        return glue_metrics(self.config.task, y, outputs)


class SquadKind(TaskKind):
    """SQuAD v1.1 (`squad1`) and v2.0 (`squad2`): `BertSpanExtractor`, the official EM/F1.

    The objective is `f1` for both. For v2.0 the null-answer threshold is first chosen on dev
    to maximise F1 (the paper, §4.3; the official script's `best_f1_thresh`) and kept in the
    task, so `f1` is the F1 of the model as saved and exported — equal to `best_f1` up to the
    official script's tie rule — while an untuned `f1` would score a threshold nobody uses.
    """

    default_objective = "f1"

    def __init__(self, config, lowercase, detected):
        super().__init__(config, lowercase, detected)
        self.version = {"squad1": "v1.1", "squad2": "v2.0"}[config.task]
        self.objectives = (("exact_match", "f1") if self.version == "v1.1" else
                           ("exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1"))

    @property
    def task_class(self):
        from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

        return BertSpanExtractor

    def read(self):
        from keras_bert_zoo.finetuning.squad import first_questions, read_squad_data

        train = read_squad_data(self.config, "train_file")
        if self.config.max_train_examples is not None:
            train = first_questions(train, self.config.max_train_examples)
        self.train, self.dev = (train.x, train.y), read_squad_data(self.config, "dev_file")
        return self.train, self.dev

    def build(self, learning_rate, seed):
        c = self.config
        task = self.task_class.from_preset(c.preset, sequence_length=c.sequence_length, dtype=c.precision,
                                           doc_stride=c.doc_stride, max_query_length=c.max_query_length)
        if c.max_answer_length is not None:
            task.max_answer_length = c.max_answer_length
        task.null_score_diff_threshold = None  # v1.1 always answers; v2.0 tunes its own on dev
        return self._recase(self._compile(task, learning_rate))

    def evaluate(self, task):
        size = self.config.batch_size
        tuned = task.tune_null_threshold(self.dev, batch_size=size) if self.version == "v2.0" else {}
        metrics, _ = task.squad_metrics(self.dev, self.version, batch_size=size)
        metrics = {k: v for k, v in metrics.items() if k in self.objectives}
        metrics.update({k: v for k, v in tuned.items() if k == "best_f1"})
        return metrics


class TaggingKind(TaskKind):
    """CoNLL-2003 NER: `BertTokenClassifier`, entity-level micro precision/recall/F1 on dev."""

    objectives = ("precision", "recall", "f1")
    default_objective = "f1"

    @property
    def task_class(self):
        from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier

        return BertTokenClassifier

    def read(self):
        from keras_bert_zoo.data.conll import conll_inputs, conll_labels
        from keras_bert_zoo.finetuning.tagging import read_tagging_data

        if self.config.feature_based:
            raise ValueError(f"{flag('feature_based')}: the search fine-tunes; the feature-based tagger is not "
                             f"searched. Received: feature_based={self.config.feature_based!r}. Drop the flag.")
        train = read_tagging_data(self.config, "train_file")
        n = self.config.max_train_examples
        if n is not None:
            train = train._replace(words=train.words[:n], tags=train.tags[:n], document_ids=train.document_ids[:n])
        self.labels = conll_labels(train.tags)
        if len(self.labels) < 2:
            raise ValueError(f"{flag('train_file')}: {self.config.train_file!r} has no entity tags (only 'O').")
        self.train = conll_inputs(train, self.labels)
        dev = read_tagging_data(self.config, "dev_file")
        self.dev = (conll_inputs(dev)[0], dev.tags)
        return self.train, self.dev

    def build(self, learning_rate, seed):
        c = self.config
        task = self.task_class.from_preset(c.preset, labels=self.labels, sequence_length=c.sequence_length,
                                           dtype=c.precision)
        return self._recase(self._compile(task, learning_rate))

    def evaluate(self, task):
        from keras_bert_zoo.metrics.tagging import entity_scores

        x, tags = self.dev
        scores = entity_scores(tags, task.predict_tags(x, batch_size=self.config.batch_size))
        return {k: scores[k] for k in self.objectives}


def task_kind(config, lowercase, detected):
    """The adapter of `config.task`."""
    if config.task in SQUAD_TASKS:
        return SquadKind(config, lowercase, detected)
    if config.task in TAGGING_TASKS:
        return TaggingKind(config, lowercase, detected)
    return GlueKind(config, lowercase, detected)
