"""The preset registry: names, aliases and Google folder names -> registry entries.

Reading a local preset (its config, its casing) is `keras_bert_zoo.weights`' work;
this module only knows the registry.

The registry is `registry.json` beside this module (package data, installed with it).
"""

import difflib
import functools
import json
import os
import pathlib

from keras_bert_zoo.utils import files

CONFIG_KEYS = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "hidden_dim",
    "intermediate_dim",
    "max_sequence_length",
    "num_segments",
)


def registry_path():
    """Returns the path of `registry.json` (package data beside this module)."""
    path = pathlib.Path(__file__).resolve().parent / "registry.json"
    if not path.is_file():
        raise FileNotFoundError(f"The preset registry was not found at {path}: reinstall keras-bert-zoo.")
    return path


@functools.lru_cache(maxsize=None)
def load_registry():
    """Returns the registry: `{name: entry}` with every entry's fields."""
    with open(registry_path(), encoding="utf-8") as f:
        data = json.load(f)
    return {entry["name"]: entry for entry in data["presets"]}


@functools.lru_cache(maxsize=None)
def _alias_table():
    table = {}
    for name, entry in load_registry().items():
        table[name.lower()] = name
        for alias in entry.get("aliases", []):
            table[alias.lower()] = name
    return table


def list_presets():
    """Returns the sorted registry names."""
    return sorted(load_registry())


def is_local_preset(preset):
    """True if `preset` names an existing directory, file or TF checkpoint prefix
    (our, Google's or HF's layout)."""
    if not isinstance(preset, (str, os.PathLike)):
        return False
    path = os.fspath(preset)
    # A Google checkpoint is also named by its prefix: `.../bert_model.ckpt`.
    return os.path.exists(path) or os.path.exists(path + ".index")


def _refuse_missing_path(name):
    """A name with a path separator is a path: if nothing is there, that is the error."""
    path = name.strip().rstrip("/" + os.sep)
    if not any(sep in path for sep in {"/", os.sep}) or is_local_preset(path):
        return
    absolute = os.path.abspath(path)
    message = f"No such directory or file: {name!r} ({absolute} does not exist).{files.interrupted_save_hint(path)}"
    key = os.path.basename(path).lower()
    if key.endswith(".zip"):
        key = key[: -len(".zip")]
    if key in _alias_table():
        message += f" (To load the registry preset instead, pass {_alias_table()[key]!r}.)"
    raise ValueError(message)


def resolve_name(name):
    """Maps a registry name, alias or Google folder name to the registry name.

    Raises:
        ValueError: unknown name; the message lists the closest known names. A name
            with a path separator is a path, never a registry name: if nothing exists
            there, the error says so (the registry name is only a hint).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`preset` must be a non-empty string. Received: preset={name!r}.")
    _refuse_missing_path(name)
    key = name.strip().lower().rstrip("/")
    if key.endswith(".zip"):
        key = key[: -len(".zip")]
    key = key.rsplit("/", 1)[-1]
    table = _alias_table()
    if key in table:
        return table[key]
    close = difflib.get_close_matches(key, list(table), n=5, cutoff=0.5)
    close = sorted({table[c] for c in close})
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ValueError(
        f"Unknown preset {name!r}.{hint} Known presets: keras_bert_zoo.list_presets() "
        "(or pass a local directory or zip in our, Google's or HF's layout)."
        + files.interrupted_save_hint(name.strip())
    )


def get_preset(name):
    """Returns the registry entry (a dict) for a name, alias or Google folder name."""
    return load_registry()[resolve_name(name)]
