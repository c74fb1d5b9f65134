"""The functions of `Task.predict`: on raw in-memory text, batches in length order through the
task's preprocessing function and Keras' predict function (traced once), outputs back in input
order; float outputs as float32; `postprocess` answers as NumPy values when called eagerly."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.models.task_inputs import DEFAULT_BATCH_SIZE, count_truncated, length_order


def predict_sorted(model, columns, prepare, count, batch_size=None, verbose=0):
    """`model`'s outputs on raw in-memory rows, batch by batch in length order, in input order.

    Each batch runs `prepare` (see `task_inputs.pipeline_functions`) and `predict_on_batch`, both
    traced once: unlike a tf.data pipeline, no iterator is built per call, and creating
    one means Grappler optimising the tokenizer's function again, twice per
    `keras.Model.predict` call, whatever the number of rows. Truncated inputs are counted
    first (`count_truncated`) and reported as `task_inputs.report_truncated` does.
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

    `predict_on_batch` passes arrays, so its `tf.function` (`reduce_retracing`) traces the
    first batch's exact shape, then again with relaxed shapes at the first other shape:
    two traces where one serves every batch. Later calls match the relaxed trace. Nothing to do when Keras runs eagerly
    or on another backend."""
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


def widen_in_graph(outputs):
    """`predict_step`'s bf16/fp16 output tensors cast to float32 (ragged ones are left as they are)."""
    def widen(output):
        dtype = getattr(output, "dtype", None)
        if dtype is None or isinstance(output, tf.RaggedTensor):
            return output
        if keras.backend.standardize_dtype(dtype) in ("bfloat16", "float16"):
            return keras.ops.cast(output, "float32")
        return output

    return keras.tree.map_structure(widen, outputs)


def as_float32(outputs):
    """Half-precision outputs (bf16/fp16 under a mixed policy) as float32 NumPy arrays:
    what a user's NumPy, SciPy or scikit-learn code takes."""
    def widen(output):
        output = np.asarray(output) if isinstance(output, (np.ndarray, np.generic)) else output
        if isinstance(output, np.ndarray) and output.dtype.name in ("bfloat16", "float16"):
            return output.astype("float32")
        return output

    return keras.tree.map_structure(widen, outputs)


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
