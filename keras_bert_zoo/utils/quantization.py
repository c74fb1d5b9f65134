"""int8 inference for a task: Keras' own int8 weights, multiplied by oneDNN's VNNI kernel.

`quantize_task(task, "int8")` quantises every `keras.layers.Dense` of a task with Keras'
`Model.quantize("int8")`: per-output-channel abs-max int8 kernels and a float
`kernel_scale` (the Keras format, so `.keras` files keep them), activations quantised
per token (abs-max over the features) at call time. Embeddings, LayerNorm and the
attention products stay in the task's float policy.

Why not Keras' own int8 call: on TensorFlow it multiplies int8 by int8 with
`tf.matmul(..., output_type=int32)`, an Eigen kernel many times *slower* than the bf16
matmul (measured by `benchmarks/quantization.py`). TensorFlow's `QuantizedMatMulWithBias`
(uint8 x int8 -> int32) is oneDNN's VNNI kernel, faster than either. On
TensorFlow the quantised `Dense` layers therefore compute the same integer product
through it: the int8 activations are shifted by +128 into uint8 and the shift is taken
back exactly through an int32 bias of -128 * column sums of the kernel, so the int32
accumulator equals Keras' int8 x int8 product bit for bit. Other backends keep Keras'
own int8 call.
"""

import contextlib
import functools
import gc

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.utils.keras_internals import dense_int8_kernel, flatten_layers, replace_dense_int8_call
from keras_bert_zoo.utils.precision import cpu_has_vnni

MODES = ("int8",)


def check_mode(mode):
    """Returns `mode` if it is a supported quantisation mode, else raises a clear error."""
    if mode not in MODES:
        raise ValueError(
            f"`mode` must be one of {', '.join(repr(m) for m in MODES)} (weights and activations "
            f"in int8). Received: mode={mode!r}."
        )
    return mode


def quantization_mode(model):
    """The quantisation mode of `model`'s `Dense` layers ("int8"), or None if it is float."""
    modes = {
        layer.quantization_mode
        for layer in flatten_layers(model)
        if isinstance(layer, keras.layers.Dense) and layer.quantization_mode
    }
    return next(iter(modes)) if modes else None


def _is_dense(layer, config=None):
    return type(layer) is keras.layers.Dense


def quantize_task(task, mode):
    """Quantises the `Dense` layers of a built task in place and installs the fast int8 call.

    Args:
        task: a built `keras_bert_zoo` task (any `keras.Model`).
        mode: str. "int8".

    Raises:
        ValueError: for an unknown mode, or a task that is already quantised.
    """
    check_mode(mode)
    current = quantization_mode(task)
    if current is not None:
        raise ValueError(
            f"This task is already quantised ({current}); quantise the float task once. "
            f"Received: mode={mode!r}."
        )
    with _one_gc_collect():
        keras.Model.quantize(task, mode, filters=_is_dense)
    install_fast_int8(task)
    return task


@contextlib.contextmanager
def _one_gc_collect():
    """Runs the block with `gc.collect` a no-op, then collects once.

    Keras' `Layer.__delattr__` calls `gc.collect()` for every variable it drops, and
    quantising drops each Dense's float kernel: with TensorFlow loaded each collection is
    slow, and they made up nearly all of `quantize`'s time (BERT-Base has 74 Dense
    layers). One collection at the end frees the same buffers.
    """
    collect = gc.collect
    gc.collect = lambda *args, **kwargs: 0
    try:
        yield
    finally:
        gc.collect = collect
        collect()


def install_fast_int8(model):
    """Makes every int8 `Dense` of `model` run oneDNN's uint8 x int8 kernel (TensorFlow only).

    Returns:
        int, the number of layers that got the fast call (0 on other backends, and on a
        CPU without VNNI, where Keras' own int8 call stays).
    """
    if keras.backend.backend() != "tensorflow" or not cpu_has_vnni():
        return 0
    count = 0
    for layer in flatten_layers(model):
        if isinstance(layer, keras.layers.Dense) and layer.quantization_mode == "int8":
            replace_dense_int8_call(layer, functools.partial(_vnni_int8_call, layer))
            count += 1
    return count


def _vnni_int8_call(layer, inputs, training=None):
    """`Dense` in int8: the same numbers as Keras' `_int8_call`, on oneDNN's VNNI kernel."""
    kernel = tf.convert_to_tensor(dense_int8_kernel(layer))  # (in, out) int8
    kernel_scale = tf.cast(tf.convert_to_tensor(layer.kernel_scale), tf.float32)  # (out,)
    x = tf.convert_to_tensor(inputs)
    in_dim, out_dim = kernel.shape[0], kernel.shape[1]
    lead = tf.shape(x)[:-1]
    x = tf.reshape(tf.cast(x, tf.float32), (-1, in_dim))  # (tokens, in)
    # Keras' AbsMaxQuantizer(axis=-1): scale = 127 / (max |x| + epsilon), round, clip.
    x_scale = 127.0 / (tf.reduce_max(tf.abs(x), axis=-1, keepdims=True) + keras.backend.epsilon())
    x_q = tf.clip_by_value(tf.round(x * x_scale), -127.0, 127.0)
    x_u8 = tf.cast(x_q + 128.0, tf.uint8)  # exact: x_q + 128 in [1, 255]
    # (x_q + 128) @ W - 128 * colsum(W) == x_q @ W, in int32 (checked exactly in the tests).
    # colsum(W) comes out of the same product: the output row of a row of ones appended to the
    # activations. Summing the kernel apart (cast to int32, then reduced) would read and write
    # every weight on every call.
    ones = tf.ones((1, in_dim), tf.uint8)
    acc = tf.raw_ops.QuantizedMatMulWithBias(
        a=tf.bitcast(tf.concat([x_u8, ones], axis=0), tf.quint8), b=tf.bitcast(kernel, tf.qint8),
        bias=tf.bitcast(tf.zeros((out_dim,), tf.int32), tf.qint32),
        min_a=0.0, max_a=255.0, min_b=-127.0, max_b=127.0, Toutput=tf.qint32,
    )[0]
    acc = tf.bitcast(acc, tf.int32)  # (tokens + 1, out)
    acc = acc[:-1] - 128 * acc[-1:]
    y = tf.cast(acc, tf.float32) / (x_scale * kernel_scale)  # (tokens, out)
    y = tf.reshape(y, tf.concat([lead, [out_dim]], axis=0))
    y = tf.cast(y, layer.compute_dtype)
    if layer.bias is not None:
        y = y + tf.cast(layer.bias, layer.compute_dtype)
    if layer.activation is not None:
        y = layer.activation(y)
    return y


def dequantized_variables(model):
    """`{id(variable): float array}` for the int8 kernels of `model`: `q / kernel_scale`.

    A preset stores these floats with the mode; quantising them again on load gives back
    the same int8 kernels (abs-max maps each column's largest value to exactly 127).
    """
    out = {}
    for layer in flatten_layers(model):
        if isinstance(layer, keras.layers.Dense) and layer.quantization_mode == "int8":
            kernel = dense_int8_kernel(layer)
            q = np.asarray(keras.ops.convert_to_numpy(kernel), np.float32)
            scale = np.asarray(keras.ops.convert_to_numpy(layer.kernel_scale), np.float32)
            out[id(kernel)] = q / scale[None, :]
    return out
