"""The versions a run's records name (`results.json`, a preset's model card)."""

import importlib.metadata
import platform

import keras
import tensorflow as tf


def package_versions():
    """`{"keras_bert_zoo", "tensorflow", "keras", "python"}` versions of this process."""
    try:
        ours = importlib.metadata.version("keras_bert_zoo")
    except importlib.metadata.PackageNotFoundError:
        ours = "not installed as a distribution (run from a source tree)"
    return {"keras_bert_zoo": ours, "tensorflow": tf.__version__, "keras": keras.__version__,
            "python": platform.python_version()}
