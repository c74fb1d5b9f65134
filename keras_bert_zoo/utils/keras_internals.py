"""Every private Keras / TensorFlow access of keras_bert_zoo, each checked.

Keras 3 and TensorFlow have no public API for the few things below; the rest of the
package calls these functions instead of reaching into `keras.src` or underscore
attributes. Each function checks that the internal it needs is still there and, when
a Keras or TensorFlow release changed it, raises `InternalAPIChanged` naming the
internal and both versions, instead of misbehaving silently. They were written
against Keras 3.15 and TensorFlow 2.21 (`TESTED_WITH`);
`tests/utils/test_keras_internals.py` exercises them all.
"""

import keras
import tensorflow as tf

try:  # Keras internals; a missing one raises `InternalAPIChanged` where it is used.
    from keras.src.losses import loss as loss_module
except ImportError:
    loss_module = None
try:
    from keras.src.saving import serialization_lib
except ImportError:
    serialization_lib = None

TESTED_WITH = "Keras 3.15 / TensorFlow 2.21"


class InternalAPIChanged(RuntimeError):
    """A Keras or TensorFlow internal that keras_bert_zoo relies on is missing or changed."""


def _versions():
    return f"Keras {keras.__version__}, TensorFlow {tf.__version__}"


def _changed(what, found=None):
    detail = "" if found is None else f" (found {found!r})"
    return InternalAPIChanged(
        f"keras_bert_zoo needs the internal {what}, which this installation "
        f"({_versions()}) does not provide{detail}; it was written against {TESTED_WITH}. "
        "Install those versions or update keras_bert_zoo/utils/keras_internals.py."
    )


def _attribute(owner, name, what):
    value = getattr(owner, name, None)
    if value is None:
        raise _changed(what)
    return value


# === Layers ====================================================================
def accept_raw_inputs(layer):
    """Lets `layer` take strings, lists and ragged tensors as its call arguments.

    Keras converts a layer's positional arguments to float tensors by default;
    preprocessing layers (tokenizer, packer, preprocessor) switch that off as
    keras-hub's `PreprocessingLayer` does, through two private attributes that
    `keras.layers.Layer.__init__` sets. Call after `super().__init__()`.
    """
    for name, value in (("_convert_input_args", False), ("_allow_non_tensor_positional_args", True)):
        if not isinstance(getattr(layer, name, None), bool):
            raise _changed(f"keras.layers.Layer.{name}", getattr(layer, name, None))
        setattr(layer, name, value)


def flatten_layers(model):
    """Every layer of `model`, itself first, in Keras' deterministic depth-first order.

    `keras.Model.layers` lists direct children only; nested layers (a functional
    backbone's encoder blocks, their Dense and Dropout layers) need Keras'
    `_flatten_layers`.
    """
    flatten = _attribute(model, "_flatten_layers", "keras.layers.Layer._flatten_layers")
    return list(flatten(include_self=True, recursive=True))


def dense_int8_kernel(layer):
    """The int8 kernel variable of an int8-quantized `keras.layers.Dense` (`layer._kernel`).

    `layer.kernel` is the same variable in Keras 3.15 but may be wrapped (LoRA); the int8
    path needs the stored variable itself.
    """
    return _attribute(layer, "_kernel", "keras.layers.Dense._kernel")


def replace_dense_int8_call(layer, call):
    """Makes an int8 `keras.layers.Dense` run `call(inputs, training=None)` in place of
    Keras' own int8 matmul (Keras 3.15 dispatches an int8 Dense to `self._int8_call`)."""
    if not callable(getattr(layer, "_int8_call", None)) or not hasattr(layer, "kernel_scale"):
        raise _changed("keras.layers.Dense._int8_call and .kernel_scale")
    layer._int8_call = call


# === TensorFlow ================================================================
def auto_trackable_class():
    """TensorFlow's `AutoTrackable` (`tf.__internal__.tracking.AutoTrackable`): the base of
    a plain object whose `tf.function`s and variables `tf.saved_model.save` writes."""
    tracking = getattr(getattr(tf, "__internal__", None), "tracking", None)
    return _attribute(tracking, "AutoTrackable", "tf.__internal__.tracking.AutoTrackable")


def keep_alive(function, owner):
    """Keeps `owner` (a loaded SavedModel) alive as long as `function` (one of its
    signatures), which holds its variables only weakly."""
    function._loaded = owner
    return function


# === Saving ====================================================================
def in_safe_mode():
    """Whether a `.keras` file is being loaded with `safe_mode=True` right now."""
    if serialization_lib is None:
        raise _changed("keras.src.saving.serialization_lib")
    return bool(_attribute(serialization_lib, "in_safe_mode", "serialization_lib.in_safe_mode")())


# === Training ==================================================================
def scale_loss_for_distribution(value):
    """Scales a per-replica loss so the sum over replicas is the mean, as Keras' losses do.

    Keras' TensorFlow trainer sums gradients over replicas, so a custom
    `compute_loss` must divide by the replica count exactly as Keras' built-in losses
    do (a no-op on JAX, PyTorch and one device).
    """
    if loss_module is None:
        raise _changed("keras.src.losses.loss")
    scale = _attribute(loss_module, "scale_loss_for_distribution", "keras.src.losses.loss.scale_loss_for_distribution")
    return scale(value)


def optimizer_variable_index(optimizer, variable):
    """The position of `variable` in `optimizer`'s per-variable slot lists (`BaseOptimizer._get_variable_index`).

    The slots an optimizer's `build` makes with `add_optimizer_variables` are lists in
    the order of its variables; an `update_step` written anew finds a variable's slots
    by this index, as Keras' own optimizers do.
    """
    return _attribute(optimizer, "_get_variable_index", "BaseOptimizer._get_variable_index")(variable)


def in_multi_worker_mode(strategy):
    """Whether `strategy` spans several workers (TF's `extended._in_multi_worker_mode()`)."""
    method = _attribute(strategy.extended, "_in_multi_worker_mode", "tf.distribute StrategyExtended._in_multi_worker_mode")
    result = method()
    if not isinstance(result, bool):
        raise _changed("StrategyExtended._in_multi_worker_mode() -> bool", result)
    return result


def symbolic_build(model, data_batch):
    """Builds `model`'s compiled metrics and optimizer from one batch (`Model._symbolic_build`)."""
    _attribute(model, "_symbolic_build", "keras.Model._symbolic_build")(data_batch=data_batch)


def skip_fit_metric_build(model):
    """Makes `model.fit` skip its own symbolic build (after `symbolic_build`).

    Undo with `restore_fit_metric_build`. Keras 3.15's `fit` calls
    `_maybe_symbolic_build(iterator=...)` once before training.
    """
    _attribute(model, "_maybe_symbolic_build", "keras.Model._maybe_symbolic_build")
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None


def restore_fit_metric_build(model):
    """Undoes `skip_fit_metric_build` (removes the instance attribute it set)."""
    if "_maybe_symbolic_build" in vars(model):
        del model._maybe_symbolic_build


def per_replica_iterators(distributed_iterator, num_replicas):
    """The plain `tf.data` iterators inside a per-replica distributed iterator.

    Under `MirroredStrategy` with `InputReplicationMode.PER_REPLICA`, TF 2.21's
    distributed iterator holds one `_SingleWorkerOwnedDatasetIterator` per replica,
    each over a plain (checkpointable) `OwnedIterator`; the distributed iterator itself
    is not trackable, so a checkpoint saves these.

    Returns:
        list of `num_replicas` `tf.data.Iterator`s.
    """
    plain = [getattr(w, "_iterator", None) for w in getattr(distributed_iterator, "_iterators", [])]
    if len(plain) != num_replicas or not all(isinstance(p, tf.data.Iterator) for p in plain):
        raise _changed(
            "per-replica distributed iterator ._iterators[i]._iterator (a saveable tf.data "
            "iterator per replica, needed for resumable input)",
            plain,
        )
    return plain
