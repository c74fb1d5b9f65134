"""`TokenizerPreprocessor`: what every task preprocessor shares — a `BertTokenizer`, its
settings as config, and the preset's vocabulary and casing."""

import warnings

import keras

from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
from keras_bert_zoo.text.vocabulary import load_vocabulary
from keras_bert_zoo.utils import keras_internals
from keras_bert_zoo.presets.class_presets import ClassPresets
from keras_bert_zoo.presets.preset import open as open_preset


class TokenizerPreprocessor(keras.layers.Layer):
    """Base of the task preprocessors (`BertPreprocessor`, `SpanExtractorPreprocessor`,
    `TokenClassifierPreprocessor`, ...): a layer holding `tokenizer` whose constructor
    arguments named in `settings` are stored under the same names. `get_config` and
    `from_config` serialise them with the tokenizer; `preset_tokenizer` builds the
    tokenizer of a preset.

    A setting assigned after construction (`preprocessor.sequence_length = 64`) is checked
    as the constructor checks it and takes effect in every later call, `fit`, `predict`,
    `evaluate`, `save_to_preset` and export alike; one in `fixed_settings` is refused with
    the way to get it."""

    presets = ClassPresets()  # {name: {"metadata": ...}} of the registry, as keras-hub's preprocessors'
    settings = ()  # the subclass's constructor arguments besides `tokenizer`
    fixed_settings = {}  # setting -> why it cannot change after construction, and what to do instead

    def __setattr__(self, name, value):
        if name in self.settings and name in self.__dict__:  # a change, not the constructor's first set
            self.check_setting(name, value)
            super().__setattr__(name, value)
            self.settings_changed()
            return
        super().__setattr__(name, value)

    def check_setting(self, name, value):
        """Raises unless `name` may become `value`: the constructor's own checks, on the settings
        with that one changed (a throwaway instance, never used)."""
        if name in self.fixed_settings:
            raise ValueError(
                f"`{type(self).__name__}.{name}` cannot change after construction: {self.fixed_settings[name]} "
                f"Received: {name}={value!r}."
            )
        settings = {key: getattr(self, key) for key in self.settings}
        settings[name] = value
        try:
            type(self)(self.tokenizer, name=self.name, **settings)
        except ValueError as e:
            raise ValueError(
                f"`{type(self).__name__}.{name} = {value!r}` is refused, and the preprocessor keeps "
                f"{name}={getattr(self, name)!r}: {e}"
            ) from e

    def settings_changed(self):
        """Called after a setting changed: a subclass hands the new values to what it built
        from them (its `SegmentPacker`). Nothing here: settings read at call time need nothing."""

    def __init__(self, tokenizer, **kwargs):
        super().__init__(**kwargs)
        keras_internals.accept_raw_inputs(self)  # strings in, no Keras dtype conversion
        self.built = True
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(
                "`tokenizer` must be a keras_bert_zoo.text.BertTokenizer. "
                f"Received: tokenizer of type {type(tokenizer).__name__}."
            )
        self.tokenizer = tokenizer

    def get_config(self):
        config = super().get_config()
        config["tokenizer"] = keras.saving.serialize_keras_object(self.tokenizer)
        config.update({name: getattr(self, name) for name in self.settings})
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["tokenizer"] = keras.saving.deserialize_keras_object(config["tokenizer"])
        return cls(**config)

    @staticmethod
    def preset_tokenizer(preset, lowercase=None, **kwargs):
        """The `BertTokenizer` of a preset: its vocabulary and casing.

        Args:
            preset: str. A registry name/alias or a local checkpoint directory or zip; or a
                `Preset` (`keras_bert_zoo.presets.open`), opened once.
            lowercase: bool or None. None uses the preset's casing; a value that
                contradicts it warns, as the original `validate_case_matches_checkpoint`.
            **kwargs: more `BertTokenizer` arguments (`strip_accents`, `errors`, ...).
        """
        preset = open_preset(preset)
        tokens = load_vocabulary(preset.vocabulary_path())
        expected = preset.lowercase(tokens)
        if lowercase is not None and bool(lowercase) != expected:
            warnings.warn(
                f"lowercase={lowercase} but the preset {preset!r} is "
                f"{'uncased' if expected else 'cased'}: its checkpoint was trained with "
                f"lowercase={expected}. Tokens will not match the checkpoint's.",
                stacklevel=3,
            )
        lowercase = expected if lowercase is None else bool(lowercase)
        if "strip_accents" not in kwargs:
            stated = preset.strip_accents()
            if stated is not None and stated != lowercase:  # e.g. keras-hub's: lowercased, accents kept
                kwargs["strip_accents"] = stated
        return BertTokenizer(tokens, lowercase=lowercase, **kwargs)
