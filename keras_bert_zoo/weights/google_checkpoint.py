"""Reads and writes Google's original TF1 BERT checkpoints (`bert_model.ckpt.*`).

A checkpoint is read with `tf.train.load_checkpoint` (a table of named tensors; no
graph, no code, nothing unpickled) and written with the `SaveV2` op that
`tf.compat.v1.train.Saver` uses, under the original variable names, so Google's
scripts (`run_classifier.py`, `run_squad.py`, `run_pretraining.py`) load it.
"""

import glob
import json
import os

import numpy as np
import tensorflow as tf

from keras_bert_zoo.utils import files
from keras_bert_zoo.weights import mapping

CHECKPOINT_NAME = "bert_model.ckpt"


def find_checkpoint_prefix(path):
    """Returns the checkpoint prefix for a directory, a prefix or an `.index` file.

    Raises:
        ValueError: no TF checkpoint at `path`.
    """
    path = os.fspath(path)
    if path.endswith(".index") and os.path.isfile(path):
        return path[: -len(".index")]
    if os.path.isfile(path + ".index"):
        return path
    if os.path.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if latest:
            return latest
        indexes = sorted(glob.glob(os.path.join(path, "*.index")))
        if len(indexes) == 1:
            return indexes[0][: -len(".index")]
        if len(indexes) > 1:
            raise ValueError(
                f"Several TF checkpoints in {path!r}: {[os.path.basename(i) for i in indexes]}. "
                "Pass the prefix of the one to load (e.g. .../bert_model.ckpt)."
            )
    raise ValueError(f"No TF checkpoint (`*.index` + `*.data-*`) found at {path!r}.")


def is_known_name(name):
    """True for canonical names of a BERT backbone or a known head."""
    prefixes = ("bert/embeddings/", "bert/encoder/layer_", "bert/pooler/") + (
        "cls/predictions/",
        "cls/seq_relationship/",
        "cls/squad/",
    )
    return name.startswith(prefixes) or name in mapping.FINE_TUNED_HEADS["classifier"]


def read_google_tensors(path):
    """Reads a Google TF1 checkpoint and returns `{canonical name: float32 array}`.

    Adam slots (`*/adam_m`, `*/adam_v`), `global_step` and loss-scale counters are
    skipped; names without the `bert/` prefix get it.

    Args:
        path: str. A directory holding one checkpoint, or its prefix.

    Raises:
        ValueError: no checkpoint, or a tensor that is neither BERT nor a known head.
    """
    prefix = find_checkpoint_prefix(path)
    reader = tf.train.load_checkpoint(prefix)
    out, unknown = {}, []
    for raw_name in reader.get_variable_to_shape_map():
        if mapping.is_skipped(raw_name):
            continue
        name = mapping.google_canonical_name(raw_name)
        if not is_known_name(name):
            unknown.append(raw_name)
            continue
        out[name] = np.asarray(reader.get_tensor(raw_name)).astype("float32")
    if unknown:
        raise ValueError(
            f"Unexpected variable(s) in {prefix}: {', '.join(sorted(unknown)[:8])}. "
            "They are not part of a BERT model or a known head."
        )
    return out


def write_google_checkpoint(tensors, directory, bert_config=None, vocabulary_path=None):
    """Writes canonical tensors as `bert_model.ckpt.{index,data-00000-of-00001}`.

    Also writes `bert_config.json` and `vocab.txt` when given. Each file is
    written under a temporary name and then moved into place.

    Args:
        tensors: dict `{canonical name: array}` (Google layout).
        directory: str. Created if needed.
        bert_config: dict or None. Written as `bert_config.json`.
        vocabulary_path: str or None. Copied as `vocab.txt`.

    Returns:
        The checkpoint prefix.
    """
    os.makedirs(directory, exist_ok=True)
    tmp_dir = files.tempfile.mkdtemp(prefix=".tmp-ckpt-", dir=directory)
    try:
        tmp_prefix = os.path.join(tmp_dir, CHECKPOINT_NAME)
        names = sorted(tensors)
        tf.raw_ops.SaveV2(
            prefix=tmp_prefix,
            tensor_names=names,
            shape_and_slices=[""] * len(names),
            tensors=[tf.constant(np.asarray(tensors[n], dtype="float32")) for n in names],
        )
        for produced in sorted(os.listdir(tmp_dir)):
            os.replace(os.path.join(tmp_dir, produced), os.path.join(directory, produced))
    finally:
        files.shutil.rmtree(tmp_dir, ignore_errors=True)
    if bert_config is not None:
        files.atomic_write_text(
            os.path.join(directory, "bert_config.json"), json.dumps(bert_config, indent=2) + "\n"
        )
    if vocabulary_path is not None:
        with open(vocabulary_path, "rb") as f:
            files.atomic_write_bytes(os.path.join(directory, "vocab.txt"), f.read())
    return os.path.join(directory, CHECKPOINT_NAME)
