"""What a preset says about the model it holds: its backbone config and its casing.

Works for every kind of preset: a registry name or alias (the registry's fields), a
registry-style entry dict, a local directory / zip / checkpoint prefix in our, Google's or
HF's layout (read from its config file), or a `Preset`. Each function opens the preset
(`presets.open`) and asks it; a caller with several questions opens once and asks the `Preset`.
"""

from keras_bert_zoo.presets.preset import CASED_SHARE, open as open_preset  # noqa: F401 (CASED_SHARE: its old home)


def read_local_config(path):
    """Returns the `BertBackbone` config of a local preset directory, zip or checkpoint.

    Reads our `config.json`, Google's `bert_config.json` or HF's `config.json`
    (extra keys tolerated; `hidden_act` `"gelu"` → `"gelu"`, `"gelu_new"` /
    `"gelu_pytorch_tanh"` → `"gelu_approximate"`).
    """
    return open_preset(path).file_config()


def get_preset_config(preset):
    """Returns the backbone config of a preset name, a registry-style entry dict
    (`{"name", "config", "weights": {...}}`), a local checkpoint path or a `Preset`."""
    return open_preset(preset).config


def preset_lowercase(preset, tokens=None):
    """Whether a preset's vocabulary is uncased (`Preset.lowercase`: the registry entry, the
    saved config or tokenizer files, the name, else the capitalised share of `tokens`)."""
    return open_preset(preset).lowercase(tokens)


def stated_strip_accents(preset):
    """`strip_accents` as a local or hub checkpoint's tokenizer files state it, else None
    (`Preset.strip_accents`)."""
    return open_preset(preset).strip_accents()


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
