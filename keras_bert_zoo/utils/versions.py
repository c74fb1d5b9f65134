"""The versions a run's records name (`results.json`, a preset's model card)."""

import importlib.metadata
import platform


def package_versions():
    """`{"keras_bert_zoo", "tensorflow", "keras", "python"}` versions of this process."""
    import keras  # lazy: the versions of the frameworks this process already imported (start-up time)
    import tensorflow as tf  # lazy: as above

    try:
        ours = importlib.metadata.version("keras_bert_zoo")
    except importlib.metadata.PackageNotFoundError:
        ours = "not installed as a distribution (run from a source tree)"
    return {"keras_bert_zoo": ours, "tensorflow": tf.__version__, "keras": keras.__version__,
            "python": platform.python_version()}
