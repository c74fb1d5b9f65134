"""`TaggingKind`: `tools/finetune.py --task conll2003`, NER by fine-tuning or frozen features (§5.3).

Reads CoNLL-format files (`--train-file`/`--dev-file`, e.g. CoNLL-2003's `eng.train` and
`eng.testa`; or `tfds:<split>` of tensorflow-datasets' `conll2003`), takes the label set
from the training file, and either fine-tunes a `BertTokenClassifier` (the task's default
`compile()`: the paper's AdamW recipe) or, with `feature_based`, trains the BiLSTM tagger
of a `BertFeatureExtractor` on that frozen feature choice (features computed once; Adam at
`learning_rate`, which the tagger wants far larger than fine-tuning: e.g. 1e-3). The dev
set is scored at entity level (conlleval's counting) after every epoch. Writes into
`output_dir`:

- `results.json`: `{"task", "preset", "mode", "feature", "labels", "dev": {"precision",
  "recall", "f1"}, "dev_per_type": {type: {...}}, "dev_per_epoch", "train_examples",
  "train_tokens", "train_seconds", "train_tokens_per_second", "predict_tokens_per_second",
  "seconds", ...}` and what `results_file.run_record` adds (the resolved config, the files'
  sentences, skipped lines, repaired tags and sha256, the all-O baseline, versions, warnings;
  written last; tokens are the non-padding word pieces of the windows);
- `dev_predictions.conll`: `word gold predicted` per line, a blank line between sentences;
- `preset/`: the trained task; `BertTokenClassifier.from_preset` (or
  `BertFeatureExtractor.from_preset`) reloads it with its labels and window settings.
"""

import logging
import os
import time

import numpy as np

from keras_bert_zoo.data.conll import conll_inputs, conll_labels, load_conll2003_tfds, read_conll
from keras_bert_zoo.finetuning.config import TFDS_PREFIX, flag
from keras_bert_zoo.finetuning.kind import TaskKind, per_second
from keras_bert_zoo.finetuning.results_file import file_record
from keras_bert_zoo.metrics.baselines import all_o_baseline
from keras_bert_zoo.metrics.tagging import entity_scores
from keras_bert_zoo.metrics.tagging_dev_metrics import TaggingDevMetrics
from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from keras_bert_zoo.tasks import names_of
from keras_bert_zoo.utils.files import atomic_write_text

logger = logging.getLogger("keras_bert_zoo.training")

PREDICTIONS_FILE = "dev_predictions.conll"


def read_tagging_data(config, name):
    """The `ConllData` of the data field `name` (a CoNLL file or a tfds split)."""
    source = getattr(config, name)
    try:
        if config.is_tfds(name):
            data = load_conll2003_tfds(source[len(TFDS_PREFIX):], config.tfds_data_dir)
        else:
            data = read_conll(source, repair=config.skip_malformed)
    except ValueError as e:
        raise ValueError(f"{flag(name)}: {e}") from e
    if data.repaired or data.skipped:
        logger.warning("%s: %d tags read as conlleval does, %d malformed lines skipped (--skip-malformed).",
                       source, data.repaired, data.skipped)
    if not data.words:
        raise ValueError(f"{flag(name)}: {source!r} has no sentences. Received: {name}={source!r}.")
    return data


def write_conll_predictions(path, words, gold, predicted):
    """`word gold predicted` per line, a blank line after each sentence (conlleval's input)."""
    blocks = ["".join(f"{w} {g} {p}\n" for w, g, p in zip(*sentence)) for sentence in zip(words, gold, predicted)]
    atomic_write_text(path, "\n".join(blocks))


def piece_count(preprocessor, x, batch=512):
    """Non-padding word pieces of the windows of `x` ([CLS]/[SEP] included)."""
    return sum(int(np.asarray(preprocessor.windows(x[i : i + batch])["padding_mask"]).sum())
               for i in range(0, len(x), batch))


class TaggingKind(TaskKind):
    """CoNLL-2003 NER: `BertTokenClassifier` (or, `feature_based`, the BiLSTM tagger of a
    `BertFeatureExtractor`), entity-level micro precision/recall/F1 on dev."""

    tasks = names_of("tagging")
    objectives = ("precision", "recall", "f1")

    def __init__(self, config, lowercase, detected):
        super().__init__(config, lowercase, detected)
        self.labels = self.train_data = self.dev_data = self.callback = None

    @property
    def task_class(self):
        return BertFeatureExtractor if self.config.feature_based else BertTokenClassifier

    def check_searchable(self):
        if self.config.feature_based:
            raise ValueError(f"{flag('feature_based')}: the search fine-tunes; the feature-based tagger is not "
                             f"searched. Received: feature_based={self.config.feature_based!r}. Drop the flag.")

    def read(self):
        c = self.config
        train = read_tagging_data(c, "train_file")
        dev = read_tagging_data(c, "dev_file")
        for name, data in (("train_file", train), ("dev_file", dev)):
            self.files[name] = file_record(c, name, "sentences", len(data.words), skipped=data.skipped,
                                           skipped_unit="lines with a wrong column count (--skip-malformed)",
                                           repaired_tags=data.repaired)
        if c.max_train_examples is not None:
            n = c.max_train_examples
            train = train._replace(words=train.words[:n], tags=train.tags[:n], document_ids=train.document_ids[:n])
            self.files["train_file"]["used"] = len(train.words)
        self.labels = conll_labels(train.tags)
        if len(self.labels) < 2:
            raise ValueError(f"{flag('train_file')}: {c.train_file!r} has no entity tags (only 'O'); "
                             "a tagger needs at least one entity type.")
        self.train_data, self.dev_data = train, dev
        self.train = conll_inputs(train, self.labels)
        self.dev = (conll_inputs(dev)[0], dev.tags)
        return self.train, self.dev

    def settle_recipe(self):
        """Fills in the batch size and learning rate a fine-tuning run left out, from the training
        sentences read (`FinetuningConfig.for_training_rows`), and prints the line that says so."""
        self.config, note = self.config.for_training_rows(len(self.train_data.words))
        if note:
            print(note, flush=True)

    def build(self, learning_rate, seed=None):
        c = self.config
        if c.feature_based:  # its tagger trains with Adam in `fit_cached`: nothing to compile
            task = BertFeatureExtractor.from_preset(self.preset, labels=self.labels, feature=c.feature_based,
                                                    lstm_units=c.lstm_units or 768,
                                                    sequence_length=c.sequence_length, dtype=c.precision,
                                                    **c.dropout_kwargs())
        else:
            task = BertTokenClassifier.from_preset(self.preset, labels=self.labels,
                                                   sequence_length=c.sequence_length, dtype=c.precision,
                                                   **c.dropout_kwargs())
            self.compile(task, learning_rate)
        return self.recase(task)

    def fit(self, task):
        """Trains with a `TaggingDevMetrics` (every epoch scored); feature-based: the tagger on
        features computed once. Returns the seconds spent training, the scoring's left out."""
        c = self.config
        x, y = self.train
        # One line per epoch, with or without the progress bar (`run_callbacks` ends its line first).
        self.callback = TaggingDevMetrics(task, self.dev[0], self.dev[1], c.batch_size, report=print)
        callbacks = self.run_callbacks([self.callback])
        start = time.perf_counter()
        if c.feature_based:
            task.fit_cached(x, y, epochs=c.epochs, batch_size=c.batch_size, learning_rate=c.learning_rate,
                            seed=c.seed, callbacks=callbacks, verbose=self.verbose())
        else:
            task.fit(x, y, batch_size=c.batch_size, epochs=c.epochs, callbacks=callbacks, verbose=self.verbose())
        return time.perf_counter() - start - self.callback.seconds

    def evaluate(self, task):
        x, tags = self.dev
        scores = entity_scores(tags, task.predict_tags(x, batch_size=self.config.batch_size))
        return {k: scores[k] for k in self.objectives}

    def score(self, task):
        """The last epoch's entity scores (`fit` scored every epoch)."""
        return {k: self.callback.scores[k] for k in self.objectives}

    def output_names(self):
        return super().output_names() + [PREDICTIONS_FILE]

    def write(self, task):
        dev = self.dev_data
        write_conll_predictions(os.path.join(self.config.output_dir, PREDICTIONS_FILE), dev.words, dev.tags,
                                self.callback.predictions)
        self.save_preset(task)

    def results(self, task, train_seconds, start, export_dir):
        c, callback = self.config, self.callback
        train_tokens = piece_count(task.preprocessor, self.train[0])
        dev_tokens = piece_count(task.preprocessor, self.dev[0])
        # Feature-based: BERT runs once over the data, the tagger `epochs` times over cached features.
        passes = 1 if c.feature_based else c.epochs
        train_examples = len(self.train_data.words)
        results = {
            "task": c.task, "preset": c.preset,
            "mode": "feature_based" if c.feature_based else "fine_tuning", "feature": c.feature_based,
            "labels": self.labels,
            "dev": self.score(task),
            "dev_per_type": callback.scores["per_type"],
            "dev_per_epoch": callback.history,
            "dev_sentences": len(self.dev_data.words),
            "train_examples": train_examples,
            "train_tokens": train_tokens,
            "epochs": c.epochs,
            "train_seconds": round(train_seconds, 2),
            "train_examples_per_second": round(per_second(train_examples * passes, train_seconds), 2),
            "train_tokens_per_second": round(per_second(train_tokens * passes, train_seconds), 1),
            "predict_seconds": round(callback.predict_seconds, 2),
            "predict_tokens_per_second": round(per_second(dev_tokens, callback.predict_seconds), 1),
            "seconds": round(time.perf_counter() - start, 2),
        }
        if export_dir is not None:
            results["export_dir"] = export_dir
        predicted = [tag for sentence in callback.predictions for tag in sentence]
        return self.record(task, results, all_o_baseline(self.dev_data.tags), predicted, unit="class",
                           lstm_units=(c.lstm_units or 768) if c.feature_based else None)

    def summary_label(self, results):
        return f"NER {results['mode']}"
