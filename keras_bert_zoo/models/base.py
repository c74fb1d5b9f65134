"""Base class `Backbone`: pure architecture, presets, and the weights it declares.

(`Task`, the base of models with heads, is in `models/task.py`.)
"""

import keras

from keras_bert_zoo.presets.class_presets import ClassPresets
from keras_bert_zoo.presets import loading, weight_sizes
from keras_bert_zoo.presets.preset import open as open_preset
from keras_bert_zoo.weights import mapping


class Backbone(keras.Model):
    """A functional model whose constructor arguments are its config, loadable by preset name.

    Subclasses build their graph in `__init__`, store every constructor argument
    under the same name and return them from `get_config()`.
    """

    presets = ClassPresets()  # {name: {"metadata": ...}} of the registry, as keras-hub's `Backbone.presets`

    def declared_variables(self):
        """`{canonical name: variable}` of every weight, under the checkpoints' names.

        The weight loaders and writers map checkpoint tensors onto this declaration
        (Google's TF1 names, `weights/mapping.py`); a backbone of another layout
        overrides it.
        """
        return mapping.backbone_targets(self)

    def get_config(self):
        # The functional graph is rebuilt by `__init__`; only arguments are config. A policy
        # the backbone picked itself (`auto_dtype`) is saved as None: picked again on loading.
        dtype = None if getattr(self, "auto_dtype", False) else keras.dtype_policies.serialize(self.dtype_policy)
        return {"name": self.name, "trainable": self.trainable, "dtype": dtype}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return cls(**config)

    @classmethod
    def from_preset(cls, preset, load_weights=True, verify=True, **kwargs):
        """Builds the backbone of a preset: a registry name, an alias, or a local path.

        Args:
            preset: str. A registry name (`"bert_base_en_uncased"`), a Google folder name
                (`"uncased_L-12_H-768_A-12"`), or a local directory / zip in our, Google's
                or HF's layout; or a `Preset` (`keras_bert_zoo.presets.open`), opened once.
            load_weights: bool. Load the preset's weights (downloading and verifying them
                once into the cache). `False` builds the architecture with random weights.
            verify: bool. Check a saved preset's files against its manifest; `False`
                accepts your own edits of its `config.json` / `vocab.txt`. Defaults to True.
            **kwargs: overrides of config fields, e.g. `dropout=0.0` or `dtype="mixed_bfloat16"`.

        Returns:
            The backbone.
        """
        preset = open_preset(preset)
        config = preset.config
        config.update(kwargs)
        # Sizes are checked against the weights (or, without them, the machine's memory) before
        # anything is allocated: a hand-edited config must not build for minutes, then fail.
        if not load_weights:
            weight_sizes.check_fits_memory(config, preset)
            return cls(**config)
        tensors, source = preset.tensors(verify=verify)
        weight_sizes.check_config_against_weights(config, tensors, source)
        model = cls(**config)
        loading.assign_declared_weights(model, tensors, source)
        return model

    def save_to_preset(self, directory, vocabulary=None):
        """Writes the backbone as a preset: config, weights, vocabulary and a manifest.

        The directory is written atomically (a failure keeps an existing preset intact);
        `from_preset(directory)` loads it back. A task saves itself with its own
        `save_to_preset`, which adds its head and settings.

        Args:
            directory: str. Created or replaced (an existing directory that is not a
                keras_bert_zoo preset is refused).
            vocabulary: path to `vocab.txt`, a list of tokens, a tokenizer with
                `get_vocabulary()`, or None (no `vocab.txt`: a task cannot then be built
                from the preset).

        Returns:
            The directory.

        Examples:
        >>> backbone = keras_bert_zoo.BertBackbone.from_preset("tiny_preset")
        >>> path = backbone.save_to_preset("my_backbone", vocabulary="vocab.txt")
        >>> keras_bert_zoo.BertBackbone.from_preset("my_backbone").hidden_dim
        16
        """
        return loading.write_model_preset(self, directory, vocabulary=vocabulary)
