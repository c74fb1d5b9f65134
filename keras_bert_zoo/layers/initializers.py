"""The original BERT initialisation: truncated normal with stddev 0.02."""

import keras


def bert_initializer(stddev=0.02):
    """Returns `keras.initializers.TruncatedNormal(stddev=stddev)` (the original's `create_initializer`)."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
