"""`TokenizerPreprocessor`: what every task preprocessor shares — a `BertTokenizer`, its
settings as config, and the preset's vocabulary and casing."""

import warnings

import keras

from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
from keras_bert_zoo.text.vocabulary import load_vocabulary
from keras_bert_zoo.utils import keras_internals
from keras_bert_zoo.presets.loading import get_preset_vocabulary
from keras_bert_zoo.presets.config import preset_lowercase


class TokenizerPreprocessor(keras.layers.Layer):
    """Base of the task preprocessors (`BertPreprocessor`, `SpanExtractorPreprocessor`,
    `TokenClassifierPreprocessor`, ...): a layer holding `tokenizer` whose constructor
    arguments named in `settings` are stored under the same names. `get_config` and
    `from_config` serialise them with the tokenizer; `preset_tokenizer` builds the
    tokenizer of a preset."""

    settings = ()  # the subclass's constructor arguments besides `tokenizer`

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
            preset: str. A registry name/alias or a local checkpoint directory or zip.
            lowercase: bool or None. None uses the preset's casing; a value that
                contradicts it warns, as the original `validate_case_matches_checkpoint`.
            **kwargs: more `BertTokenizer` arguments (`strip_accents`, `errors`, ...).
        """
        tokens = load_vocabulary(get_preset_vocabulary(preset))
        expected = preset_lowercase(preset, tokens)
        if lowercase is not None and bool(lowercase) != expected:
            warnings.warn(
                f"lowercase={lowercase} but the preset {preset!r} is "
                f"{'uncased' if expected else 'cased'}: its checkpoint was trained with "
                f"lowercase={expected}. Tokens will not match the checkpoint's.",
                stacklevel=3,
            )
        lowercase = expected if lowercase is None else bool(lowercase)
        return BertTokenizer(tokens, lowercase=lowercase, **kwargs)
