"""Issue 19 item 9: the pipeline's `without_autograph` wrapper (formerly `plain`) does what its name says."""

import pytest
import tensorflow as tf

from keras_bert_zoo.data import pretraining
from keras_bert_zoo.data.documents import without_autograph


def _python_branch(x):
    if x > 0:  # Python control flow on a tensor: only AutoGraph can turn it into tf.cond
        return x
    return -x


def test_without_autograph_makes_tf_data_trace_the_function_as_written():
    # tf.data converts a mapped function with AutoGraph by default ...
    assert [int(v) for v in tf.data.Dataset.range(-1, 2).map(_python_branch)] == [1, 0, 1]
    # ... and the wrapped one is traced as written: its Python `if` on a tensor is refused.
    with pytest.raises((TypeError, tf.errors.OperatorNotAllowedInGraphError)):
        tf.data.Dataset.range(-1, 2).map(without_autograph(_python_branch))
    # The TF-ops-only function gives the same values either way.
    wrapped = tf.data.Dataset.range(-1, 2).map(without_autograph(lambda x: tf.abs(x)))
    assert [int(v) for v in wrapped] == [1, 0, 1]
    assert pretraining.without_autograph is without_autograph  # one wrapper for the whole pipeline
