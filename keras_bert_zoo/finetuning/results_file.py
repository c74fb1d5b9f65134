"""What `results.json` records besides the scores: how the run was made and what to compare it with.

A score alone cannot be reproduced or judged. Every kind's `results()` ends in `run_record`,
which adds:

- `"config"`: every `FinetuningConfig` field as the run used it (defaults filled in, the
  casing settled, the preset's dropout and SQuAD's window settings where the flag was left out;
  `export_dir` only once, as the top-level `"export_dir"`), and `"command"`: the
  `tools/finetune.py` command that repeats it;
- `"data"`: per data flag, the path, rows read and used, rows skipped (`--skip-malformed`)
  and the file's sha256 (a tfds split: its name and data directory);
- `"baseline"`: what a model that learned nothing scores on the same dev rows, with the same
  metric function (`keras_bert_zoo.metrics.baselines`);
- `"dev_predictions"`: how many distinct answers the dev predictions hold, the commonest first;
- `"warnings"`: e.g. "all 40 dev predictions are class 'O'" with the levers to try (also
  logged in the run's summary line);
- `"versions"` of the package, TensorFlow, Keras and Python, and `"time_keys"`: what each
  `*seconds` key measures.
"""

import dataclasses
import os
import shlex

from keras_bert_zoo.finetuning.config import flag
from keras_bert_zoo.metrics.baselines import prediction_counts
from keras_bert_zoo.utils.files import sha256_file
from keras_bert_zoo.utils.versions import package_versions

# What each time key of results.json measures (a kind records those it has).
TIME_KEYS = {
    "seconds": "wall clock of the whole run: checking the preset, reading the files, building, training, "
               "dev scoring, writing the outputs and the export (the tool's 's in all')",
    "train_seconds": "time in training only: the fit loop, less the dev scoring after each epoch",
    "train_examples_per_second": "train_examples x epochs / train_seconds (feature-based CoNLL: x 1, as BERT "
                                 "runs once over the data and the tagger on cached features)",
    "predict_seconds": "one prediction pass over the dev set (the last epoch's)",
}
LEVERS = (f"try more epochs ({flag('epochs')}), a smaller batch ({flag('batch_size')}) or a higher learning "
          f"rate ({flag('learning_rate')})")
MOST_COMMON = 10  # distinct dev answers listed in "dev_predictions" (STS-B's scores are all distinct)


def file_record(config, name, unit, read, used=None, skipped=None, **more):
    """The `"data"` entry of the data flag `name`.

    Args:
        config: `FinetuningConfig`.
        name: str. The field, e.g. "dev_file".
        unit: str. What a row is ("rows", "questions", "sentences").
        read: int. Rows read from the file (after any skipped).
        used: int or None. Rows the run used, where fewer (`max_train_examples`).
        skipped: int, or None where the reader does not count them (said so in the entry).
        **more: further counts of the reader (e.g. CoNLL's repaired tags).
    """
    source = getattr(config, name)
    record = {"flag": flag(name), "unit": unit, "read": read, "used": read if used is None else used}
    if config.is_tfds(name):
        record.update(path=source, tfds_data_dir=config.tfds_data_dir, sha256=None)
    else:
        record.update(path=os.path.abspath(source), sha256=sha256_file(source))
    record["skipped"] = "not counted by this reader" if skipped is None else skipped
    record.update(more)
    return record


def one_class_warning(counts, unit="class"):
    """"all N dev predictions are class X ..." with the levers to try, or None where they differ."""
    if len(counts) != 1:
        return None
    (value, count), = counts.items()
    return (f"all {count} dev predictions are {unit + ' ' if unit else ''}{value!r}: the model gives one answer "
            "whatever the input "
            f"(it has not left the class prior); {LEVERS}")


def resolved_config(config, **resolved):
    """Every field of `config` as the run used it: `resolved` fills in what the task settled
    (e.g. `lowercase`, the preset's `dropout`) where the field was left at None. `export_dir` is
    not repeated here: results.json's `"export_dir"` says where the export went (absolute, the
    version folder included)."""
    fields = dataclasses.asdict(config)
    fields.pop("export_dir", None)
    fields.update({k: v for k, v in resolved.items() if fields.get(k) is None and v is not None})
    return fields


def command_line(config):
    """The `tools/finetune.py` command of `config`, every setting spelled out (the defaults the
    run filled in included), as a model card and results.json record it."""
    words = ["python", "tools/finetune.py"]
    for name, value in dataclasses.asdict(config).items():
        if name == "progress":
            words += [] if value else ["--no-progress"]
        elif isinstance(value, bool):
            words += [flag(name)] if value else ([f"--no-{name}"] if name == "lowercase" else [])
        elif value is not None:
            words += [flag(name), str(value)]
    return shlex.join(words)


def run_record(results, config, data, baseline, predicted, unit="class", one_class=True, **resolved):
    """`results` with `config`, `data`, `baseline`, `dev_predictions`, `warnings`, `versions`
    and `time_keys` (see the module docstring).

    Args:
        results: dict. The kind's own keys (scores, sizes, times), kept as they are.
        config: `FinetuningConfig`.
        data: `{field: file_record(...)}`.
        baseline: `{"predicts", "dev"}` of `keras_bert_zoo.metrics.baselines`.
        predicted: the dev predictions, one hashable answer each (label names, tags, ...).
        unit: str. What an answer is called in the warning ("class", "tag", ...).
        one_class: bool. Whether one answer for every row is worth a warning (STS-B's scores
            and SQuAD v1.1's always-answered spans are not classes).
        **resolved: see `resolved_config`.
    """
    counts = prediction_counts(predicted)
    warning = one_class_warning(counts, unit) if one_class else None
    results = dict(results)
    results.update({
        "config": resolved_config(config, **resolved),
        "command": command_line(config),
        "data": data,
        "baseline": baseline,
        "dev_predictions": {"count": sum(counts.values()), "distinct": len(counts),
                            "most_common": [[value, count] for value, count in list(counts.items())[:MOST_COMMON]]},
        "warnings": [warning] if warning else [],
        "versions": package_versions(),
        "time_keys": {key: text for key, text in TIME_KEYS.items() if key in results},
    })
    return results
