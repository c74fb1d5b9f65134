"""The task a foreign checkpoint holds, and its labels: HF's `BertFor…` folders (`architectures`,
`id2label`, `problem_type`) and keras-hub's `BertTextClassifier` presets (`task.json`).

`foreign_task_config` gives what `Task.from_preset` reads from our own presets (`task`,
`preprocessor`, `lowercase`), so one code path builds a task from either. `merge_arguments`
checks what a caller passes against the checkpoint: a head is trained for its classes, so
labels or a class count that contradict it are refused, naming both, never silently
re-initialised or renamed.
"""

import logging
import os
import re

from keras_bert_zoo.utils import files
from keras_bert_zoo.weights import keras_hub_checkpoint

logger = logging.getLogger("keras_bert_zoo.weights")

# Our class -> the HF class it is written as (serving/hf_checkpoint.py) and read from.
HF_ARCHITECTURES = {
    "BertBackbone": "BertModel",
    "BertPretrainer": "BertForPreTraining",
    "BertClassifier": "BertForSequenceClassification",
    "BertTokenClassifier": "BertForTokenClassification",
    "BertSpanExtractor": "BertForQuestionAnswering",
    "BertMultipleChoice": "BertForMultipleChoice",
}
OUR_CLASSES = {hf: ours for ours, hf in HF_ARCHITECTURES.items()}
# The tasks whose head is the `classifier` Dense (`output_weights`/`output_bias`), each a different use of it.
CLASSIFIER_HEADS = ("BertClassifier", "BertTokenClassifier", "BertMultipleChoice")
LABELED = ("BertClassifier", "BertTokenClassifier")
# transformers' names for classes it was given no names for.
_DEFAULT_LABEL = re.compile(r"LABEL_(\d+)")
# A tag as `text/tag_schemes.split_tag` reads it (presets sit below text/, so the rule is restated):
# "O", or B-/I-/E-/S- and a type.
_TAG = re.compile(r"O|[BIES]-.+")
# What keras_bert_zoo writes beside a keras-hub preset: the class names keras-hub's classifier has no field for.
KERAS_HUB_LABELS_FILE = "keras_bert_zoo_labels.json"


def hf_labels(config, source):
    """`(num_classes, names or None)` from an HF config's `id2label` (`LABEL_0`… are no names)."""
    id2label = config.get("id2label") or {}
    try:
        ids = sorted(int(key) for key in id2label)
    except (TypeError, ValueError):
        raise ValueError(f"{source}: id2label keys must be class ids 0, 1, … Received: {sorted(id2label)}.") from None
    if ids != list(range(len(ids))):
        raise ValueError(f"{source}: id2label must name the classes 0 to {len(ids) - 1}, each once. Received ids {ids}.")
    names = [str(id2label.get(str(i), id2label.get(i))) for i in ids]
    if not names:
        count = config.get("num_labels")
        return (int(count) if count else None), None
    if all(_DEFAULT_LABEL.fullmatch(name) and int(name[6:]) == i for i, name in enumerate(names)):
        return len(names), None
    return len(names), names


def tag_scheme(labels):
    """"IOBES" or "IOB2" for a tag set (IOB1 has IOB2's tags: both read as conlleval does), None
    when a label is not a tag (`O`, or `B-`/`I-`/`E-`/`S-` and a type)."""
    if not all(_TAG.fullmatch(label) for label in labels):
        return None
    return "IOBES" if any(label[:2] in ("E-", "S-") for label in labels) else "IOB2"


def hf_task_config(directory):
    """`{"task": {"class_name", "config", "source"}}` of an HF `BertFor…` folder, `{}` for a
    `BertModel`/`BertForPreTraining`/unknown architecture.

    Raises:
        ValueError: `problem_type: "multi_label_classification"` (our classifier is single-label),
            or an id2label that does not name classes 0..n-1.
    """
    path = os.path.join(directory, "config.json")
    config = files.read_json(path)
    architecture = (config.get("architectures") or [None])[0]
    ours = OUR_CLASSES.get(architecture)
    if ours in (None, "BertBackbone", "BertPretrainer"):
        return {}
    task = {"class_name": ours, "config": {}, "source": f"{path} ({architecture})"}
    if ours in LABELED:
        problem = config.get("problem_type")
        if problem == "multi_label_classification":
            raise ValueError(
                f"{path}: problem_type 'multi_label_classification' (a sigmoid per label) has no keras_bert_zoo "
                "task: BertClassifier picks one class (softmax). Nothing was loaded."
            )
        if problem == "regression" and ours == "BertClassifier":
            task["config"]["num_classes"] = 1
            return {"task": task}
        num_classes, names = hf_labels(config, path)
        if num_classes:
            task["config"]["num_classes"] = num_classes
        task["config"]["labels"] = names
        task["named"] = names is not None
    return {"task": task}


def keras_hub_task_config(directory):
    """Our task fields from a keras-hub preset: a `BertTextClassifier`'s class count and dropout,
    its preprocessor's `sequence_length`/`truncate`, the tokenizer's casing; `{}` for a backbone."""
    out = {}
    tokenizer = keras_hub_checkpoint.tokenizer_settings(directory)
    if "lowercase" in tokenizer:
        out["lowercase"] = tokenizer["lowercase"]
    task = keras_hub_checkpoint.read_task_json(directory)
    if task is None:
        return out
    path = os.path.join(directory, keras_hub_checkpoint.TASK_FILE)
    if "unsupported" in task:
        logger.warning("%s is the keras-hub task %r: its head is not read (only BertTextClassifier's is).",
                       path, task["unsupported"])
        return out
    activation = task.get("activation") or "linear"
    if activation not in ("linear", "softmax"):
        raise ValueError(
            f"{path}: the classifier's head ends in activation={activation!r}; BertClassifier's outputs are "
            "logits of one class out of num_classes (a softmax head is read as its logits). Nothing was loaded."
        )
    config = {"num_classes": int(task["num_classes"])}
    if task.get("dropout") is not None:
        config["dropout"] = float(task["dropout"])
    labels_path = os.path.join(directory, KERAS_HUB_LABELS_FILE)
    config["labels"] = files.read_json(labels_path).get("labels") if os.path.isfile(labels_path) else None
    out["task"] = {"class_name": "BertClassifier", "config": config, "source": f"{path} (BertTextClassifier)",
                   "named": config["labels"] is not None}
    preprocessor = ((task.get("preprocessor") or {}).get("config")) or {}
    out["preprocessor"] = {k: preprocessor[k] for k in ("sequence_length", "truncate") if preprocessor.get(k)}
    return out


def merge_arguments(class_name, saved_task, explicit):
    """The task arguments of a foreign checkpoint's head merged with the caller's (`explicit`,
    only those not None), or ValueError for a contradiction, naming both sides.

    A head fixes its class count; named classes fix the labels (the caller's own labels are
    accepted only for unnamed classes, or for a token classifier whose names are no tags);
    another task's `classifier` head (a sentence classifier's, read per token) is refused."""
    source, config = saved_task["source"], dict(saved_task.get("config") or {})
    ours = saved_task["class_name"]
    if ours != class_name:
        if class_name in CLASSIFIER_HEADS and ours in CLASSIFIER_HEADS:
            raise ValueError(
                f"{source} holds a {ours} head, not a {class_name} one: its `classifier` weights mean another "
                f"thing there. Load it with {ours}.from_preset, or for a new head build "
                f"{class_name}(BertBackbone.from_preset(...), ...) with its preprocessor."
            )
        return {}
    count, labels = config.get("num_classes"), config.get("labels")
    given_count, given_labels = explicit.get("num_classes"), explicit.get("labels")
    if given_labels is not None:
        given_labels = list(given_labels)
        if saved_task.get("named") and given_labels != labels and not (
                class_name == "BertTokenClassifier" and tag_scheme(labels) is None):
            raise ValueError(
                f"labels={given_labels} contradict the checkpoint's, {labels} ({source}), whose head was trained "
                "for them in that order. Pass labels=None to take the checkpoint's; for a new head with other "
                "labels build the task on BertBackbone.from_preset(...)."
            )
        if count is not None and len(given_labels) != count:
            raise ValueError(
                f"labels={given_labels} are {len(given_labels)} names; the checkpoint's head ({source}) has "
                f"{count} classes. Pass {count} names, or labels=None."
            )
        config["labels"] = labels = given_labels
    if given_count is not None and count is not None and given_count != count:
        raise ValueError(
            f"num_classes={given_count} contradicts the checkpoint's head ({source}), which has {count} classes"
            f"{f' {labels}' if labels else ''}. Pass num_classes=None to take it; for a new head build the task "
            "on BertBackbone.from_preset(...)."
        )
    if class_name == "BertTokenClassifier" and labels:
        scheme = tag_scheme(labels)
        if scheme is None:
            raise ValueError(
                f"The checkpoint's labels {labels} ({source}) are not all tags: BertTokenClassifier reads 'O' or "
                "B-/I-/E-/S-<type> (IOB1, IOB2 or IOBES) to find entities. Pass labels= with a tag for each "
                "(e.g. 'I-PER' for 'PER'), in the checkpoint's order."
            )
        logger.info("%s: %d tags in %s (%s).", source, len(labels), scheme, ", ".join(labels))
    return config
