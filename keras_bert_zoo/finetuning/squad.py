"""`SquadKind`: SQuAD v1.1 (`squad1`) and v2.0 (`squad2`) in a fine-tuning run or search (see `kind.py`).

Reads SQuAD JSON files as distributed (or `tfds:<split>` of `squad/v1.1`/`squad/v2.0`
prepared offline), fine-tunes a `BertSpanExtractor` with its default `compile()` (the
paper's recipe) over doc-stride windows, scores the dev set with the official metrics
after the last epoch (v2.0: after choosing the null threshold that maximises dev F1, as
the official script's `best_f1_thresh`) and writes into `output_dir`:

- `results.json`: `{"task", "dev": {"exact_match", "f1"}` (v1.1) or `{"exact", "f1",
  "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"}` (v2.0), `"train_examples"`
  (questions), `"train_windows"`, `"train_windows_per_second"`, `"dev_windows"`,
  `"predict_windows_per_second"`, `"predict_questions_per_second"`, `"seconds"`, ...}
  and what `results_file.run_record` adds (the resolved config and window settings, the files'
  questions, skipped answers and sha256, the empty-answer baseline, versions, warnings);
- `predictions.json`: the official format `{question id: answer text}` ("" = no answer);
- `null_odds.json` (v2.0): `{question id: null score minus best span score}`, the official
  script's `--na-prob-file` (an answer is "" where it exceeds `best_f1_thresh`);
- `preset/`: the fine-tuned task (window settings and the tuned threshold included),
  which `BertSpanExtractor.from_preset` reloads.
"""

import json
import os
import time

import numpy as np

from keras_bert_zoo.data.squad import SquadData, load_squad_tfds, read_squad
from keras_bert_zoo.finetuning.config import TFDS_PREFIX, flag
from keras_bert_zoo.finetuning.kind import TaskKind, per_second
from keras_bert_zoo.finetuning.results_file import file_record
from keras_bert_zoo.metrics.baselines import empty_answer_baseline
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.tasks import names_of, task_facts
from keras_bert_zoo.utils.files import atomic_write_json

VERSIONS = {"squad1": "v1.1", "squad2": "v2.0"}
V2_KEYS = ("exact", "f1", "HasAns_f1", "NoAns_f1")
COUNT_CHUNK = 256  # questions windowed per call when counting windows


def declared_version(path):
    """The file's top-level `"version"` ("1.1", "v2.0", ...) as "v1.1"/"v2.0", or None."""
    try:
        with open(path, encoding="utf-8") as f:
            version = json.load(f).get("version")
    except (ValueError, OSError, AttributeError):
        return None  # read_squad reports what is wrong with the file
    if not isinstance(version, str):
        return None
    return {"1.1": "v1.1", "2.0": "v2.0"}.get(version.lstrip("v"))


def read_squad_data(config, name):
    """`SquadData` of the data field `name`, checked against the task's SQuAD version."""
    source, version = getattr(config, name), VERSIONS[config.task]
    other = "squad2" if config.task == "squad1" else "squad1"
    try:
        if config.is_tfds(name):
            data = load_squad_tfds(f"squad/{version}", source[len(TFDS_PREFIX):], config.tfds_data_dir,
                                   skip_bad_answers=config.skip_malformed)
        else:
            declared = declared_version(source)
            if declared is not None and declared != version:
                raise ValueError(f"{source!r} says it is SQuAD {declared} (its \"version\" field), but "
                                 f"task={config.task!r} is SQuAD {version}. Use --task {other}.")
            data = read_squad(source, skip_bad_answers=config.skip_malformed)
    except ValueError as e:
        raise ValueError(f"{flag(name)}: {e}") from e
    if not len(data):
        raise ValueError(f"{flag(name)}: {source!r} has no questions.")
    unanswerable = int(data.is_impossible.sum())
    if version == "v1.1" and unanswerable:
        raise ValueError(f"{flag(name)}: {source!r} has {unanswerable} unanswerable question(s) (SQuAD v2.0's "
                         f"is_impossible), which SQuAD v1.1 has not. Use --task squad2.")
    return data


def first_questions(data, n):
    """The first `n` questions of `data` (a `SquadData`)."""
    return SquadData(data.ids[:n], data.questions[:n], data.contexts[:n], data.answers[:n],
                     data.answer_starts[:n], data.skipped)


def window_counts(preprocessor, data):
    """`(windows, the most of one question, that question's id)` of the questions of `data`."""
    total, most, which = 0, 0, None
    for begin in range(0, len(data), COUNT_CHUNK):
        windows = preprocessor.windows(data.questions[begin:begin + COUNT_CHUNK],
                                       data.contexts[begin:begin + COUNT_CHUNK])
        per_question = np.bincount(np.asarray(windows["example_index"]).reshape(-1))
        total += int(per_question.sum())
        if len(per_question) and per_question.max() > most:
            most, which = int(per_question.max()), data.ids[begin + int(per_question.argmax())]
    return total, most, which


def windows_line(name, data, counts, sequence_length):
    """The line that says what a file's questions cost: questions, windows, the longest."""
    total, most, which = counts
    return (f"{name}: {len(data)} questions -> {total} windows of {sequence_length} tokens "
            f"(question {which!r} makes the most, {most}, from a {len(data.contexts[list(data.ids).index(which)]):,}"
            f"-character context)" if which is not None else f"{name}: {len(data)} questions -> no windows")


class SquadKind(TaskKind):
    """SQuAD v1.1 (`squad1`) and v2.0 (`squad2`): `BertSpanExtractor`, the official EM/F1.

    The objective is `f1` for both. For v2.0 the null-answer threshold is first chosen on dev
    to maximise F1 (the paper, §4.3; the official script's `best_f1_thresh`) and kept in the
    task, so `f1` is the F1 of the model as saved and exported — equal to `best_f1` up to the
    official script's tie rule — while an untuned `f1` would score a threshold nobody uses.
    """

    tasks = names_of("squad")
    task_class = BertSpanExtractor

    def __init__(self, config, lowercase, detected):
        super().__init__(config, lowercase, detected)
        self.version = VERSIONS[config.task]
        self.objectives = task_facts(config.task).metrics
        self.train_data = self.metrics = self.predictions = self.null_odds = None
        self.predict_seconds, self.train_windows, self.dev_windows = 0.0, 0, 0

    def read_file(self, name):
        """`read_squad_data` of the field `name`; its questions, the questions `--skip-malformed` dropped
        and the misaligned answers it dropped kept for results.json."""
        data = read_squad_data(self.config, name)
        self.files[name] = file_record(self.config, name, "questions", len(data), skipped=len(data.dropped),
                                       skipped_ids=[str(where) for where, _ in data.dropped[:20]],
                                       skipped_answers=data.skipped)
        return data

    def read(self):
        train = self.read_file("train_file")
        if self.config.max_train_examples is not None:
            train = first_questions(train, self.config.max_train_examples)
            self.files["train_file"]["used"] = len(train)
        self.train_data, self.train = train, (train.x, train.y)
        self.dev = self.read_file("dev_file")
        return self.train, self.dev

    def build(self, learning_rate, seed=None):
        c = self.config
        settings = {name: getattr(c, name) for name in ("doc_stride", "max_query_length", "max_answer_length",
                                                         "rules")}
        task = BertSpanExtractor.from_preset(self.preset, sequence_length=c.sequence_length, dtype=c.precision,
                                             **settings, **c.dropout_kwargs())
        self.compile(task, learning_rate)
        # A preset fine-tuned on v2.0 brings its threshold; v1.1 always answers, v2.0 tunes anew.
        task.null_score_diff_threshold = None
        return self.recase(task)

    def predict_dev(self, task):
        """`(dev metrics, predictions)` in one prediction pass; v2.0 tunes the threshold on it
        (and sets it in the task, so the preset keeps it)."""
        start = time.perf_counter()
        answers = task.predict_best_spans(self.dev.x, batch_size=self.config.batch_size)
        if self.version == "v1.1":
            metrics, predictions = task.squad_metrics(self.dev, self.version, answers=answers)
        else:
            tuned = task.tune_null_threshold(self.dev, answers=answers)
            metrics, predictions = task.squad_metrics(self.dev, self.version, answers=answers)
            metrics = {**{key: metrics.get(key) for key in V2_KEYS}, **tuned}
        self.metrics, self.predictions = metrics, predictions
        self.null_odds = {qid: float(v) for qid, v in zip(self.dev.ids, answers["score_diff"])}
        self.predict_seconds = time.perf_counter() - start
        return metrics, predictions

    def evaluate(self, task):
        metrics, _ = self.predict_dev(task)
        return {k: v for k, v in metrics.items() if k in self.objectives and v is not None}

    def score(self, task):
        """The run's dev scoring after training: `predict_dev`, the dev windows counted."""
        metrics, _ = self.predict_dev(task)
        if self.config.progress:
            print(f"dev ({len(self.dev)} questions, {self.dev_windows} windows): {metrics}")
        return metrics

    def write(self, task):
        atomic_write_json(os.path.join(self.config.output_dir, "predictions.json"), self.predictions)
        if self.version == "v2.0":
            atomic_write_json(os.path.join(self.config.output_dir, "null_odds.json"), self.null_odds)
        self.save_preset(task)

    def output_names(self):
        return super().output_names() + ["predictions.json", "null_odds.json"]

    def fit(self, task):
        # Both files windowed before training: what the run will cost is said first (one long
        # context makes thousands of windows), and the dev file is known to window.
        length = task.preprocessor.sequence_length
        for name, data in (("train", self.train_data), ("dev", self.dev)):
            counts = window_counts(task.preprocessor, data)
            print(windows_line(name, data, counts, length), flush=True)
            if name == "train":
                self.train_windows = counts[0]
            else:
                self.dev_windows = counts[0]
        return super().fit(task)

    def results(self, task, train_seconds, start, export_dir):
        c, train, dev = self.config, self.train_data, self.dev
        results = {
            "task": c.task,
            "preset": c.preset,
            "dev": self.metrics,
            "train_examples": len(train),
            "train_windows": self.train_windows,
            "epochs": c.epochs,
            "train_seconds": round(train_seconds, 2),
            "train_examples_per_second": round(per_second(len(train) * c.epochs, train_seconds), 2),
            "train_windows_per_second": round(per_second(self.train_windows * c.epochs, train_seconds), 2),
            "dev_examples": len(dev),
            "dev_windows": self.dev_windows,
            "predict_seconds": round(self.predict_seconds, 2),
            "predict_questions_per_second": round(per_second(len(dev), self.predict_seconds), 2),
            "predict_windows_per_second": round(per_second(self.dev_windows, self.predict_seconds), 2),
            "sequence_length": task.preprocessor.sequence_length,
            "doc_stride": task.preprocessor.doc_stride,
            "rules": task.rules,
            "max_query_length": task.preprocessor.max_query_length,
            "skipped_answers": train.skipped + dev.skipped,
            "seconds": round(time.perf_counter() - start, 2),
        }
        if export_dir is not None:
            results["export_dir"] = export_dir
        baseline = empty_answer_baseline(dev.gold_answers(), self.version)
        kinds = ["no answer" if not text else "a span" for text in self.predictions.values()]
        # v1.1 always answers with a span: one kind of answer there says nothing.
        return self.record(task, results, baseline, kinds, unit="", one_class=self.version == "v2.0",
                           doc_stride=task.preprocessor.doc_stride,
                           max_query_length=task.preprocessor.max_query_length,
                           max_answer_length=task.max_answer_length, rules=task.rules)
