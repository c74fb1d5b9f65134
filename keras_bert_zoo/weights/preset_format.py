"""Our own preset directory: `config.json`, `vocab.txt`, `weights.safetensors`, `manifest.json`.

`weights.safetensors` holds the tensors under their canonical (Google) names and
layouts, so it is independent of Keras variable paths. `manifest.json` records the
size and sha256 of every other file; every load verifies them (R13).
"""

import os

import numpy as np
import safetensors.numpy

from keras_bert_zoo.utils import files
from keras_bert_zoo.weights import download

FORMAT = "keras_bert_zoo"
FORMAT_VERSION = 1
CONFIG_FILE = "config.json"
WEIGHTS_FILE = "weights.safetensors"
VOCAB_FILE = "vocab.txt"
MANIFEST_FILE = "manifest.json"


def is_preset_dir(directory):
    """True if `directory` holds our `config.json` (with `"format": "keras_bert_zoo"`)."""
    path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(path):
        return False
    try:
        return files.read_json(path).get("format") == FORMAT
    except ValueError:
        return False


def _vocabulary_lines(vocabulary):
    """Returns the vocabulary as bytes (one token a line) or None."""
    if vocabulary is None:
        return None
    if hasattr(vocabulary, "get_vocabulary"):
        vocabulary = vocabulary.get_vocabulary()
    if isinstance(vocabulary, (str, os.PathLike)):
        with open(vocabulary, "rb") as f:
            return f.read()
    tokens = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in vocabulary]
    return ("\n".join(tokens) + "\n").encode("utf-8")


def write_preset(directory, tensors, backbone_config, vocabulary=None, extra=None):
    """Writes a complete preset directory atomically (R5: a failure keeps the old one).

    Args:
        directory: str. Replaced as a whole; an existing directory that is not a
            keras_bert_zoo preset is refused.
        tensors: dict `{canonical name: array}`.
        backbone_config: dict. `BertBackbone` arguments.
        vocabulary: path to `vocab.txt`, a list of tokens, a tokenizer with
            `get_vocabulary()`, or None.
        extra: dict or None. More config fields (`lowercase`, `source`, …).

    Returns:
        The directory.
    """
    directory = os.path.abspath(os.fspath(directory))
    if os.path.isdir(directory) and os.listdir(directory) and not is_preset_dir(directory):
        raise ValueError(
            f"`directory` exists and is not a keras_bert_zoo preset. Received: directory={directory!r}. "
            "Pass a new or empty directory (it is replaced as a whole)."
        )
    config = {"format": FORMAT, "format_version": FORMAT_VERSION, "backbone": dict(backbone_config)}
    config["heads"] = sorted({name.split("/")[1] for name in tensors if name.startswith("cls/")})
    config.update(extra or {})
    vocab_bytes = _vocabulary_lines(vocabulary)
    with files.atomic_directory(directory) as tmp:
        arrays = {k: np.ascontiguousarray(v, dtype="float32") for k, v in tensors.items()}
        safetensors.numpy.save_file(arrays, os.path.join(tmp, WEIGHTS_FILE), metadata={"format": FORMAT})
        files.atomic_write_json(os.path.join(tmp, CONFIG_FILE), config)
        if vocab_bytes is not None:
            files.atomic_write_bytes(os.path.join(tmp, VOCAB_FILE), vocab_bytes)
        manifest = {
            name: {"sha256": files.sha256_file(os.path.join(tmp, name)), "size": os.path.getsize(os.path.join(tmp, name))}
            for name in sorted(os.listdir(tmp))
        }
        files.atomic_write_json(os.path.join(tmp, MANIFEST_FILE), {"format": FORMAT, "files": manifest})
    return directory


def verify_preset(directory):
    """Checks every file listed in `manifest.json`; a corrupt file is removed (R13).

    Raises:
        download.IntegrityError: naming the file and both sha256s.
        ValueError: no manifest, or a listed file is missing.
    """
    manifest_path = os.path.join(directory, MANIFEST_FILE)
    if not os.path.isfile(manifest_path):
        raise ValueError(f"{directory} has no {MANIFEST_FILE}; it is not a complete keras_bert_zoo preset.")
    for name, record in files.read_json(manifest_path)["files"].items():
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise ValueError(f"Preset file {path} listed in {MANIFEST_FILE} is missing.")
        download.check_file(path, sha256=record["sha256"], size=record["size"])


def read_preset_config(directory):
    """Returns our `config.json` as a dict."""
    return files.read_json(os.path.join(directory, CONFIG_FILE))


def read_preset_tensors(directory):
    """Verifies the preset and returns `{canonical name: array}`."""
    verify_preset(directory)
    return dict(safetensors.numpy.load_file(os.path.join(directory, WEIGHTS_FILE)))
