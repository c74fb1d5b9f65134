"""A preset's model card, `README.md`, as HF and keras-hub users expect one beside the weights.

Every preset a task saves holds one (`Task.save_to_preset`; `tools/finetune.py` rewrites it
with the run's files and scores): what the model is (task, labels, the preset it started from),
what it was trained on (data files or in-memory rows, each with its rows and sha256), how well
it does (metrics beside the baseline of a model that learned nothing), the precision, the
package versions and the command or code that made it.

The card is HF's layout: YAML front matter, then Markdown. The front matter's `keras_bert_zoo`
key holds the facts as one JSON object (JSON is YAML), which `read_card` reads back;
`from_preset` gives them as `task.model_card`. The card is documentation, never configuration:
it is written after `manifest.json`, so it is not verified, and a card edited, removed or
unreadable changes nothing about loading (an unreadable one is logged).

The facts come from the task: `from_preset` starts them (the preset it came from, or that
preset's own card); each `fit` on in-memory rows adds what it trained on (rows and their
sha256), its last epoch's metrics and, for a classifier, the score of always answering the
commonest training label (`record_fit`); `save_to_preset` adds the task, labels, precision and
versions. `tools/finetune.py` rewrites the card with the run's data files, dev scores and
baseline, and its command.
"""

import hashlib
import json
import logging
import os

import keras
import numpy as np

from keras_bert_zoo.presets.hf_hub import SCHEME as HF_SCHEME
from keras_bert_zoo.utils import files
from keras_bert_zoo.utils.versions import package_versions

CARD_FILE = "README.md"
FACTS_KEY = "keras_bert_zoo"
logger = logging.getLogger("keras_bert_zoo.weights")

# HF's pipeline tag of each task class (what the Hub files a model under).
PIPELINE_TAGS = {"BertClassifier": "text-classification", "BertTokenClassifier": "token-classification",
                 "BertFeatureExtractor": "token-classification", "BertSpanExtractor": "question-answering",
                 "BertMultipleChoice": "multiple-choice", "BertPretrainer": "fill-mask"}


def _front_matter(facts):
    base = facts.get("base_model")
    hub_id = base[len(HF_SCHEME):].split("@")[0] if isinstance(base, str) and base.startswith(HF_SCHEME) else None
    keys = {"library_name": FACTS_KEY, "pipeline_tag": PIPELINE_TAGS.get(facts.get("task")),
            "base_model": hub_id,  # HF's key names a Hub repo; other sources are in the facts
            "tags": ["bert", "keras", FACTS_KEY]}
    lines = [f"{key}: {json.dumps(value)}" for key, value in keys.items() if value is not None]
    return ["---"] + lines + [f"{FACTS_KEY}: {json.dumps(facts, sort_keys=True, default=str)}", "---"]


def _value(value):
    if isinstance(value, float):
        return f"{value:.4f}"
    return "n/a" if value is None else str(value)


def _metrics_table(metrics, baseline):
    if not metrics:
        return ["No scores were recorded for this model."]
    rows = ["| metric | this model | baseline |", "|---|---|---|"]
    for name, value in metrics.items():
        rows.append(f"| {name} | {_value(value)} | {_value((baseline or {}).get(name))} |")
    return rows


def _data_table(data):
    rows = ["| data | rows | sha256 |", "|---|---|---|"]
    for entry in data:
        rows.append(f"| {entry.get('name')} | {entry.get('rows')} | `{entry.get('sha256') or 'n/a'}` |")
    return rows


def card_text(facts):
    """The README.md of `facts` (see the module docstring). It names no folder of its own, so a
    preset copied or moved keeps a true card.

    Args:
        facts: dict. `task` (the class name), `labels`, `source_preset`, `base_model`, `data`
            (a list of `{"name", "rows", "sha256"}`), `metrics` (`{name: value}`), `baseline`
            (`{"predicts", "metrics"}`), `precision`, `versions`, `made_by` (`{"command"}` or
            `{"code": [...]}`) and any other keys (kept in the front matter).
    """
    task = facts.get("task", "model")
    lines = _front_matter(facts) + ["", f"# {task}" + (f": {', '.join(facts['labels'])}" if facts.get("labels")
                                                        and len(facts["labels"]) <= 8 else ""), ""]
    source = facts.get("source_preset")
    lines += [f"A keras_bert_zoo `{task}`" + (f" that started from `{source}`" if source else "")
              + (f" (which started from `{facts['base_model']}`)" if facts.get("base_model") not in (None, source)
                 else "") + "."]
    if facts.get("labels"):
        lines += ["", "## Labels", "", ", ".join(f"`{label}`" for label in facts["labels"])
                  + " (ids in this order)."]
    lines += ["", "## Training data", ""]
    lines += _data_table(facts["data"]) if facts.get("data") else ["Not recorded: this model was not trained "
                                                                     "since it was loaded."]
    baseline = facts.get("baseline") or {}
    lines += ["", "## Results", ""] + _metrics_table(facts.get("metrics"), baseline.get("metrics"))
    if baseline.get("predicts"):
        lines += ["", f"Baseline: {baseline['predicts']}."]
    lines += ["", "## Precision and versions", "", f"Saved in `{facts.get('precision')}`. "
              + ", ".join(f"{name} {version}" for name, version in (facts.get("versions") or {}).items()) + "."]
    made_by = facts.get("made_by") or {}
    if made_by.get("command"):
        lines += ["", "## How it was made", "", "```bash", made_by["command"], "```"]
    elif made_by.get("code"):
        lines += ["", "## How it was made", "", "```python"] + list(made_by["code"]) + ["```"]
    lines += ["", "## Use", "", "```python", "import keras_bert_zoo as kbz", "",
              f'model = kbz.{task}.from_preset("path/to/this/folder")', "```", ""]
    return "\n".join(lines)


def write_card(directory, facts):
    """Writes `directory/README.md` (atomically) from `facts`; returns its path."""
    path = os.path.join(directory, CARD_FILE)
    files.atomic_write_text(path, card_text(facts))
    return path


def read_card(directory):
    """The facts of `directory/README.md`'s front matter, or None where there is no card or it
    cannot be read (logged: a card never stops a preset from loading)."""
    path = os.path.join(os.fspath(directory), CARD_FILE)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
        end = lines.index("---", 1) if lines and lines[0] == "---" else 0
        found = [line for line in lines[1:end] if line.startswith(FACTS_KEY + ": ")]
        facts = json.loads(found[0][len(FACTS_KEY) + 2:]) if found else None
        if not isinstance(facts, dict):
            raise ValueError(f"no `{FACTS_KEY}:` facts in its front matter")
        return facts
    except (OSError, UnicodeDecodeError, ValueError) as e:
        logger.warning("%s: the model card's facts could not be read (%s); the preset loads without them.", path, e)
        return None


def card_facts(task):
    """`Task.card_facts`: `task.model_card` with what the task says of itself now: class, labels,
    precision, versions."""
    facts = {k: v for k, v in task.model_card.items() if k != "loaded_from"}  # this session's, not the model's
    facts.update(task=type(task).__name__, labels=getattr(task, "labels", None),
                 precision=task.backbone.dtype_policy.name, versions=package_versions())
    return facts


def rows_sha256(columns, y=None):
    """The sha256 of in-memory rows: each text (UTF-8, NUL-terminated) column by column, then the
    targets' bytes; what a card gives for data that came from no file."""
    digest = hashlib.sha256()
    for column in keras.tree.flatten(columns):
        for value in np.asarray(column, dtype=object).reshape(-1):
            digest.update((value if isinstance(value, bytes) else str(value).encode("utf-8")) + b"\0")
    if y is not None:
        digest.update(np.ascontiguousarray(np.asarray(y)).tobytes())
    return digest.hexdigest()


def majority_baseline(y, validation=None, labels=None):
    """Accuracy of always answering the commonest training class (on the training rows and on
    `validation`'s targets), for targets that are class ids; None for others."""
    if y is None:
        return None
    y = np.asarray(y).reshape(-1)
    if y.dtype.kind not in "iu" or not y.size:
        return None
    common = int(np.bincount(y).argmax())
    name = repr(labels[common]) if labels else str(common)
    metrics = {"accuracy": float(np.mean(y == common))}
    if validation is not None:
        held_out = np.asarray(validation).reshape(-1)
        metrics["val_accuracy"] = float(np.mean(held_out == common))
    return {"predicts": f"always the commonest training class, {name}", "metrics": metrics}


def record_fit(card, columns, y, history, epochs, batch_size, validation=None, labels=None, classes=True):
    """Adds a finished `fit` to `card` (a task's `model_card`): the rows it trained on, its last
    epoch's metrics, the majority baseline where `classes` (targets that are class ids) and the call.

    Args:
        columns: the in-memory rows `fit` took (raw text columns or packed ids), or None for a
            `tf.data.Dataset`.
        y, validation: the training and validation targets, or None.
        history: `{metric: [value per epoch]}` or None.
        epochs, batch_size: as `fit` ran them.
        labels: the class names, or None.
    """
    if card.get("loaded_from") is not None:
        card["source_preset"] = card["loaded_from"]  # these weights started from the loaded preset
    if columns is None:
        entry = {"name": "fit(x): a tf.data.Dataset", "rows": None, "sha256": None}
        rows = "a dataset"
    else:
        rows = len(keras.tree.flatten(columns)[0])
        entry = {"name": "fit(x, y): in-memory rows", "rows": rows, "sha256": rows_sha256(columns, y)}
    card["data"] = list(card.get("data") or []) + [entry]
    card["metrics"] = {name: float(values[-1]) for name, values in (history or {}).items() if values}
    card["baseline"] = majority_baseline(y, validation, labels) if classes else None
    code = list((card.get("made_by") or {}).get("code") or [])
    code.append(f"task.fit(x, y)  # {rows} rows, epochs={epochs}, batch_size={batch_size}")
    card["made_by"] = {"code": code}
