"""`ClassPresets`: the `presets` class attribute of every class that has `from_preset`, as keras-hub's
(`keras_hub.models.BertBackbone.presets`): a dict of the registry's presets to look through or
tab-complete, each with its metadata."""

from keras_bert_zoo.presets import registry


class ClassPresets:
    """A class attribute whose value is `{name: {"metadata": registry.preset_metadata(name)}}` for
    every registry preset (all of them are BERT checkpoints, so every class that builds from one
    lists them all), read from the registry when accessed.

    Examples:
    >>> keras_bert_zoo.BertClassifier.presets["bert_tiny_en_uncased"]["metadata"]["params"]
    4385920
    """

    def __get__(self, instance, owner):
        return {name: {"metadata": metadata} for name, metadata in registry.list_presets().metadata.items()}
