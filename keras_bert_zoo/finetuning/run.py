"""`run_finetuning`: the core of `tools/finetune.py`, one fine-tuning run of a GLUE task or SWAG.

Reads the task's files (or tfds splits), fine-tunes a preset with the task's default
`compile()` (the paper's recipe), scores the whole dev set with the official metrics
after every epoch, and writes into `output_dir`:

- `results.json`: `{"task", "dev": {metric: value}, "dev_per_epoch", "train_examples",
  "seconds", "train_seconds", "train_examples_per_second", ...}` (written last);
- `dev_predictions.tsv`: `index<TAB>prediction<TAB>label` per dev row;
- `preset/`: the fine-tuned task, which `BertClassifier.from_preset` reloads;
- GLUE's submission file for `test_file` (e.g. `CoLA.tsv`; SWAG: `test_predictions.tsv`);
- with `export_dir`, there the fine-tuned task as a SavedModel that answers raw strings
  (`export_finetuned`; results.json's `"export_dir"`).
"""

import logging
import math
import os
import time

import numpy as np

from keras_bert_zoo.data.glue import GLUE_TASKS, glue_format, glue_labels, read_glue, write_glue_submission
from keras_bert_zoo.data.swag import read_swag
from keras_bert_zoo.finetuning.config import (SQUAD_TASKS, TAGGING_TASKS, TFDS_PREFIX, FinetuningConfig,
                                                       flag)
from keras_bert_zoo.presets.config import CASED_SHARE

logger = logging.getLogger("keras_bert_zoo.training")

__all__ = ["FinetuningConfig", "check_preset", "run_finetuning"]



def check_preset(config):
    """Refuses a preset or `lowercase` setting that contradicts the preset's vocabulary.

    The vocabulary decides what casing can be right: a cased one has many capitalised
    pieces (more than 1%), an uncased one (almost) none. Without `lowercase`, the
    preset's own casing (its registry entry, saved config or name, as the original
    `validate_case_matches_checkpoint`, else any capitalised token) must agree with it;
    an explicit `lowercase` must agree with the vocabulary and then wins (HF folders
    whose name says neither and whose vocabulary holds a capital symbol or two, such as
    all-MiniLM-L6-v2's "ℝ", read as cased otherwise).

    Returns:
        `(lowercase, detected)`: the casing to use and the one the preset's settings give.
    """
    from keras_bert_zoo.presets.config import preset_lowercase
    from keras_bert_zoo.text.vocabulary import load_vocabulary
    from keras_bert_zoo.presets.loading import get_preset_vocabulary

    try:
        tokens = load_vocabulary(get_preset_vocabulary(config.preset))
    except (ValueError, OSError, KeyError) as e:
        raise ValueError(f"{flag('preset')}: cannot read its vocabulary ({e}). Received: {config.preset!r}.") from e
    capitalised = [t for t in tokens if not t.startswith("[") and any(c.isupper() for c in t)]
    vocabulary_uncased = len(capitalised) <= CASED_SHARE * len(tokens)
    found = f"{len(capitalised)} of {len(tokens)} tokens have capitals, e.g. {capitalised[:3]}"
    detected = preset_lowercase(config.preset, tokens)
    if config.lowercase is not None:
        if bool(config.lowercase) != vocabulary_uncased:
            raise ValueError(
                f"{'--lowercase' if config.lowercase else '--no-lowercase'} contradicts the vocabulary of "
                f"{config.preset!r}, which is {'uncased' if vocabulary_uncased else 'cased'} ({found})."
            )
        return bool(config.lowercase), detected
    if detected != vocabulary_uncased:
        raise ValueError(
            f"{flag('preset')}: {config.preset!r} reads as {'uncased' if detected else 'cased'} (from its registry "
            "entry, saved config or name, else from any capitalised token), but its vocabulary is "
            f"{'uncased' if vocabulary_uncased else 'cased'} ({found}). Text would not be tokenized as the "
            f"checkpoint's training text. If the vocabulary is right, say so with "
            f"{'--lowercase' if vocabulary_uncased else '--no-lowercase'}; else use the checkpoint's own vocabulary."
        )
    return detected, detected


def _num_rows(x):
    return len(x[0]) if isinstance(x, tuple) else len(x)


def _head(x, n):
    return tuple(column[:n] for column in x) if isinstance(x, tuple) else x[:n]


def _read(config, name, labelled):
    """`(x, y, ids)` of the data field `name` (a file or a tfds split)."""
    source = getattr(config, name)
    errors = "skip" if config.skip_malformed else "raise"
    try:
        if config.is_tfds(name):
            from keras_bert_zoo.data.glue_tfds import load_glue_tfds

            x, y = load_glue_tfds(f"glue/{config.task}", source[len(TFDS_PREFIX):], config.tfds_data_dir)
            ids = [str(i) for i in range(_num_rows(x))]
        elif config.task == "swag":
            x, y = read_swag(source, errors=errors)
            ids = [str(i) for i in range(_num_rows(x))]
        else:
            x, y, ids = read_glue(config.task, source, errors=errors, with_ids=True)
    except ValueError as e:
        raise ValueError(f"{flag(name)}: {e}") from e
    if labelled and y is None:
        raise ValueError(f"{flag(name)}: {source!r} has no labels (a test file?). Received: {name}={source!r}.")
    if not _num_rows(x):
        raise ValueError(f"{flag(name)}: {source!r} has no rows.")
    return x, y, ids


def _build_task(config, train_x):
    from keras_bert_zoo.training.distribute import get_strategy

    strategy = get_strategy(config.strategy)
    with strategy.scope():
        if config.task == "swag":
            from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice

            task = BertMultipleChoice.from_preset(config.preset, num_choices=len(train_x[1][0]),
                                                  sequence_length=config.sequence_length, dtype=config.precision,
                                                  **config.dropout_kwargs())
        else:
            from keras_bert_zoo.models.bert_classifier import BertClassifier

            labels = glue_labels(config.task)
            task = BertClassifier.from_preset(config.preset, num_classes=len(labels) if labels else 1,
                                              labels=labels, sequence_length=config.sequence_length,
                                              dtype=config.precision, **config.dropout_kwargs())
        task.compile(learning_rate=config.learning_rate, warmup_ratio=config.warmup_ratio)
    return task


def _recased(preprocessor, preset, lowercase):
    """The task's preprocessor rebuilt with the casing `check_preset` settled on."""
    import warnings

    from keras_bert_zoo.presets.task import preprocessor_settings

    logger.warning("Tokenizing with lowercase=%s as asked; the preset %r read as the other casing.", lowercase, preset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # from_preset warns of the contradiction check_preset has resolved
        return type(preprocessor).from_preset(preset, lowercase=lowercase, **preprocessor_settings(preprocessor))


def _answers(task, values):
    """Outputs (or gold label ids) -> the strings reported per row: label name, score or choice."""
    values = np.asarray(values)
    if task == "stsb":
        return [f"{v:.4f}" for v in values.astype("float32").reshape(-1)]
    ids = values.argmax(-1) if values.ndim == 2 else values.astype("int64")
    names = glue_labels(task) if task != "swag" else None
    return [names[i] if names else str(i) for i in ids]


def _write_predictions(path, task, ids, outputs, y=None):
    from keras_bert_zoo.utils.files import atomic_write_text

    predictions = _answers(task, outputs)
    gold = [""] * len(ids) if y is None else _answers(task, y)
    header = "index\tprediction" + ("" if y is None else "\tlabel")
    rows = [f"{i}\t{p}" + ("" if y is None else f"\t{g}") for i, p, g in zip(ids, predictions, gold)]
    atomic_write_text(path, "\n".join([header] + rows) + "\n")


def _finite(metrics):
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in metrics.items()}


def run_finetuning(config):
    """Runs one fine-tuning run (see the module docstring for what it writes).

    Args:
        config: `FinetuningConfig`.

    Returns:
        dict: the contents of `results.json`.
    """
    if not isinstance(config, FinetuningConfig):
        raise TypeError(f"`config` must be a FinetuningConfig. Received: {type(config).__name__}.")
    start = time.perf_counter()
    lowercase, detected = check_preset(config)
    if config.task in SQUAD_TASKS:
        from keras_bert_zoo.finetuning.squad import run_squad_finetuning

        return run_squad_finetuning(config, lowercase, detected, start)
    if config.task in TAGGING_TASKS:
        from keras_bert_zoo.finetuning.tagging import run_tagging_finetuning

        return run_tagging_finetuning(config, lowercase, detected, start)
    train_x, train_y, _ = _read(config, "train_file", labelled=True)
    if config.max_train_examples is not None:
        train_x, train_y = _head(train_x, config.max_train_examples), train_y[: config.max_train_examples]
    dev = {"dev": _read(config, "dev_file", labelled=True)}
    if config.dev_mismatched_file is not None:
        dev["dev_mismatched"] = _read(config, "dev_mismatched_file", labelled=True)
    test = _read(config, "test_file", labelled=False) if config.test_file is not None else None

    import keras

    from keras_bert_zoo.metrics.glue_dev_metrics import GlueDevMetrics

    keras.utils.set_random_seed(config.seed)
    task = _build_task(config, train_x)
    if lowercase != detected:
        task.preprocessor = _recased(task.preprocessor, config.preset, lowercase)
    report = print if config.progress else None
    callbacks = {name: GlueDevMetrics(config.task, x, y, config.batch_size, prefix=name + "_", report=report)
                 for name, (x, y, _) in dev.items()}
    fit_start = time.perf_counter()
    task.fit(train_x, train_y, batch_size=config.batch_size, epochs=config.epochs,
             callbacks=list(callbacks.values()), verbose=1 if config.progress else 0)
    train_seconds = time.perf_counter() - fit_start - sum(c.seconds for c in callbacks.values())

    os.makedirs(config.output_dir, exist_ok=True)
    for name, callback in callbacks.items():
        _write_predictions(os.path.join(config.output_dir, f"{name}_predictions.tsv"), config.task,
                           dev[name][2], callback.predictions, dev[name][1])
    task.save_to_preset(os.path.join(config.output_dir, "preset"))
    export_dir = export_finetuned(task, config)
    if test is not None:
        outputs = task.predict(test[0], batch_size=config.batch_size, verbose=0)
        if config.task == "swag":
            _write_predictions(os.path.join(config.output_dir, "test_predictions.tsv"), "swag", test[2], outputs)
        else:
            mismatched = "mismatched" in os.path.basename(config.test_file)
            write_glue_submission(config.task, config.output_dir, test[2], outputs, mismatched=mismatched)
    return _write_results(config, callbacks, _num_rows(train_x), train_seconds, start, export_dir)


def export_finetuned(task, config):
    """`config.export_dir`: `task` exported there as a SavedModel that answers raw strings
    (`keras_bert_zoo.serving.export`, all its signatures; a GLUE pair task's inputs are `text_a` and
    `text_b`), in the policy it was trained and scored in. Returns the absolute path, or None
    without `export_dir`. A serving process then needs no reload of the preset."""
    if config.export_dir is None:
        return None
    from keras_bert_zoo.serving.export import export

    pair = config.task in GLUE_TASKS and len(glue_format(config.task).text_columns) == 2
    return export(task, config.export_dir, text_inputs=("text_a", "text_b") if pair else None)


def _write_results(config, callbacks, train_examples, train_seconds, start, export_dir=None):
    from keras_bert_zoo.utils.files import atomic_write_json

    results = {"task": config.task, "preset": config.preset, "precision": config.precision}
    if export_dir is not None:
        results["export_dir"] = export_dir
    for name, callback in callbacks.items():
        last = dict(callback.history[-1])
        last.pop("epoch")
        results[name] = _finite(last)
        results[f"{name}_per_epoch"] = [_finite(h) for h in callback.history]
    results.update({
        "train_examples": train_examples,
        "epochs": config.epochs,
        "train_seconds": round(train_seconds, 2),
        "train_examples_per_second": round(train_examples * config.epochs / max(train_seconds, 1e-9), 2),
        "seconds": round(time.perf_counter() - start, 2),
    })
    atomic_write_json(os.path.join(config.output_dir, "results.json"), results)
    logger.info("Fine-tuned %s: dev %s", config.task, results["dev"])
    return results
