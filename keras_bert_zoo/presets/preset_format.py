"""Our own preset directory: `config.json`, `vocab.txt`, `weights.safetensors`, `manifest.json`.

`weights.safetensors` holds the tensors under their canonical (Google) names and
layouts, so it is independent of Keras variable paths. `manifest.json` records the
size and sha256 of every other file; every load verifies them (R13). A changed file is
removed only in the download cache; a user's preset is never touched by a load.
"""

import os

import numpy as np
import safetensors.numpy

from keras_bert_zoo.utils import files
from keras_bert_zoo.presets import download, model_card
from keras_bert_zoo.weights import safetensors_checkpoint

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


def vocabulary_bytes(vocabulary):
    """Returns a vocabulary as the bytes of its `vocab.txt` (one token a line), or None.

    Args:
        vocabulary: path to `vocab.txt` (its bytes as they are), a list of tokens (str
            or bytes), a tokenizer with `get_vocabulary()`, or None.
    """
    if vocabulary is None:
        return None
    if hasattr(vocabulary, "get_vocabulary"):
        vocabulary = vocabulary.get_vocabulary()
    if isinstance(vocabulary, (str, os.PathLike)):
        with open(vocabulary, "rb") as f:
            return f.read()
    tokens = [t.decode("utf-8") if isinstance(t, bytes) else str(t) for t in vocabulary]
    return ("\n".join(tokens) + "\n").encode("utf-8")




def write_preset(directory, tensors, backbone_config, vocabulary=None, extra=None, card=None):
    """Writes a complete preset directory atomically (R5: a failure keeps the old one).

    Args:
        directory: str. Replaced as a whole; an existing directory that is not a
            keras_bert_zoo preset is refused.
        tensors: dict `{canonical name: array}`.
        backbone_config: dict. `BertBackbone` arguments.
        vocabulary: path to `vocab.txt`, a list of tokens, a tokenizer with
            `get_vocabulary()`, or None.
        extra: dict or None. More config fields (`lowercase`, `source`, …).
        card: dict or None. The model card's facts (`model_card.card_text`), written as
            `README.md` after the manifest: documentation, not verified and never read to load.

    Returns:
        The directory.
    """
    directory = os.path.abspath(os.fspath(directory))
    if os.path.lexists(directory) and not os.path.isdir(directory):
        raise ValueError(
            f"`directory` is an existing file, not a directory. Received: directory={directory!r}. "
            "Pass a new or empty directory; the file is left as it is."
        )
    if os.path.isdir(directory) and os.listdir(directory) and not is_preset_dir(directory):
        raise ValueError(
            f"`directory` exists and is not a keras_bert_zoo preset. Received: directory={directory!r}. "
            "Pass a new or empty directory (it is replaced as a whole)."
        )
    config = {"format": FORMAT, "format_version": FORMAT_VERSION, "backbone": dict(backbone_config)}
    config["heads"] = sorted({name.split("/")[1] for name in tensors if name.startswith("cls/")})
    config.update(extra or {})
    vocab_bytes = vocabulary_bytes(vocabulary)
    with files.atomic_directory(directory) as tmp:
        arrays = {k: np.ascontiguousarray(v, dtype="float32") for k, v in tensors.items()}
        safetensors.numpy.save_file(arrays, os.path.join(tmp, WEIGHTS_FILE), metadata={"format": FORMAT})
        files.give_default_mode(os.path.join(tmp, WEIGHTS_FILE))
        files.atomic_write_json(os.path.join(tmp, CONFIG_FILE), config)
        if vocab_bytes is not None:
            files.atomic_write_bytes(os.path.join(tmp, VOCAB_FILE), vocab_bytes)
        _write_manifest(tmp, sorted(os.listdir(tmp)))
        if card is not None:
            files.atomic_write_text(os.path.join(tmp, model_card.CARD_FILE), model_card.card_text(card))
    return directory


def _manifest_records(directory):
    manifest_path = os.path.join(directory, MANIFEST_FILE)
    if not os.path.isfile(manifest_path):
        raise ValueError(f"{directory} has no {MANIFEST_FILE}; it is not a complete keras_bert_zoo preset.")
    return files.read_json(manifest_path)["files"]


def _refuse_changed(path, record, directory):
    """Raises IntegrityError for a changed file of a user's preset; nothing is removed."""
    actual = files.sha256_file(path)
    if actual == record["sha256"]:
        return
    raise download.IntegrityError(
        f"{path} differs from the preset's {MANIFEST_FILE}: expected sha256 {record['sha256']} "
        f"({record['size']} bytes), actual sha256 {actual} ({os.path.getsize(path)} bytes). Nothing was removed. "
        "If you edited it on purpose, load with `verify=False` (CLI: `--no-verify`) or accept "
        f"the edit for good with keras_bert_zoo.presets.preset_format.rehash_preset({directory!r}); "
        "otherwise restore the file or save the preset again with model.save_to_preset."
    )


def verify_preset(directory):
    """Checks every file listed in `manifest.json` (R13).

    A changed file in the download cache is removed (the next load rebuilds it from the
    verified archive); in any other directory (a user's preset) nothing is ever removed:
    the error says how to accept an intended edit.

    Raises:
        download.IntegrityError: naming the file and both sha256s.
        ValueError: no manifest, or a listed file is missing.
    """
    in_cache = download.is_in_cache(directory)
    for name, record in _manifest_records(directory).items():
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            raise ValueError(f"Preset file {path} listed in {MANIFEST_FILE} is missing.")
        if in_cache:
            download.check_file(path, sha256=record["sha256"], size=record["size"])
        else:
            _refuse_changed(path, record, directory)


def rehash_preset(directory):
    """Records the current hashes of a preset's files in its `manifest.json`.

    For a preset whose `config.json` or `vocab.txt` you edited on purpose (a new dropout,
    a token in place of `[unusedN]`): afterwards it loads with verification again.
    `weights.safetensors` must still be readable.

    Returns:
        The directory.
    """
    directory = os.fspath(directory)
    names = sorted(_manifest_records(directory))
    safetensors_checkpoint.load_file(os.path.join(directory, WEIGHTS_FILE))
    read_preset_config(directory)
    _write_manifest(directory, names)
    return directory


def _write_manifest(directory, names):
    manifest = {
        name: {"sha256": files.sha256_file(os.path.join(directory, name)), "size": os.path.getsize(os.path.join(directory, name))}
        for name in names
    }
    files.atomic_write_json(os.path.join(directory, MANIFEST_FILE), {"format": FORMAT, "files": manifest})


def read_preset_config(directory):
    """Returns our `config.json` as a dict."""
    return files.read_json(os.path.join(directory, CONFIG_FILE))


def read_preset_tensors(directory, verify=True):
    """Verifies the preset (unless `verify=False`) and returns `{canonical name: array}`."""
    if verify:
        verify_preset(directory)
    return safetensors_checkpoint.load_file(os.path.join(directory, WEIGHTS_FILE))
