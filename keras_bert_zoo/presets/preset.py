"""`Preset`: a preset opened once. `open(preset)` resolves a registry name or alias, a registry-style
entry dict, a local directory / zip / checkpoint prefix or a hub handle to its files with one
`sources.locate`, and the `Preset` answers what loading asks of it (backbone config, vocabulary,
casing, tokenizer settings, tensors, the saved task, the model card, the content's fingerprint),
each read once and kept: a local zip is hashed and extracted once, not once per question.

Every function that takes a preset takes a `Preset` too, and `open` returns one as it is, so a
caller that opens once and passes the `Preset` along resolves the preset once in all. A `Preset`
reads as the argument it was opened from (`str`, `repr`), so messages name what the caller passed.

The files are located on the first question that needs them: a registry name's config and casing
come from the registry, with nothing downloaded. The tensors are read on each call, not kept: a
kept copy would double the memory of the model built from them.

Examples:
>>> preset = keras_bert_zoo.presets.open("tiny_preset")
>>> preset.layout, preset.config["num_layers"], preset.lowercase()
('keras_bert_zoo', 2, True)
>>> keras_bert_zoo.BertClassifier.from_preset(preset, num_classes=2).backbone.num_layers
2
"""

import copy
import os

from keras_bert_zoo.presets import hubs, model_card, preset_format, registry, sources, task_heads
from keras_bert_zoo.utils import files

# A cased vocabulary has thousands of capitalised pieces (bert-base-cased: 1 in 4); an uncased one
# (almost) none — all-MiniLM-L6-v2's uncased vocabulary holds a few symbols such as "ℝ".
CASED_SHARE = 0.01

# What `task_config` keeps of our preset's config.json (a task saved by `Task.save_to_preset`).
TASK_FIELDS = ("task", "preprocessor", "lowercase", "pretraining")


def open(preset):  # noqa: A001 (the verb of `keras_bert_zoo.presets.open`, as the package spells it)
    """Returns `preset` opened as a `Preset` (a `Preset` as it is): see the module doc."""
    return preset if isinstance(preset, Preset) else Preset(preset)


class Preset:
    """A preset opened once (see the module doc); `open(preset)` makes one.

    Attributes:
        argument: what it was opened from (a name, an entry dict, a path or a hub handle).
        has_files: whether it is a local path or a hub handle (else a registry name or entry
            dict, whose config and casing the registry states).
    """

    def __init__(self, preset):
        self.argument = preset
        self.has_files = registry.is_local_preset(preset) or hubs.is_hub_handle(preset)
        self.kept = {}  # question -> its answer, read once

    def __repr__(self):
        return repr(self.argument)

    def __str__(self):
        return str(self.argument)

    def keep(self, question, read):
        """The kept answer to `question`, `read()` the first time it is asked."""
        if question not in self.kept:
            self.kept[question] = read()
        return self.kept[question]

    def files(self):
        """`(layout, directory)`: the one `sources.locate` of this preset (downloading, verifying
        and converting a registry preset once into the cache; extracting a local zip once)."""
        return self.keep("files", lambda: sources.locate(self.argument))

    @property
    def layout(self):
        """`"keras_bert_zoo"`, `"google"`, `"keras_hub"` or `"hf"`."""
        return self.files()[0]

    @property
    def directory(self):
        """The local folder holding the preset's files."""
        return self.files()[1]

    @property
    def entry(self):
        """The registry entry of a name or alias (`registry.get_preset`)."""
        return self.keep("entry", lambda: registry.get_preset(self.argument))

    @property
    def name(self):
        """What a model card records as where the model was loaded from: a local path made
        absolute, else the argument (a registry name or a hub handle)."""
        if registry.is_local_preset(self.argument):
            return os.path.abspath(os.fspath(self.argument))
        return self.argument

    @property
    def config(self):
        """The `BertBackbone` config (a new dict each time: callers update it with overrides):
        an entry's `config` fields, or the files' config (see `file_config`)."""
        if isinstance(self.argument, dict):
            return {key: self.argument["config"][key] for key in registry.CONFIG_KEYS}
        if self.has_files:
            return self.file_config()
        return {key: self.entry["config"][key] for key in registry.CONFIG_KEYS}

    def file_config(self):
        """The `BertBackbone` config read from the files: our `config.json`, Google's
        `bert_config.json`, HF's or keras-hub's `config.json` (a new dict each time)."""
        return dict(self.keep("file_config", lambda: sources.read_config(*self.files())))

    @property
    def vocabulary_file(self):
        """The path of the vocabulary (`sources.vocabulary_path`), or None."""
        return self.keep("vocabulary_file", lambda: sources.vocabulary_path(*self.files()))

    def vocabulary_path(self):
        """The path of the vocabulary.

        Raises:
            ValueError: the preset has no vocabulary.
        """
        path = self.vocabulary_file
        if path is None:
            raise ValueError(f"The preset {self.argument!r} has no vocab.txt (looked in {self.directory}).")
        return path

    @property
    def tokenizer_settings(self):
        """The casing the tokenizer files state (`sources.tokenizer_settings`; a new dict)."""
        return dict(self.keep("tokenizer_settings", lambda: sources.tokenizer_settings(*self.files())))

    def lowercase(self, tokens=None):
        """Whether the vocabulary is uncased.

        Registry entries say so (`lowercase`), and so do our presets converted from them and
        HF folders (`tokenizer_config.json`'s `do_lower_case`); otherwise the name decides as in
        the original `validate_case_matches_checkpoint` ("uncased"/"cased" in it), else the
        vocabulary `tokens` do: a cased one has thousands of capitalised pieces, an uncased one at
        most a few symbols such as "ℝ" (uncased when at most `CASED_SHARE` of the tokens are).
        """
        if not self.has_files:
            if "lowercase" in self.entry:
                return bool(self.entry["lowercase"])
        else:
            stored = self.keep("stored_lowercase", self.stored_lowercase)
            if stored is not None:
                return stored
        name = os.path.basename(os.path.normpath(os.fspath(self.argument))).lower()
        if "uncased" in name:
            return True
        if "cased" in name:
            return False
        if tokens is not None:
            capitalised = sum(1 for t in tokens if not t.startswith("[") and any(c.isupper() for c in t))
            return capitalised <= CASED_SHARE * len(tokens)
        return True

    def stored_lowercase(self):
        """The casing the files state (our config's `lowercase`, keras-hub's `tokenizer.json`,
        HF's `do_lower_case`), else None."""
        try:
            layout, directory = self.files()
            if layout == "keras_bert_zoo":
                value = self.saved_config().get("lowercase")
                return None if value is None else bool(value)
            if layout == "keras_hub":  # its tokenizer.json states the casing
                return self.tokenizer_settings.get("lowercase")
            if layout == "hf" and os.path.isfile(os.path.join(directory, "tokenizer_config.json")):
                value = files.read_json(os.path.join(directory, "tokenizer_config.json")).get("do_lower_case")
                return None if value is None else bool(value)
        except (ValueError, OSError, KeyError):
            pass  # not readable as ours: the name or the vocabulary decides
        return None

    def strip_accents(self):
        """`strip_accents` as a local or hub checkpoint's tokenizer files state it (keras-hub's
        uncased BERT lowercases without stripping accents), else None (a registry name: BERT's rule)."""
        if not self.has_files:
            return None
        try:
            return self.tokenizer_settings.get("strip_accents")
        except (ValueError, OSError, KeyError):
            return None  # not readable as a checkpoint: the tokenizer's default

    def tensors(self, verify=True):
        """`({canonical name: array}, source)` (`sources.read_tensors`), read on each call.

        `verify=False` accepts hand edits of our preset's files (see `preset_format.verify_preset`).
        """
        layout, directory = self.files()
        return sources.read_tensors(layout, directory, verify=verify)

    @property
    def task_config(self):
        """The `task`, `preprocessor`, `lowercase` and `pretraining` fields of a task saved by
        `Task.save_to_preset`; for an HF `BertFor…` folder or a keras-hub `BertTextClassifier`
        preset the same fields from their files (`task_heads`; the task then has a `source`);
        `{}` for any other preset (Google's, a backbone). A copy each time."""
        return copy.deepcopy(self.keep("task_config", self.read_task_config))

    def read_task_config(self):
        layout, directory = self.files()
        if layout == "hf":
            return task_heads.hf_task_config(directory)
        if layout == "keras_hub":
            return task_heads.keras_hub_task_config(directory)
        if layout != "keras_bert_zoo":
            return {}
        config = self.saved_config()
        return {key: config[key] for key in TASK_FIELDS if key in config}

    def saved_config(self):
        """Our preset's `config.json` (`preset_format.read_preset_config`), read once."""
        return self.keep("saved_config", lambda: preset_format.read_preset_config(self.directory))

    def card(self):
        """The model card's facts of our preset (`model_card.read_card`), else None."""
        layout, directory = self.files()
        return model_card.read_card(directory) if layout == "keras_bert_zoo" else None

    def fingerprint(self):
        """The sha256 of the files' content (`sources.folder_fingerprint`), computed once."""
        return self.keep("fingerprint", lambda: sources.folder_fingerprint(self.directory))
