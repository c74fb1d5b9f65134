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
import re

from keras_bert_zoo.presets.preset_table import PresetTable
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


def pretraining_head_parameters(config):
    """Parameters of the MLM and NSP heads a Google checkpoint holds besides the backbone (the MLM
    transform's dense layer and LayerNorm, its output bias over the vocabulary; NSP's dense layer):
    a converted preset keeps them, so they are part of its size on disk."""
    hidden = config["hidden_dim"]
    return hidden * hidden + hidden + 2 * hidden + config["vocabulary_size"] + 2 * hidden + 2


def preset_metadata(name):
    """What a registry preset is, as `list_presets()` shows it and `Class.presets` gives it.

    Returns:
        dict: `description`, `params` (the backbone's parameters, pooler included),
        `size_bytes` (its converted preset's float32 weights on disk: backbone plus the MLM and
        NSP heads), `num_layers`, `hidden_dim`, `num_heads`, `lowercase` (uncased when True),
        `language`, `source`, `license`, `aliases`, `url` and `path` ("bert", as keras-hub's).
    """
    entry = load_registry()[resolve_name(name)]
    config = entry["config"]
    size = 4 * (entry["parameters"] + pretraining_head_parameters(config))
    return {
        "description": entry["description"], "params": entry["parameters"], "size_bytes": size,
        "num_layers": config["num_layers"], "hidden_dim": config["hidden_dim"], "num_heads": config["num_heads"],
        "lowercase": entry["lowercase"], "language": entry["language"], "source": entry["source"],
        "license": entry["license"], "aliases": list(entry.get("aliases", [])), "url": entry["weights"]["url"],
        "path": "bert",
    }


def list_presets():
    """The registry's names, sorted: a list that prints as a table of each preset's metadata.

    Returns:
        `PresetTable`, a list of names (`"bert_base_en_uncased" in list_presets()`) whose
        `print`/`repr` is a table of parameters, size on disk, layers/hidden/heads, casing,
        language, source and license (`preset_metadata`), and whose `metadata` is
        `{name: preset_metadata(name)}`.
    """
    names = sorted(load_registry())
    return PresetTable(names, {name: preset_metadata(name) for name in names})


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
    message += hub_hint(name.strip())
    key = os.path.basename(path).lower()
    if key.endswith(".zip"):
        key = key[: -len(".zip")]
    if key in _alias_table():
        message += f" (To load the registry preset instead, pass {_alias_table()[key]!r}.)"
    raise ValueError(message)


# A Hugging Face Hub repo id (`org/name`, an optional `@revision`), and Kaggle Models' framework
# names (the third part of `owner/model/framework/variation[/version]`): the shapes a user coming
# from those hubs types without the scheme.
HF_REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*(@[\w./-]+)?$")
KAGGLE_FRAMEWORKS = {"keras", "tensorflow1", "tensorflow2", "tfjs", "tflite", "pytorch", "jax", "flax",
                     "transformers", "other", "gguf", "scikitlearn", "onnx", "paddlepaddle", "mxnet", "coral"}


def hub_hint(name):
    """The sentence that names the hub handle a missing path may have meant, or "".

    `org/name` (a file name's suffix aside) may be a Hugging Face Hub id written without
    `hf://`; `owner/model/framework/variation[/version]` a Kaggle Models handle without `kaggle://`.
    """
    parts = name.strip("/").split("/")
    if HF_REPO_ID.match(name) and os.path.splitext(parts[-1])[1] not in (".zip", ".json", ".ckpt", ".h5"):
        return f" If {name!r} is a Hugging Face Hub model id, pass 'hf://{name}'."
    if (len(parts) in (4, 5) and all(parts) and parts[2].lower() in KAGGLE_FRAMEWORKS
            and (len(parts) == 4 or parts[4].isdigit())):
        return f" If {name!r} is a Kaggle Models handle, pass 'kaggle://{name.strip('/')}'."
    return ""


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
    # Best match first (difflib ranks by similarity); an alias and its name count once.
    close = list(dict.fromkeys(table[c] for c in difflib.get_close_matches(key, list(table), n=8, cutoff=0.5)))[:5]
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    raise ValueError(
        f"Unknown preset {name!r}.{hint} Known presets: keras_bert_zoo.list_presets() "
        "(or pass a local directory or zip in our, Google's or HF's layout)."
        + files.interrupted_save_hint(name.strip())
    )


def get_preset(name):
    """Returns the registry entry (a dict) for a name, alias or Google folder name."""
    return load_registry()[resolve_name(name)]
