"""Span extraction's training batches: `batch_size` windows a step, not all the windows of `batch_size` questions.

A question's context is cut into doc-stride windows (`SpanExtractorPreprocessor`): one for a
short SQuAD paragraph, dozens for a long passage. A step over every window of `batch_size`
questions holds the activations of all of them for the gradient, and the largest of those
steps sets the process's resident memory for the rest of the run (the allocator keeps what it
once held): all-MiniLM-L6-v2 fine-tuned on 1,000 Quoref questions at length 256, batch 16, met
steps of 19 to 112 windows and peaked at 8.6 GB, where the attention probabilities alone are
windows x heads x length² floats, three copies per layer kept for the backward pass
(docs/squad.md has the measurements). So training batches windows, as `run_squad.py`
(`train_batch_size` features) and HF's `run_qa.py` (`per_device_train_batch_size` features) do:
questions shuffled, windowed `batch_size` at a time, their windows shuffled within a buffer of
`SHUFFLE_BATCHES` batches and batched by `batch_size`, each batch cut to its longest row. The
memory of a step is then bounded by `batch_size` whatever the passages, every step but an
epoch's last has the same shape, and nothing is materialised beyond the buffer.

Steps per epoch are ceil(windows / batch_size), counted in one pass over the questions before
`fit` starts (the learning-rate schedule and the progress bar need them).
"""

import keras
import tensorflow as tf

from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.models import task_pipeline

# Batches of windows in the shuffle buffer: a question's windows (adjacent when windowed) are
# spread over several steps, as run_squad.py's buffer of 100 features does; ~8 x 16 rows of ids.
SHUFFLE_BATCHES = 8
# Questions per call when counting windows: few calls, a few MB of int64 ids at a time.
COUNT_CHUNK = 512


def applies(task, x, y):
    """True where a span task's `_prepare` batches windows: raw in-memory text with answers."""
    return (y is not None and task.preprocessor is not None and x is not None
            and not isinstance(x, tf.data.Dataset) and not inputs_lib.is_packed(x))


def window_functions(preprocessor):
    """`(windows, trim, count)` tf.functions of `preprocessor` (a `SpanExtractorPreprocessor`):
    a raw `(x, y[, sample_weight])` batch -> its windows at full width; a batch of windows cut to
    its longest row; `(questions, contexts)` -> the number of windows. A task keeps them, so that
    every call's pipeline reuses their traces."""

    @tf.function(autograph=False, reduce_retracing=True)
    def windows(data):
        return preprocessor(*keras.utils.unpack_x_y_sample_weight(data))

    @tf.function(autograph=False, reduce_retracing=True)
    def trim(data):
        return keras.utils.pack_x_y_sample_weight(
            *task_pipeline.trim_to_longest(*keras.utils.unpack_x_y_sample_weight(data)))

    @tf.function(autograph=False, reduce_retracing=True)
    def count(questions, contexts):
        return tf.size(preprocessor.windows(questions, contexts)["example_index"], out_type=tf.int64)

    return windows, trim, count


def count_windows(count, questions, contexts, chunk=COUNT_CHUNK):
    """The number of windows of in-memory `questions` and `contexts` (`count` from `window_functions`)."""
    total = 0
    for begin in range(0, len(questions), chunk):
        total += int(count(questions[begin : begin + chunk], contexts[begin : begin + chunk]))
    return total


def _tuple_call(function):
    """tf.data passes a tuple element's items as arguments; the tf.functions take the tuple."""
    return tf.autograph.experimental.do_not_convert(lambda *data: function(data))


def training_dataset(functions, x, y, sample_weight=None, batch_size=None, shuffle=False):
    """The dataset of `(x, (start_positions, end_positions)[, sample_weight])` batches of windows.

    Args:
        functions: `window_functions(preprocessor)`.
        x: raw `(questions, contexts)` (or a list of pairs); `y` their answer spans, int (n, 2).
        batch_size: int or None. Windows per step. Defaults to `task_inputs.DEFAULT_BATCH_SIZE`.
        shuffle: bool. Reshuffle questions and windows every epoch.
    """
    windows, trim, count = functions
    size = batch_size or inputs_lib.DEFAULT_BATCH_SIZE
    columns = inputs_lib.as_columns(x)
    if not isinstance(columns, tuple) or len(columns) != 2:
        raise ValueError(
            "`x` must be a tuple `(questions, contexts)` or a list of (question, context) pairs. "
            f"Received: x of type {type(x).__name__}."
        )
    questions, contexts = columns
    steps = -(-count_windows(count, questions, contexts) // size)
    questions_batches = inputs_lib.in_memory_dataset((questions, contexts), y, sample_weight, size, shuffle)

    def regroup(dataset):
        dataset = dataset.unbatch()
        if shuffle:
            dataset = dataset.shuffle(size * SHUFFLE_BATCHES, reshuffle_each_iteration=True)
        dataset = dataset.batch(size).map(_tuple_call(trim), num_parallel_calls=tf.data.AUTOTUNE,
                                          deterministic=True)
        return dataset.apply(tf.data.experimental.assert_cardinality(steps))

    return task_pipeline.preprocess(questions_batches, windows, regroup=regroup)
