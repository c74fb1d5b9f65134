"""A step function that runs on every replica and averages its logs over replicas and workers.

Keras 3.15's own train/test functions reduce scalar logs with `axis=0` under
`MultiWorkerMirroredStrategy` ("Invalid reduction dimension 0 for input with 0 dimensions"),
so multi-worker `fit`/`evaluate` fails. This one reduces with `axis=None`. Used by the
pretraining loop's checkpointer and by `Task.fit`/`evaluate` on several workers.
"""

import tensorflow as tf

from keras_bert_zoo.utils import keras_internals


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
