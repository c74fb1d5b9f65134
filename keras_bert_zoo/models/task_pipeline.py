"""What `Task.fit`/`evaluate`/`predict` do with raw text before Keras sees it, and `predict`'s outputs after.

Raw text (read by `task_inputs`) becomes a batched pipeline: preprocessor → padding cut to the longest row
of the batch → prefetch; the number of inputs the preprocessor truncates is reported in one log line.
`predict` on in-memory text runs batches in length order through the task's preprocessing function and
Keras' predict function (traced once) and restores the input order after; `postprocess` answers as NumPy
values when called eagerly (`answers_as_numpy`).
"""

import functools
import logging

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.models.task_inputs import (
    DEFAULT_BATCH_SIZE, SEQUENCE_KEYS, as_columns, batch_if_unbatched, bucketed_dataset, dataset_x_spec,
    in_memory_dataset, is_packed, length_order, num_rows, split_off)
from keras_bert_zoo.training.callbacks import with_progress_bar
from keras_bert_zoo.training.finetuning_optimizer import DEFAULT_LEARNING_RATE, DEFAULT_WARMUP_RATIO

logger = logging.getLogger("keras_bert_zoo.models")

# Cut lengths are rounded up to a multiple of 8: aligned for tensor cores, and XLA
# compiles at most sequence_length / 8 shapes instead of one per length.
PAD_MULTIPLE = 8


def trim_to_longest(x, y=None, sample_weight=None):
    """Cuts the padding columns no row of the batch uses (rounded up to `PAD_MULTIPLE`).

    `x`'s `token_ids`, `segment_ids` and `padding_mask` are cut on their last axis;
    so is any `y`/`sample_weight` of rank >= 2 whose last dimension is the padded
    length (per-token labels and weights).
    """
    mask = x["padding_mask"]
    width = tf.shape(mask)[-1]
    longest = tf.reduce_max(tf.concat([tf.reshape(tf.reduce_sum(mask, axis=-1), [-1]), [0]], 0))
    cut = tf.minimum(width, (longest + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE)
    static_width = mask.shape[-1]
    x = {k: (v[..., :cut] if k in SEQUENCE_KEYS else v) for k, v in x.items()}

    def cut_targets(t):
        if t is None or t.shape.rank is None or t.shape.rank < 2 or t.shape[-1] != static_width:
            return t
        return t[..., :cut]

    y = None if y is None else keras.tree.map_structure(cut_targets, y)
    sample_weight = None if sample_weight is None else keras.tree.map_structure(cut_targets, sample_weight)
    return x, y, sample_weight


def pipeline_functions(preprocessor):
    """Returns `(prepare, count)`: tf.functions over a raw `(x[, y[, sample_weight]])`
    batch. `prepare` runs the preprocessor and cuts the padding; `count` gives
    `[truncated, total]` input sequences (None without `preprocessor.truncated_rows`).
    A task keeps them, so that each call's pipeline reuses their traces."""

    @tf.function(autograph=False, reduce_retracing=True)
    def prepare(data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(preprocessor(x, y, sample_weight))
        return keras.utils.pack_x_y_sample_weight(*trim_to_longest(x, y, sample_weight))

    count_rows = getattr(preprocessor, "truncated_rows", None)
    if count_rows is None:
        return prepare, None

    @tf.function(autograph=False, reduce_retracing=True)
    def count(data):
        flags = tf.reshape(count_rows(keras.utils.unpack_x_y_sample_weight(data)[0]), [-1])
        return tf.stack([tf.reduce_sum(tf.cast(flags, tf.int64)), tf.size(flags, out_type=tf.int64)])

    return prepare, count


def _packed(function):
    """tf.data passes a tuple element's items as arguments; the tf.functions take the tuple
    (one traced signature per structure: `(x,)`, `(x, y)`, `(x, y, sample_weight)`)."""
    return tf.autograph.experimental.do_not_convert(lambda *data: function(data))


def preprocess(dataset, prepare, regroup=None):
    """Maps `prepare` (see `pipeline_functions`) over the batches, in order, prefetching.
    `regroup` (a function of the mapped dataset) rebatches its rows first: span extraction's
    training steps take a fixed number of windows, not all the windows of some questions
    (`window_batches.py`)."""
    dataset = dataset.map(_packed(prepare), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if regroup is not None:
        dataset = regroup(dataset)
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(_OPTIONS)


# tf.data's default graph rewrites found nothing to gain on the tokenizer's graph but
# cost time on every iterator, i.e. on every fit/evaluate/predict call (as in pretraining_writer).
# Without the autotuner (AUTOTUNE is then one call per core; the model step, not the
# tokenizer, is the bottleneck): inside Keras' `fit`, the teardown of an epoch's iterator
# waited for the autotuner's thread to wake from its sleep, up to its optimisation period
# (TensorFlow 2.21, at the next epoch's start or at the end of `fit`; gdb showed the
# teardown in Model::OptimizeLoop's wait).
_OPTIONS = tf.data.Options()
_OPTIONS.experimental_optimization.apply_default_optimizations = False
_OPTIONS.autotune.enabled = False


def report_truncated(dataset, preprocessor, count, steps=None):
    """Counts the inputs the preprocessor will truncate and logs one line; returns the count.

    `count` is from `pipeline_functions`; without it (a preprocessor without
    `truncated_rows`), or for a dataset of unknown or infinite length without
    `steps`, nothing is counted (returns None).
    """
    if count is None:
        return None
    if steps is not None:
        dataset = dataset.take(steps)
    elif dataset.cardinality() < 0:
        return None
    counts = dataset.map(_packed(count), num_parallel_calls=tf.data.AUTOTUNE)
    truncated, total = (int(v) for v in counts.reduce(tf.zeros([2], tf.int64), lambda a, b: a + b))
    _log_truncated(preprocessor, truncated, total)
    return truncated


# Rows per `count` call on in-memory text: few calls, bounded memory.
COUNT_CHUNK = 4096


def count_truncated(columns, preprocessor, count):
    """`report_truncated` for in-memory raw columns: `count` over chunks of the rows, without a
    `tf.data` pass (whose tracing and graph optimisation would be paid on every call).
    Logs one line; returns the count (None without `count`)."""
    if count is None:
        return None
    totals = np.zeros([2], "int64")
    for start in range(0, num_rows(columns), COUNT_CHUNK):
        chunk = keras.tree.map_structure(lambda column: column[start : start + COUNT_CHUNK], columns)
        totals += count((chunk,)).numpy()
    _log_truncated(preprocessor, int(totals[0]), int(totals[1]))
    return int(totals[0])


def _log_truncated(preprocessor, truncated, total):
    logger.log(logging.WARNING if truncated else logging.INFO, "Truncated %d of %d input sequences to "
               "sequence_length=%s (%s).", truncated, total, preprocessor.sequence_length,
               getattr(preprocessor, "truncate", "longest_first"))


def prepare(preprocessor, functions, x, y=None, sample_weight=None, batch_size=None, shuffle=False, sort=False,
            buckets=None):
    """`Task._prepare`: `(dataset, order)` for raw text, or None to give `x` to Keras unchanged.

    Args:
        preprocessor: the task's, or None (then `x` must be packed ids).
        functions: callable giving `(prepare, count)` of `pipeline_functions` (the task's, traced once per
            preprocessor and settings), called only when there is text to preprocess.
        sort: bool. In-memory rows in length order (`order`: `length_order`'s), as `predict` runs them.
        buckets: batches per length-sorted window (`bucketed_dataset`): shuffled in-memory text only.
    """
    if isinstance(x, tf.data.Dataset):
        if is_packed(dataset_x_spec(x)) or preprocessor is None:
            return None
        if y is not None or sample_weight is not None:
            raise ValueError("With a tf.data.Dataset, `y` and `sample_weight` come from the dataset. Drop them.")
        return pipeline(batch_if_unbatched(x, batch_size), preprocessor, functions), None
    if is_packed(x) or x is None:
        return None
    columns = as_columns(x)
    if preprocessor is None:
        if any(c.dtype.kind in "USO" for c in keras.tree.flatten(columns)):
            raise ValueError(
                "`task.preprocessor` is None, so inputs must be packed ids (a dict with "
                "`token_ids`, `segment_ids`, `padding_mask`). Received text. Attach a "
                "preprocessor (`task.preprocessor = ...`) or pack the text first."
            )
        return None
    order = length_order(columns) if sort else None
    if buckets is not None and shuffle:
        dataset = bucketed_dataset(columns, y, sample_weight, batch_size, buckets)
    else:
        dataset = in_memory_dataset(columns, y, sample_weight, batch_size, shuffle, order)
    # A shuffled pipeline is counted by a pass over it, which draws its first shuffle: `fit`'s
    # epochs (and so its numbers) are those of every earlier version.
    return pipeline(dataset, preprocessor, functions, None if shuffle else columns), order


def settings_key(preprocessor):
    """What a preprocessor's traced functions depend on: the preprocessor and its settings' values."""
    return (id(preprocessor),) + tuple(getattr(preprocessor, name) for name in getattr(preprocessor, "settings", ()))


def pipeline(dataset, preprocessor, functions, columns=None):
    """Reports the truncated inputs of a raw batched dataset (counted on its in-memory `columns`
    where given) and preprocesses it; `functions` as `prepare`'s."""
    prepare_batch, count = functions()
    if columns is not None:
        count_truncated(columns, preprocessor, count)
    else:
        report_truncated(dataset, preprocessor, count)
    return preprocess(dataset, prepare_batch)


def fit_arguments(task, prepare, x, y, batch_size, epochs, sample_weight, validation_data, validation_split,
                  shuffle, length_buckets, kwargs):
    """`keras.Model.fit`'s arguments for `Task.fit` (`kwargs`: its others), and the call that adds the fit to
    the task's model card once its history is known. In-memory inputs are checked first (`checked_inputs`);
    raw text's `validation_split` is taken off the end before shuffling; the validation data and `x` become
    pipelines where they are raw text (`prepare`: the task's, see `prepare`); the progress bar is ours."""
    if not task.compiled:  # a task is built compiled; Keras' own check comes after `build_state`
        raise ValueError(
            f"Call `compile()` before `fit()`: this {type(task).__name__} is not compiled. `task.compile()` with no "
            f"arguments gives the paper's fine-tuning recipe (BertAdamW, peak learning rate {DEFAULT_LEARNING_RATE:g}, "
            f"{DEFAULT_WARMUP_RATIO:.0%} warm-up then linear decay).")
    x, y, sample_weight = task.checked_inputs(x, y, sample_weight, "fit")
    if validation_data is not None:
        validation_data = task.checked_validation(validation_data)
    held_out_y = validation_data[1] if isinstance(validation_data, tuple) and len(validation_data) > 1 else None
    card = functools.partial(task.record_fit, x, y, epochs=epochs, batch_size=batch_size, validation=held_out_y)
    raw = not isinstance(x, tf.data.Dataset) and not is_packed(x) and task.preprocessor is not None
    if validation_split and raw:
        x, y, sample_weight, validation_data = split_off(x, y, sample_weight, validation_split)
        validation_split = 0.0
    if validation_data is not None:
        validation_batch_size = kwargs.get("validation_batch_size")
        if isinstance(validation_data, tf.data.Dataset):
            prepared = prepare(validation_data, batch_size=validation_batch_size)
        else:
            held_out = keras.utils.unpack_x_y_sample_weight(tuple(validation_data))
            prepared = prepare(*held_out, validation_batch_size or batch_size)
        if prepared is not None:
            validation_data = prepared[0]
            kwargs = {k: v for k, v in kwargs.items() if k != "validation_batch_size"}  # batched in the pipeline
    if length_buckets is not None and not (raw and shuffle):
        raise ValueError(
            "`length_buckets` applies to shuffled in-memory raw text only. Received: "
            f"length_buckets={length_buckets!r} with shuffle={shuffle!r} and x of type {type(x).__name__}. "
            "Drop `length_buckets`, or pass raw strings with shuffle=True.")
    prepared = prepare(x, y, sample_weight, batch_size, shuffle, buckets=length_buckets)
    if prepared is not None:  # shuffled in the pipeline (Keras warns that it ignores it on datasets)
        x, y, sample_weight, batch_size, shuffle = prepared[0], None, None, None, False
    callbacks = with_progress_bar(kwargs.get("callbacks"), kwargs.get("verbose", "auto"),
                                  task.backbone.dtype_policy.name)
    return dict(kwargs, x=x, y=y, sample_weight=sample_weight, batch_size=batch_size, shuffle=shuffle,
                validation_data=validation_data, validation_split=validation_split, callbacks=callbacks), card


# === Predict ===
def predict(model, keras_predict, prepare, functions, x, batch_size, verbose, steps, callbacks):
    """`Task.predict`'s outputs (before float32): in-memory raw text through `predict_sorted`, other raw
    text through `prepare`'s pipeline and `keras_predict` (Keras' own), in input order; anything else to
    `keras_predict` as it is. `functions` as `prepare`'s."""
    if (model.preprocessor is not None and steps is None and not callbacks and not isinstance(x, tf.data.Dataset)
            and not is_packed(x) and x is not None):
        columns = as_columns(x)
        if num_rows(columns) and all(c.dtype.kind in "USO" for c in keras.tree.flatten(columns)):
            return predict_sorted(model, columns, *functions(), batch_size, verbose)
    prepared = prepare(x, batch_size=batch_size, sort=True)
    if prepared is None:
        return keras_predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)
    outputs = keras_predict(prepared[0], verbose=verbose, steps=steps, callbacks=callbacks)
    order = np.arange(len(keras.tree.flatten(outputs)[0])) if prepared[1] is None else prepared[1]
    return restore_order(outputs, order)


def predict_sorted(model, columns, prepare, count, batch_size=None, verbose=0):
    """`model`'s outputs on raw in-memory rows, batch by batch in length order, in input order.

    Each batch runs `prepare` (see `pipeline_functions`) and `predict_on_batch`, both
    traced once: unlike a tf.data pipeline, no iterator is built per call, and creating
    one means Grappler optimising the tokenizer's function again, twice per
    `keras.Model.predict` call, whatever the number of rows. Truncated inputs are counted
    first (`count_truncated`) and reported as `report_truncated` does.
    """
    count_truncated(columns, model.preprocessor, count)
    order = length_order(columns)
    size = batch_size or DEFAULT_BATCH_SIZE
    starts = range(0, len(order), size)
    progress = keras.utils.Progbar(len(starts)) if verbose in (1, "auto") and len(starts) > 1 else None
    outputs = []
    for step, start in enumerate(starts):
        rows = order[start : start + size]
        data = (keras.tree.map_structure(lambda column: column[rows], columns),)
        packed = prepare(data)  # the packed dict (Keras packs a lone `x` without a tuple)
        x = keras.tree.map_structure(lambda t: t.numpy(), packed[0] if isinstance(packed, tuple) else packed)
        if step == 0:
            trace_any_shape(model, x)
        outputs.append(model.predict_on_batch(x))
        if progress is not None:
            progress.update(step + 1)
    return restore_order(keras.tree.map_structure(lambda *parts: _concatenate_padded(parts), *outputs), order)


def trace_any_shape(model, x):
    """Traces Keras' predict function once for batches of any size and length like `x`.

    `predict_on_batch` passes arrays, so its `tf.function` (`reduce_retracing`) traces the first batch's
    exact shape, then again with relaxed shapes at the first other shape: two traces where one serves every
    batch. Later calls match the relaxed trace. Nothing to do when Keras runs eagerly or on another backend."""
    if keras.backend.backend() != "tensorflow" or model.run_eagerly:
        return
    model.make_predict_function()
    function = model.predict_function
    if hasattr(function, "get_concrete_function"):
        specs = keras.tree.map_structure(lambda a: tf.TensorSpec([None] * np.ndim(a), tf.as_dtype(a.dtype)), x)
        function.get_concrete_function([(specs,)])


def _concatenate_padded(parts):
    """Stacks batch outputs along rows, zero-padding axes whose length differs (as Keras' ragged
    predict outputs, which `restore_order` pads)."""
    parts = [np.asarray(part) for part in parts]
    shape = np.max([part.shape for part in parts], axis=0)
    padded = [np.pad(p, [(0, 0)] + [(0, int(n) - d) for n, d in zip(shape[1:], p.shape[1:])]) for p in parts]
    return np.concatenate(padded, axis=0)


def restore_order(outputs, order):
    """Undoes `length_order` on every output; ragged outputs are padded with zeros."""
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))

    def restore(output):
        if isinstance(output, tf.RaggedTensor):
            # Keras stacks batches of different lengths as (batches, rows, None, ...).
            output = output.merge_dims(0, 1).to_tensor().numpy()
        return np.asarray(output)[inverse]

    return keras.tree.map_structure(restore, outputs)


def answers_as_numpy(answers):
    """Eager tensors of `answers` as NumPy arrays (what a user prints, compares or serialises);
    inside a traced graph (an export's serving function) the tensors are kept."""
    if not tf.executing_eagerly():
        return answers

    def convert(value):
        if isinstance(value, keras.KerasTensor) or isinstance(value, tf.RaggedTensor):
            return value
        if isinstance(value, (tf.Tensor, tf.Variable)):
            return value.numpy()
        if keras.ops.is_tensor(value):
            return keras.ops.convert_to_numpy(value)
        return value

    return keras.tree.map_structure(convert, answers)
