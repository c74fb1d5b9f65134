"""`run_tagging_finetuning`: `tools/finetune.py --task conll2003`, NER by fine-tuning or frozen features (§5.3).

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
  "seconds", ...}` (written last; tokens are the non-padding word pieces of the windows);
- `dev_predictions.conll`: `word gold predicted` per line, a blank line between sentences;
- `preset/`: the trained task; `BertTokenClassifier.from_preset` (or
  `BertFeatureExtractor.from_preset`) reloads it with its labels and window settings.
"""

import logging
import os
import time
import warnings

import keras
import numpy as np

from keras_bert_zoo.finetuning.config import TFDS_PREFIX, flag
from keras_bert_zoo.finetuning.run import export_finetuned

logger = logging.getLogger("keras_bert_zoo.training")

PREDICTIONS_FILE = "dev_predictions.conll"


def read_tagging_data(config, name):
    """The `ConllData` of the data field `name` (a CoNLL file or a tfds split)."""
    from keras_bert_zoo.data.conll import load_conll2003_tfds, read_conll

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


class TaggingDevMetrics(keras.callbacks.Callback):
    """Tags the whole dev set after each epoch and scores entities as conlleval does.

    Args:
        task: the `BertTokenClassifier` (or `BertFeatureExtractor`) being trained; read
            directly, as the feature-based path fits its inner tagger.
        x: dev sentences (words joined by spaces).
        tags: gold IOB2 tags, one list per sentence.
        batch_size: int. Prediction batch size.
        report: callable `(str) -> None` or None, also given the one-line summary.
    """

    def __init__(self, task, x, tags, batch_size, report=None):
        super().__init__()
        self.task, self.x, self.tags, self.batch_size, self.report = task, x, tags, batch_size, report
        self.history, self.predictions, self.scores = [], None, None
        self.seconds = self.predict_seconds = 0.0

    def on_epoch_end(self, epoch, logs=None):
        from keras_bert_zoo.metrics.tagging import entity_scores

        start = time.perf_counter()
        self.predictions = self.task.predict_tags(self.x, batch_size=self.batch_size)
        self.predict_seconds = time.perf_counter() - start
        self.scores = entity_scores(self.tags, self.predictions)
        entry = {"epoch": epoch + 1, **{k: self.scores[k] for k in ("precision", "recall", "f1")}}
        self.history.append(entry)
        if logs is not None:
            logs.update({f"dev_{k}": v for k, v in entry.items() if k != "epoch"})
        line = (f"epoch {epoch + 1}: dev entity precision {entry['precision']:.4f} recall {entry['recall']:.4f} "
                f"F1 {entry['f1']:.4f}")
        logger.info(line)
        if self.report is not None:
            self.report(line)
        self.seconds += time.perf_counter() - start


def write_conll_predictions(path, words, gold, predicted):
    """`word gold predicted` per line, a blank line after each sentence (conlleval's input)."""
    from keras_bert_zoo.utils.files import atomic_write_text

    blocks = ["".join(f"{w} {g} {p}\n" for w, g, p in zip(*sentence)) for sentence in zip(words, gold, predicted)]
    atomic_write_text(path, "\n".join(blocks))


def _piece_count(preprocessor, x, batch=512):
    """Non-padding word pieces of the windows of `x` ([CLS]/[SEP] included)."""
    return sum(int(np.asarray(preprocessor.windows(x[i : i + batch])["padding_mask"]).sum())
               for i in range(0, len(x), batch))


def _build(config, labels, lowercase, detected):
    from keras_bert_zoo.text.token_classifier_preprocessor import TokenClassifierPreprocessor
    from keras_bert_zoo.training.distribute import get_strategy

    with get_strategy(config.strategy).scope():
        if config.feature_based:
            from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor

            task = BertFeatureExtractor.from_preset(config.preset, labels=labels, feature=config.feature_based,
                                                    lstm_units=config.lstm_units or 768,
                                                    sequence_length=config.sequence_length, dtype=config.precision,
                                                    **config.dropout_kwargs())
        else:
            from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier

            task = BertTokenClassifier.from_preset(config.preset, labels=labels,
                                                   sequence_length=config.sequence_length, dtype=config.precision,
                                                   **config.dropout_kwargs())
            task.compile(learning_rate=config.learning_rate, warmup_ratio=config.warmup_ratio)
    if lowercase != detected:
        logger.warning("Tokenizing with lowercase=%s as asked; the preset %r read as the other casing.",
                       lowercase, config.preset)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # from_preset warns of the contradiction check_preset resolved
            task.preprocessor = TokenClassifierPreprocessor.from_preset(
                config.preset, sequence_length=task.preprocessor.sequence_length,
                window_stride=task.preprocessor.window_stride, lowercase=lowercase)
    return task


def run_tagging_finetuning(config, lowercase, detected, start):
    """Runs one NER run (see the module docstring for what it writes).

    Args:
        config: `FinetuningConfig` with `task="conll2003"`.
        lowercase: bool. The casing `check_preset` settled on.
        detected: bool. The casing the preset's own settings give.
        start: float. `time.perf_counter()` at the start of the run.

    Returns:
        dict: the contents of `results.json`.
    """
    from keras_bert_zoo.data.conll import conll_inputs, conll_labels

    train = read_tagging_data(config, "train_file")
    dev = read_tagging_data(config, "dev_file")
    if config.max_train_examples is not None:
        n = config.max_train_examples
        train = train._replace(words=train.words[:n], tags=train.tags[:n], document_ids=train.document_ids[:n])
    labels = conll_labels(train.tags)
    if len(labels) < 2:
        raise ValueError(f"{flag('train_file')}: {config.train_file!r} has no entity tags (only 'O'); "
                         "a tagger needs at least one entity type.")
    x, y = conll_inputs(train, labels)
    x_dev, _ = conll_inputs(dev)

    keras.utils.set_random_seed(config.seed)
    task = _build(config, labels, lowercase, detected)
    report = print if config.progress else None
    callback = TaggingDevMetrics(task, x_dev, dev.tags, config.batch_size, report=report)
    verbose = 1 if config.progress else 0
    fit_start = time.perf_counter()
    if config.feature_based:
        task.fit_cached(x, y, epochs=config.epochs, batch_size=config.batch_size,
                        learning_rate=config.learning_rate, seed=config.seed, callbacks=[callback], verbose=verbose)
    else:
        task.fit(x, y, batch_size=config.batch_size, epochs=config.epochs, callbacks=[callback], verbose=verbose)
    train_seconds = time.perf_counter() - fit_start - callback.seconds

    os.makedirs(config.output_dir, exist_ok=True)
    write_conll_predictions(os.path.join(config.output_dir, PREDICTIONS_FILE), dev.words, dev.tags,
                            callback.predictions)
    task.save_to_preset(os.path.join(config.output_dir, "preset"))
    export_dir = export_finetuned(task, config)
    train_tokens = _piece_count(task.preprocessor, x)
    dev_tokens = _piece_count(task.preprocessor, x_dev)
    # Feature-based: BERT runs once over the data, the tagger `epochs` times over cached features.
    passes = 1 if config.feature_based else config.epochs
    results = {
        "task": config.task, "preset": config.preset,
        "mode": "feature_based" if config.feature_based else "fine_tuning", "feature": config.feature_based,
        "labels": labels,
        "dev": {k: callback.scores[k] for k in ("precision", "recall", "f1")},
        "dev_per_type": callback.scores["per_type"],
        "dev_per_epoch": callback.history,
        "dev_sentences": len(dev.words),
        "train_examples": len(train.words),
        "train_tokens": train_tokens,
        "epochs": config.epochs,
        "train_seconds": round(train_seconds, 2),
        "train_examples_per_second": round(len(train.words) * passes / max(train_seconds, 1e-9), 2),
        "train_tokens_per_second": round(train_tokens * passes / max(train_seconds, 1e-9), 1),
        "predict_seconds": round(callback.predict_seconds, 2),
        "predict_tokens_per_second": round(dev_tokens / max(callback.predict_seconds, 1e-9), 1),
        "seconds": round(time.perf_counter() - start, 2),
    }
    from keras_bert_zoo.utils.files import atomic_write_json

    if export_dir is not None:
        results["export_dir"] = export_dir
    atomic_write_json(os.path.join(config.output_dir, "results.json"), results)
    logger.info("NER %s: dev %s", results["mode"], results["dev"])
    return results
