"""Resumable input for every strategy: checkpointable iterators that feed all replicas.

`resumable_input(strategy, dataset_fn, global_batch_size)` picks, per strategy:

- one device (the default strategy): the dataset itself, one plain iterator;
- `MirroredStrategy` (one machine, several GPUs or logical CPUs):
  `distribute_datasets_from_function` with one input pipeline per replica
  (`InputReplicationMode.PER_REPLICA`, host-side prefetch). Each replica's
  pipeline has a plain `tf.data` iterator, and those are what the checkpoint saves;
  the distributed iterator itself is not trackable in TF 2.21;
- `MultiWorkerMirroredStrategy` and `TPUStrategy`: TF 2.21 supports only per-worker
  input pipelines there, whose multi-device iterators cannot be saved at all. Each
  worker builds its own pipeline (`dataset_fn(worker_index, num_workers, ...)`) as
  `distribute_datasets_from_function` would, iterates it with a plain iterator, and
  hands consecutive batches to its local replicas (`ReplicaFeeder`).

In every case `dataset_fn(index, count, per_replica_batch_size)` must return the
`index`-th of `count` disjoint streams of per-replica batches.
"""

from typing import NamedTuple

import tensorflow as tf

from keras_bert_zoo.training.distribute import ReplicaFeeder, distribute_dataset
from keras_bert_zoo.utils import keras_internals


class ResumableInput(NamedTuple):
    """The training iterator of one process and the iterators a checkpoint must save.

    Attributes:
        iterator: `next(iterator)` gives one global step's batch (a `PerReplica`
            value under a distribution strategy).
        trackables: dict name → `tf.data` iterator, for `tf.train.Checkpoint`.
        element_spec: the element spec of one replica's batches.
        worker_index, num_workers: this process's place in the cluster.
    """

    iterator: object
    trackables: dict
    element_spec: object
    worker_index: int = 0
    num_workers: int = 1


def resumable_input(strategy, dataset_fn, global_batch_size):
    """Builds the checkpointable training input for `strategy` (see the module doc).

    Args:
        strategy: `tf.distribute.Strategy`.
        dataset_fn: callable `(index, count, per_replica_batch_size) -> tf.data.Dataset`.
        global_batch_size: int. Divisible by `strategy.num_replicas_in_sync`.

    Returns:
        `ResumableInput`.
    """
    if isinstance(strategy, tf.distribute.MirroredStrategy):
        options = tf.distribute.InputOptions(
            experimental_replication_mode=tf.distribute.InputReplicationMode.PER_REPLICA,
            experimental_fetch_to_device=False,
        )
        iterator = iter(distribute_dataset(strategy, dataset_fn, global_batch_size, options))
        # A TF internal (checked: a change in TF fails loudly there).
        plain = keras_internals.per_replica_iterators(iterator, strategy.num_replicas_in_sync)
        trackables = {f"replica_{i}": p for i, p in enumerate(plain)}
        return ResumableInput(iterator, trackables, plain[0].element_spec)
    feeder = ReplicaFeeder(strategy, dataset_fn, global_batch_size)
    return ResumableInput(feeder, {"worker": feeder.iterator}, feeder.dataset.element_spec,
                          feeder.worker_index, feeder.num_workers)
