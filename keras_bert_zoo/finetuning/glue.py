"""`GlueKind`: the GLUE tasks in a fine-tuning run or search (see `kind.py`; SWAG's kind,
`swag.py`, is this one with its own reader, model and test file).

Reads the task's files (or tfds splits), fine-tunes a `BertClassifier` with the task's default
`compile()` (the paper's recipe), scores the whole dev set with the official metrics after every
epoch (`GlueDevMetrics`), and writes into `output_dir`:

- `results.json`: `{"task", "dev": {metric: value}, "dev_per_epoch", "train_examples",
  "dev_examples", "seconds", "train_seconds", "train_examples_per_second", ...}` and what
  `results_file.run_record` adds (the resolved config, the files' rows, skips and sha256, the
  majority-class baseline, versions, warnings; written last);
- `dev_predictions.tsv`: `index<TAB>prediction<TAB>label` per dev row, then the probability of
  each class (`probability_<label>`; SWAG: of each ending; a regression task, STS-B, has its score
  only); `index`
  is the file's own row id, kept when `--skip-malformed` drops a row before it (MNLI: also
  `dev_mismatched_predictions.tsv`);
- `preset/`: the fine-tuned task, which `BertClassifier.from_preset` reloads;
- GLUE's submission file for `test_file` (e.g. `CoLA.tsv`);
- with `export_dir`, there the fine-tuned task as a SavedModel that answers raw strings
  (results.json's `"export_dir"`; a pair task's inputs are `text_a` and `text_b`).
"""

import math
import os
import time

import numpy as np

from keras_bert_zoo.data.glue import glue_format, glue_labels, read_glue, write_glue_submission
from keras_bert_zoo.data.glue_tfds import load_glue_tfds
from keras_bert_zoo.finetuning.config import TFDS_PREFIX, flag
from keras_bert_zoo.finetuning.kind import TaskKind, per_second
from keras_bert_zoo.finetuning.results_file import file_record
from keras_bert_zoo.metrics.baselines import glue_baseline
from keras_bert_zoo.metrics.glue import glue_metrics
from keras_bert_zoo.metrics.glue_dev_metrics import GlueDevMetrics
from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.tasks import names_of, task_facts
from keras_bert_zoo.utils.files import atomic_write_text


def num_rows(x):
    """Rows of `x`: a column, or a tuple of columns (a sentence pair, SWAG's context and endings)."""
    return len(x[0]) if isinstance(x, tuple) else len(x)


def head(x, n):
    """The first `n` rows of `x` (a column or a tuple of columns)."""
    return tuple(column[:n] for column in x) if isinstance(x, tuple) else x[:n]


def read_glue_data(config, name, labelled, skipped=None):
    """`(x, y, ids)` of the data field `name` (a GLUE file or a tfds split); `ids` are the
    file's own (its id column, else the row's place among its data rows, dropped rows counted).
    With a `skipped` list, `(line number, message)` of each row `--skip-malformed` dropped is
    appended to it (a tfds split drops none)."""
    def read(source, errors):
        if config.is_tfds(name):
            x, y = load_glue_tfds(task_facts(config.task).tfds, source[len(TFDS_PREFIX):], config.tfds_data_dir)
            return x, y, [str(i) for i in range(num_rows(x))]
        return read_glue(config.task, source, errors=errors, with_ids=True, skipped=skipped)

    return read_task_data(config, name, labelled, read)


def read_task_data(config, name, labelled, read):
    """`(x, y, ids)` that `read(source, errors)` returns for the data field `name`, its errors
    prefixed with the flag, and refused where it has no rows or, `labelled`, no labels."""
    source = getattr(config, name)
    try:
        x, y, ids = read(source, "skip" if config.skip_malformed else "raise")
    except ValueError as e:
        raise ValueError(f"{flag(name)}: {e}") from e
    if labelled and y is None:
        raise ValueError(f"{flag(name)}: {source!r} has no labels (a test file?). Received: {name}={source!r}.")
    if not num_rows(x):
        raise ValueError(f"{flag(name)}: {source!r} has no rows.")
    return x, y, ids


def answers(values, names=None, regression=False):
    """Outputs (or gold label ids) -> the strings reported per row: the label's name (`names`,
    else its id: SWAG's choice), or a regression's score."""
    values = np.asarray(values)
    if regression:
        return [f"{v:.4f}" for v in values.astype("float32").reshape(-1)]
    ids = values.argmax(-1) if values.ndim == 2 else values.astype("int64")
    return [names[i] if names else str(i) for i in ids]


def probabilities(outputs):
    """Softmax of the logits `outputs` (rows, classes), in float64 (no overflow for large logits)."""
    logits = np.asarray(outputs, "float64")
    exp = np.exp(logits - logits.max(-1, keepdims=True))
    return exp / exp.sum(-1, keepdims=True)


def write_predictions(path, ids, outputs, y=None, names=None, regression=False):
    """`index<TAB>prediction[<TAB>label]` per row, then each class's probability
    (`probability_<label>` of `names`, else of the class id: SWAG's `probability_<ending>`; a
    regression: none, its score is the prediction), a header first."""
    predictions = answers(outputs, names, regression)
    gold = [""] * len(ids) if y is None else answers(y, names, regression)
    outputs = np.asarray(outputs)
    if regression or outputs.ndim != 2:
        names, table = [], np.zeros((len(ids), 0))
    else:
        table = probabilities(outputs)
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
    """`results.json`'s contents of a GLUE or SWAG run: the last epoch's dev metrics per dev set
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
    """The GLUE tasks: `BertClassifier` (one output: a regression, STS-B), `glue_metrics` on dev.

    What differs from SWAG's kind (`swag.SwagKind`, a subclass) is in `read_source`, `labels`,
    `build`, `write_test` and `test_names`; the rest reads the task's row (`keras_bert_zoo.tasks`).
    """

    tasks = names_of("glue")
    task_class = BertClassifier

    def __init__(self, config, lowercase, detected):
        super().__init__(config, lowercase, detected)
        self.facts = task_facts(config.task)
        self.objectives = self.facts.metrics
        self.dev_sets, self.test, self.callbacks = {}, None, {}

    @property
    def text_inputs(self):
        """A sentence-pair task's export takes `text_a` and `text_b`; others one text."""
        return self.facts.text_inputs

    @property
    def regression(self):
        """Whether a prediction is a score (STS-B), not a class."""
        return self.facts.unit == "score"

    def labels(self):
        """The label names in id order (None: a regression's score, or unnamed choices)."""
        return glue_labels(self.config.task)

    def read_source(self, name, labelled, skipped):
        """`(x, y, ids)` of the data field `name` (`read_glue_data`)."""
        return read_glue_data(self.config, name, labelled, skipped=skipped)

    def read_file(self, name, labelled):
        """`read_source` of the field `name`, its rows and skips kept for results.json."""
        skipped = []
        x, y, ids = self.read_source(name, labelled, skipped)
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
        labels = self.labels()
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

    def write_predictions(self, filename, ids, outputs, y=None):
        """`write_predictions` into `output_dir/filename`, in this task's label names."""
        write_predictions(os.path.join(self.config.output_dir, filename), ids, outputs, y, self.labels(),
                          self.regression)

    def write(self, task):
        c = self.config
        for name, callback in self.callbacks.items():
            _, y, ids = self.dev_sets[name]
            self.write_predictions(f"{name}_predictions.tsv", ids, callback.predictions, y)
        self.save_preset(task)
        if self.test is not None:
            x, _, ids = self.test
            self.write_test(ids, task.predict(x, batch_size=c.batch_size, verbose=0))

    def write_test(self, ids, outputs):
        """The test set's predictions: GLUE's submission file (MNLI's mismatched one by its file name)."""
        c = self.config
        mismatched = "mismatched" in os.path.basename(c.test_file)
        write_glue_submission(c.task, c.output_dir, ids, outputs, mismatched=mismatched)

    def output_names(self):
        return super().output_names() + ["dev_predictions.tsv", "dev_mismatched_predictions.tsv"] + self.test_names()

    def test_names(self):
        """What `write_test` may write: the task's submission file (MNLI's mismatched one too)."""
        return [glue_format(self.config.task).submission, "MNLI-mm.tsv"]

    def results(self, task, train_seconds, start, export_dir):
        c = self.config
        results = glue_results(c, self.callbacks, num_rows(self.train[0]), train_seconds, start, export_dir)
        for name, (x, _, _) in self.dev_sets.items():
            results[f"{name}_examples"] = num_rows(x)
        baseline = glue_baseline(c.task, self.dev[1], self.labels())
        baseline["dev"] = finite(baseline["dev"])
        predicted = answers(self.callbacks["dev"].predictions, self.labels(), self.regression)
        return self.record(task, results, baseline, predicted, unit=self.facts.unit)
