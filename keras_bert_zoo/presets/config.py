"""What a preset says about the model it holds: its backbone config and its casing.

Works for every kind of preset: a registry name or alias (the registry's fields), a
registry-style entry dict, or a local directory / zip / checkpoint prefix in our,
Google's or HF's layout (read from its config file). `keras_bert_zoo.presets.registry` knows
only the registry; everything that reads a preset's files lives here in `weights/`.
"""

import os

from keras_bert_zoo.presets import registry as presets
from keras_bert_zoo.utils import files
from keras_bert_zoo.presets import hubs, sources

# A cased vocabulary has thousands of capitalised pieces (bert-base-cased: 1 in 4); an uncased one
# (almost) none — all-MiniLM-L6-v2's uncased vocabulary holds a few symbols such as "ℝ".
CASED_SHARE = 0.01


def read_local_config(path):
    """Returns the `BertBackbone` config of a local preset directory, zip or checkpoint.

    Reads our `config.json`, Google's `bert_config.json` or HF's `config.json`
    (extra keys tolerated; `hidden_act` `"gelu"` → `"gelu"`, `"gelu_new"` /
    `"gelu_pytorch_tanh"` → `"gelu_approximate"`).
    """
    layout, directory = sources.locate(path)
    return sources.read_config(layout, directory)


def get_preset_config(preset):
    """Returns the backbone config of a preset name, a registry-style entry dict
    (`{"name", "config", "weights": {...}}`) or a local checkpoint path."""
    if isinstance(preset, dict):
        return {key: preset["config"][key] for key in presets.CONFIG_KEYS}
    if presets.is_local_preset(preset) or hubs.is_hub_handle(preset):
        return read_local_config(preset)
    entry = presets.get_preset(preset)
    return {key: entry["config"][key] for key in presets.CONFIG_KEYS}


def preset_lowercase(preset, tokens=None):
    """Whether a preset's vocabulary is uncased.

    Registry entries say so (`lowercase`), and so do our presets converted from them and
    HF folders (`tokenizer_config.json`'s `do_lower_case`); otherwise the name decides as in
    the original `validate_case_matches_checkpoint` ("uncased"/"cased" in it), else the
    vocabulary does: a cased one has thousands of capitalised pieces, an uncased one at most
    a few symbols such as "ℝ" (uncased when at most `CASED_SHARE` of the tokens are).
    """
    if not (presets.is_local_preset(preset) or hubs.is_hub_handle(preset)):
        entry = presets.get_preset(preset)
        if "lowercase" in entry:
            return bool(entry["lowercase"])
    else:
        stored = _local_preset_lowercase(preset)
        if stored is not None:
            return stored
    name = os.path.basename(os.path.normpath(os.fspath(preset))).lower()
    if "uncased" in name:
        return True
    if "cased" in name:
        return False
    if tokens is not None:
        capitalised = sum(1 for t in tokens if not t.startswith("[") and any(c.isupper() for c in t))
        return capitalised <= CASED_SHARE * len(tokens)
    return True


def _local_preset_lowercase(preset):
    """The `lowercase` field of a local preset in our layout, else None."""
    try:
        layout, directory = sources.locate(preset)
        if layout == "keras_bert_zoo":
            value = sources.preset_format.read_preset_config(directory).get("lowercase")
            return None if value is None else bool(value)
        if layout == "keras_hub":  # its tokenizer.json states the casing
            return sources.tokenizer_settings(layout, directory).get("lowercase")
        if layout == "hf" and os.path.isfile(os.path.join(directory, "tokenizer_config.json")):
            value = files.read_json(os.path.join(directory, "tokenizer_config.json")).get("do_lower_case")
            return None if value is None else bool(value)
    except (ValueError, OSError, KeyError):
        pass  # not readable as ours: the name or the vocabulary decides
    return None


def stated_strip_accents(preset):
    """`strip_accents` as a local or hub checkpoint's tokenizer files state it (keras-hub's uncased
    BERT lowercases without stripping accents), else None (a registry name: BERT's own rule)."""
    if not (presets.is_local_preset(preset) or hubs.is_hub_handle(preset)):
        return None
    try:
        return sources.tokenizer_settings(*sources.locate(preset)).get("strip_accents")
    except (ValueError, OSError, KeyError):
        return None  # not readable as a checkpoint: the tokenizer's default


def parameter_count(config):
    """The number of parameters of a `BertBackbone` of `config` (a backbone config dict), pooler
    included: what a saved preset or an export holds (times 4 bytes in float32), known before any
    tensor is allocated."""
    vocabulary, hidden = int(config["vocabulary_size"]), int(config["hidden_dim"])
    intermediate, layers = int(config["intermediate_dim"]), int(config["num_layers"])
    positions, segments = int(config["max_sequence_length"]), int(config.get("num_segments", 2))
    embeddings = (vocabulary + positions + segments) * hidden + 2 * hidden
    layer = 4 * (hidden * hidden + hidden) + 2 * hidden * intermediate + intermediate + hidden + 4 * hidden
    return embeddings + layers * layer + hidden * hidden + hidden
