"""`GlueKind`: the GLUE tasks and SWAG in a fine-tuning run or search (see `kind.py`).

Reads the task's files (or tfds splits), fine-tunes a `BertClassifier` (SWAG: a
`BertMultipleChoice`) with the task's default `compile()` (the paper's recipe), scores the
whole dev set with the official metrics after every epoch (`GlueDevMetrics`), and writes into
`output_dir`:

- `results.json`: `{"task", "dev": {metric: value}, "dev_per_epoch", "train_examples",
  "dev_examples", "seconds", "train_seconds", "train_examples_per_second", ...}` and what
  `results_file.run_record` adds (the resolved config, the files' rows, skips and sha256, the
  majority-class baseline, versions, warnings; written last);
- `dev_predictions.tsv`: `index<TAB>prediction<TAB>label` per dev row, then the probability of
  each class (`probability_<label>`; SWAG: of each ending; STS-B has its score only); `index`
  is the file's own row id, kept when `--skip-malformed` drops a row before it (MNLI: also
  `dev_mismatched_predictions.tsv`);
- `preset/`: the fine-tuned task, which `BertClassifier.from_preset` reloads;
- GLUE's submission file for `test_file` (e.g. `CoLA.tsv`; SWAG: `test_predictions.tsv`);
- with `export_dir`, there the fine-tuned task as a SavedModel that answers raw strings
  (results.json's `"export_dir"`; a pair task's inputs are `text_a` and `text_b`).
"""

import math
import os
import time

import numpy as np

from keras_bert_zoo.data.glue import GLUE_TASKS, glue_format, glue_labels, read_glue, write_glue_submission
from keras_bert_zoo.data.glue_tfds import load_glue_tfds
from keras_bert_zoo.data.swag import read_swag
from keras_bert_zoo.finetuning.config import TFDS_PREFIX, flag
from keras_bert_zoo.finetuning.kind import TaskKind, per_second
from keras_bert_zoo.finetuning.results_file import file_record
from keras_bert_zoo.metrics.baselines import glue_baseline
from keras_bert_zoo.metrics.glue import TASK_METRICS, glue_metrics
from keras_bert_zoo.metrics.glue_dev_metrics import GlueDevMetrics
from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.utils.files import atomic_write_text

# The paper's dev metric per GLUE task (GLUE's official one); accuracy for the others.
GLUE_OBJECTIVES = {"cola": "matthews_corrcoef", "mrpc": "f1", "qqp": "f1", "stsb": "pearson"}


def num_rows(x):
    """Rows of `x`: a column, or a tuple of columns (a sentence pair, SWAG's context and endings)."""
    return len(x[0]) if isinstance(x, tuple) else len(x)


def head(x, n):
    """The first `n` rows of `x` (a column or a tuple of columns)."""
    return tuple(column[:n] for column in x) if isinstance(x, tuple) else x[:n]


def read_glue_data(config, name, labelled, skipped=None):
    """`(x, y, ids)` of the data field `name` (a GLUE/SWAG file or a tfds split); `ids` are the
    file's own (its id column, else the row's place among its data rows, dropped rows counted).
    With a `skipped` list, `(line number, message)` of each row `--skip-malformed` dropped is
    appended to it (a tfds split drops none)."""
    source = getattr(config, name)
    errors = "skip" if config.skip_malformed else "raise"
    try:
        if config.is_tfds(name):
            x, y = load_glue_tfds(f"glue/{config.task}", source[len(TFDS_PREFIX):], config.tfds_data_dir)
            ids = [str(i) for i in range(num_rows(x))]
        elif config.task == "swag":
            x, y, ids = read_swag(source, errors=errors, with_ids=True, skipped=skipped)
        else:
            x, y, ids = read_glue(config.task, source, errors=errors, with_ids=True, skipped=skipped)
    except ValueError as e:
        raise ValueError(f"{flag(name)}: {e}") from e
    if labelled and y is None:
        raise ValueError(f"{flag(name)}: {source!r} has no labels (a test file?). Received: {name}={source!r}.")
    if not num_rows(x):
        raise ValueError(f"{flag(name)}: {source!r} has no rows.")
    return x, y, ids


def answers(task, values):
    """Outputs (or gold label ids) -> the strings reported per row: label name, score or choice."""
    values = np.asarray(values)
    if task == "stsb":
        return [f"{v:.4f}" for v in values.astype("float32").reshape(-1)]
    ids = values.argmax(-1) if values.ndim == 2 else values.astype("int64")
    names = glue_labels(task) if task != "swag" else None
    return [names[i] if names else str(i) for i in ids]


def probabilities(outputs):
    """Softmax of the logits `outputs` (rows, classes), in float64 (no overflow for large logits)."""
    logits = np.asarray(outputs, "float64")
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def write_predictions(path, task, ids, outputs, y=None):
    """`index<TAB>prediction[<TAB>label]` per row, then each class's probability
    (`probability_<label>`; SWAG: `probability_<ending>`; STS-B: none, its score is the
    prediction), a header first."""
    predictions = answers(task, outputs)
    gold = [""] * len(ids) if y is None else answers(task, y)
    outputs = np.asarray(outputs)
    if task == "stsb" or outputs.ndim != 2:
        names, table = [], np.zeros((len(ids), 0))
    else:
        names, table = glue_labels(task) if task != "swag" else None, probabilities(outputs)
        names = names or [str(i) for i in range(table.shape[1])]
    header = "\t".join(["index", "prediction"] + ([] if y is None else ["label"])
                       + [f"probability_{name}" for name in names])
    rows = ["\t".join([str(i), p] + ([] if y is None else [g]) + [f"{v:.6f}" for v in values])
            for i, p, g, values in zip(ids, predictions, gold, table)]
    atomic_write_text(path, "\n".join([header] + rows) + "\n")


def finite(metrics):
    """`metrics` with NaN as None (JSON has no NaN)."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}


def glue_results(config, callbacks, train_examples, train_seconds, start, export_dir=None):
    """`results.json`'s contents of a GLUE/SWAG run: the last epoch's dev metrics per dev set
    (`callbacks`: `{name: GlueDevMetrics}`), every epoch's, and the run's sizes and times."""
    results = {"task": config.task, "preset": config.preset, "precision": config.precision}
    if export_dir is not None:
        results["export_dir"] = export_dir
    for name, callback in callbacks.items():
        last = dict(callback.history[-1])
        last.pop("epoch")
        results[name] = finite(last)
        results[f"{name}_per_epoch"] = [finite(h) for h in callback.history]
    results.update({
        "train_examples": train_examples,
        "epochs": config.epochs,
        "train_seconds": round(train_seconds, 2),
        "train_examples_per_second": round(per_second(train_examples * config.epochs, train_seconds), 2),
        "seconds": round(time.perf_counter() - start, 2),
    })
    return results


class GlueKind(TaskKind):
    """GLUE tasks and SWAG: `BertClassifier` / `BertMultipleChoice`, `glue_metrics` on dev."""

    tasks = GLUE_TASKS + ("swag",)

    def __init__(self, config, lowercase, detected):
        super().__init__(config, lowercase, detected)
        self.objectives = TASK_METRICS[config.task]
        self.dev_sets, self.test, self.callbacks = {}, None, {}

    @classmethod
    def objective_for(cls, task):
        return GLUE_OBJECTIVES.get(task, "accuracy")

    @property
    def task_class(self):
        return BertMultipleChoice if self.config.task == "swag" else BertClassifier

    @property
    def text_inputs(self):
        """A GLUE sentence-pair task's export takes `text_a` and `text_b`; others one text."""
        task = self.config.task
        return ("text_a", "text_b") if task in GLUE_TASKS and len(glue_format(task).text_columns) == 2 else None

    def read_file(self, name, labelled):
        """`read_glue_data` of the field `name`, its rows and skips kept for results.json."""
        skipped = []
        x, y, ids = read_glue_data(self.config, name, labelled, skipped=skipped)
        self.files[name] = file_record(self.config, name, "rows", num_rows(x), skipped=len(skipped),
                                       skipped_lines=[line for line, _ in skipped[:20]])
        return x, y, ids

    def read(self):
        c = self.config
        x, y, _ = self.read_file("train_file", labelled=True)
        if c.max_train_examples is not None:
            x, y = head(x, c.max_train_examples), y[: c.max_train_examples]
            self.files["train_file"]["used"] = num_rows(x)
        self.train = (x, y)
        self.dev_sets = {"dev": self.read_file("dev_file", labelled=True)}
        if c.dev_mismatched_file is not None:
            self.dev_sets["dev_mismatched"] = self.read_file("dev_mismatched_file", labelled=True)
        self.test = self.read_file("test_file", labelled=False) if c.test_file is not None else None
        self.dev = self.dev_sets["dev"][:2]
        return self.train, self.dev

    def build(self, learning_rate, seed=None):
        c = self.config
        if c.task == "swag":
            task = BertMultipleChoice.from_preset(self.preset, num_choices=len(self.train[0][1][0]),
                                                  sequence_length=c.sequence_length, dtype=c.precision,
                                                  **c.dropout_kwargs())
        else:
            labels = glue_labels(c.task)
            task = BertClassifier.from_preset(self.preset, num_classes=len(labels) if labels else 1, labels=labels,
                                              sequence_length=c.sequence_length, dtype=c.precision,
                                              **c.dropout_kwargs())
        return self.recase(self.compile(task, learning_rate))

    def fit(self, task):
        """Trains with a `GlueDevMetrics` per dev set (every epoch scored); returns the seconds
        spent training, the scoring's left out."""
        c = self.config
        # One line per epoch and dev set, with or without the progress bar (`run_callbacks` ends its line first).
        self.callbacks = {name: GlueDevMetrics(c.task, x, y, c.batch_size, prefix=name + "_", report=print)
                          for name, (x, y, _) in self.dev_sets.items()}
        start = time.perf_counter()
        task.fit(*self.train, batch_size=c.batch_size, epochs=c.epochs,
                 callbacks=self.run_callbacks(self.callbacks.values()), verbose=self.verbose())
        return time.perf_counter() - start - sum(callback.seconds for callback in self.callbacks.values())

    def evaluate(self, task):
        x, y = self.dev
        outputs = np.asarray(task.predict(x, batch_size=self.config.batch_size, verbose=0), dtype="float32")
        return glue_metrics(self.config.task, y, outputs)

    def score(self, task):
        """The last epoch's dev metrics (`fit` scored every epoch)."""
        return {k: v for k, v in self.callbacks["dev"].history[-1].items() if k != "epoch"}

    def write(self, task):
        c = self.config
        for name, callback in self.callbacks.items():
            _, y, ids = self.dev_sets[name]
            write_predictions(os.path.join(c.output_dir, f"{name}_predictions.tsv"), c.task, ids,
                              callback.predictions, y)
        self.save_preset(task)
        if self.test is not None:
            x, _, ids = self.test
            outputs = task.predict(x, batch_size=c.batch_size, verbose=0)
            if c.task == "swag":
                write_predictions(os.path.join(c.output_dir, "test_predictions.tsv"), "swag", ids, outputs)
            else:
                mismatched = "mismatched" in os.path.basename(c.test_file)
                write_glue_submission(c.task, c.output_dir, ids, outputs, mismatched=mismatched)

    def output_names(self):
        names = super().output_names() + ["dev_predictions.tsv", "dev_mismatched_predictions.tsv"]
        if self.config.task == "swag":
            return names + ["test_predictions.tsv"]
        return names + [glue_format(self.config.task).submission, "MNLI-mm.tsv"]

    def results(self, task, train_seconds, start, export_dir):
        c = self.config
        results = glue_results(c, self.callbacks, num_rows(self.train[0]), train_seconds, start, export_dir)
        for name, (x, _, _) in self.dev_sets.items():
            results[f"{name}_examples"] = num_rows(x)
        y = self.dev[1]
        baseline = glue_baseline(c.task, y, glue_labels(c.task) if c.task != "swag" else None)
        baseline["dev"] = finite(baseline["dev"])
        unit = {"stsb": "score", "swag": "choice"}.get(c.task, "class")
        return self.record(task, results, baseline, answers(c.task, self.callbacks["dev"].predictions), unit=unit)
