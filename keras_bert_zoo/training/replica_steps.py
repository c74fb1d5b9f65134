"""A step function that runs on every replica and averages its logs over replicas and workers.

Keras 3.15's own train/test functions reduce scalar logs with `axis=0` under
`MultiWorkerMirroredStrategy` ("Invalid reduction dimension 0 for input with 0 dimensions"),
so multi-worker `fit`/`evaluate` fails. This one reduces with `axis=None`. Used by the
pretraining loop's checkpointer and by `Task.fit`/`evaluate` on several workers.
"""

import keras
import tensorflow as tf

from keras_bert_zoo.utils import keras_internals


def on_several_workers(model):
    """Whether `model` runs under a multi-worker strategy (TensorFlow backend only)."""
    strategy = getattr(model, "distribute_strategy", None)
    return strategy is not None and keras_internals.in_multi_worker_mode(strategy)


def replica_step_function(model, step):
    """`step(batch)` (e.g. `model.train_step`) on every replica of `model.distribute_strategy`,
    its outputs averaged over replicas (and workers); traced once unless the model runs eagerly."""
    strategy = model.distribute_strategy

    def reduce(value):
        if isinstance(value, tf.distribute.DistributedValues) or keras_internals.in_multi_worker_mode(strategy):
            return strategy.reduce("MEAN", value, axis=None)
        return value

    def one_step(data):
        outputs = strategy.run(step, args=(data,))
        return tf.nest.map_structure(reduce, outputs)

    if model.run_eagerly:
        return one_step
    return tf.function(one_step, reduce_retracing=True, jit_compile=model.jit_compile is True)


def batchwise(step_function):
    """A Keras train/test function (called with the epoch's iterator) that runs one batch per call;
    the end of the data is `StopIteration`, as Keras' epoch iterator expects."""

    def function(iterator):
        return step_function(next(iterator))

    return function


def placeholder_batch(dataset):
    """Zeros with the structure of one `(x, y)` (or `x`) batch of `dataset`; unknown dims as 2
    (a length of 1 would make Keras warn of a softmax over one key)."""
    spec = dataset.element_spec
    spec = tuple(spec[:2]) if isinstance(spec, tuple) else spec
    return tf.nest.map_structure(lambda s: tf.zeros([2 if d is None else d for d in s.shape], s.dtype), spec)


def build_state(model, dataset):
    """Creates the optimizer's and compiled metrics' variables before `fit`'s first step on `dataset`.

    Without a distribution strategy, Keras 3.15 (TensorFlow) creates them while tracing
    the first step, and TensorFlow then traces the step a second time without variable
    creation: twice the graph building of every `fit`. Built here from zeros of one batch's
    structure, the step is traced once. Nothing to do for other inputs or backends."""
    if (not isinstance(dataset, tf.data.Dataset) or keras.backend.backend() != "tensorflow"
            or not isinstance(dataset.element_spec, tuple) or len(dataset.element_spec) < 2):
        return
    with model.distribute_strategy.scope():
        keras_internals.symbolic_build(model, placeholder_batch(dataset))


def fit_on_workers(model, fit, dataset):
    """Runs `fit()` (a `Model.fit` call on `dataset`) under MultiWorkerMirroredStrategy.

    Keras 3.15's fit builds the compiled metrics from a batch reduced across replicas, which
    fails for dict batches on several workers ("Attempt to convert a value ({'token_ids':
    PerReplica...}) to a Tensor"): build them from zeros of one batch's structure first, as
    the pretraining loop does, and let fit skip its own build.
    """
    with model.distribute_strategy.scope():
        keras_internals.symbolic_build(model, placeholder_batch(dataset))
    keras_internals.skip_fit_metric_build(model)
    try:
        return fit()
    finally:
        keras_internals.restore_fit_metric_build(model)


def run_fit(model, fit, x):
    """Runs `fit()` (`model`'s `Model.fit` call on `x`): on several workers through `fit_on_workers`,
    else after `build_state`."""
    if isinstance(x, tf.data.Dataset) and on_several_workers(model):
        return fit_on_workers(model, fit, x)
    build_state(model, x)
    return fit()
