"""`run_squad_finetuning`: `run_finetuning` for SQuAD v1.1 (`squad1`) and v2.0 (`squad2`).

Reads SQuAD JSON files as distributed (or `tfds:<split>` of `squad/v1.1`/`squad/v2.0`
prepared offline), fine-tunes a `BertSpanExtractor` with its default `compile()` (the
paper's recipe) over doc-stride windows, scores the dev set with the official metrics
after the last epoch (v2.0: after choosing the null threshold that maximises dev F1, as
the official script's `best_f1_thresh`) and writes into `output_dir`:

- `results.json`: `{"task", "dev": {"exact_match", "f1"}` (v1.1) or `{"exact", "f1",
  "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"}` (v2.0), `"train_examples"`
  (questions), `"train_windows"`, `"train_windows_per_second"`, `"dev_windows"`,
  `"predict_windows_per_second"`, `"predict_questions_per_second"`, `"seconds"`, ...};
- `predictions.json`: the official format `{question id: answer text}` ("" = no answer);
- `preset/`: the fine-tuned task (window settings and the tuned threshold included),
  which `BertSpanExtractor.from_preset` reloads.
"""

import json
import logging
import os
import time

from keras_bert_zoo.finetuning.config import TFDS_PREFIX, flag
from keras_bert_zoo.finetuning.run import export_finetuned

logger = logging.getLogger("keras_bert_zoo.training")

VERSIONS = {"squad1": "v1.1", "squad2": "v2.0"}
V2_KEYS = ("exact", "f1", "HasAns_f1", "NoAns_f1")
COUNT_CHUNK = 256  # questions windowed per call when counting windows


def _declared_version(path):
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
    from keras_bert_zoo.data.squad import load_squad_tfds, read_squad

    source, version = getattr(config, name), VERSIONS[config.task]
    other = "squad2" if config.task == "squad1" else "squad1"
    try:
        if config.is_tfds(name):
            data = load_squad_tfds(f"squad/{version}", source[len(TFDS_PREFIX):], config.tfds_data_dir,
                                   skip_bad_answers=config.skip_malformed)
        else:
            declared = _declared_version(source)
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
    from keras_bert_zoo.data.squad import SquadData

    return SquadData(data.ids[:n], data.questions[:n], data.contexts[:n], data.answers[:n],
                     data.answer_starts[:n], data.skipped)


def _build_task(config):
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
    from keras_bert_zoo.training.distribute import get_strategy

    settings = {name: getattr(config, name) for name in ("doc_stride", "max_query_length", "max_answer_length",
                                                          "rules")}
    with get_strategy(config.strategy).scope():
        task = BertSpanExtractor.from_preset(config.preset, sequence_length=config.sequence_length,
                                             dtype=config.precision, **settings, **config.dropout_kwargs())
        task.compile(learning_rate=config.learning_rate, warmup_ratio=config.warmup_ratio)
    # A preset fine-tuned on v2.0 brings its threshold; v1.1 always answers, v2.0 tunes anew.
    task.null_score_diff_threshold = None
    return task


def _count_windows(preprocessor, data):
    """How many windows the questions of `data` make (what the model runs on)."""
    total = 0
    for begin in range(0, len(data), COUNT_CHUNK):
        windows = preprocessor.windows(data.questions[begin:begin + COUNT_CHUNK],
                                       data.contexts[begin:begin + COUNT_CHUNK])
        total += int(windows["example_index"].shape[0])
    return total


def _score(task, version, dev, batch_size):
    """`(dev metrics, predictions)`: one prediction pass; v2.0 tunes the threshold on it."""
    answers = task.predict_best_spans(dev.x, batch_size=batch_size)
    if version == "v1.1":
        return task.squad_metrics(dev, version, answers=answers)
    tuned = task.tune_null_threshold(dev, answers=answers)  # sets the threshold the preset keeps
    metrics, predictions = task.squad_metrics(dev, version, answers=answers)
    return {**{key: metrics.get(key) for key in V2_KEYS}, **tuned}, predictions


def run_squad_finetuning(config, lowercase, detected, start):
    """One SQuAD fine-tuning run (see the module docstring for what it writes).

    Args:
        config: `FinetuningConfig` with task "squad1" or "squad2".
        lowercase: bool. The casing `check_preset` settled on.
        detected: bool. The casing the preset's settings give.
        start: float. `time.perf_counter()` when the run started.

    Returns:
        dict: the contents of `results.json`.
    """
    import keras

    from keras_bert_zoo.finetuning.run import _recased
    from keras_bert_zoo.utils.files import atomic_write_json

    version = VERSIONS[config.task]
    train = read_squad_data(config, "train_file")
    if config.max_train_examples is not None:
        train = first_questions(train, config.max_train_examples)
    dev = read_squad_data(config, "dev_file")
    keras.utils.set_random_seed(config.seed)
    task = _build_task(config)
    if lowercase != detected:
        task.preprocessor = _recased(task.preprocessor, config.preset, lowercase)
    train_windows = _count_windows(task.preprocessor, train)
    fit_start = time.perf_counter()
    task.fit(train.x, train.y, batch_size=config.batch_size, epochs=config.epochs,
             verbose=1 if config.progress else 0)
    train_seconds = time.perf_counter() - fit_start

    predict_start = time.perf_counter()
    metrics, predictions = _score(task, version, dev, config.batch_size)
    predict_seconds = time.perf_counter() - predict_start
    dev_windows = _count_windows(task.preprocessor, dev)
    if config.progress:
        print(f"dev ({len(dev)} questions, {dev_windows} windows): {metrics}")

    os.makedirs(config.output_dir, exist_ok=True)
    atomic_write_json(os.path.join(config.output_dir, "predictions.json"), predictions)
    task.save_to_preset(os.path.join(config.output_dir, "preset"))
    export_dir = export_finetuned(task, config)
    results = {
        "task": config.task,
        "preset": config.preset,
        "dev": metrics,
        "train_examples": len(train),
        "train_windows": train_windows,
        "epochs": config.epochs,
        "train_seconds": round(train_seconds, 2),
        "train_examples_per_second": round(len(train) * config.epochs / max(train_seconds, 1e-9), 2),
        "train_windows_per_second": round(train_windows * config.epochs / max(train_seconds, 1e-9), 2),
        "dev_examples": len(dev),
        "dev_windows": dev_windows,
        "predict_seconds": round(predict_seconds, 2),
        "predict_questions_per_second": round(len(dev) / max(predict_seconds, 1e-9), 2),
        "predict_windows_per_second": round(dev_windows / max(predict_seconds, 1e-9), 2),
        "sequence_length": task.preprocessor.sequence_length,
        "doc_stride": task.preprocessor.doc_stride,
        "rules": task.rules,
        "max_query_length": task.preprocessor.max_query_length,
        "skipped_answers": train.skipped + dev.skipped,
        "seconds": round(time.perf_counter() - start, 2),
    }
    if export_dir is not None:
        results["export_dir"] = export_dir
    atomic_write_json(os.path.join(config.output_dir, "results.json"), results)
    logger.info("Fine-tuned %s: dev %s", config.task, metrics)
    return results
