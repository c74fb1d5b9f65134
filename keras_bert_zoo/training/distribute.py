"""`get_strategy`: one CPU, several GPUs, a cluster of workers or a TPU, by name.

Also `parse_tf_config` (validated `TF_CONFIG`), `distribute_dataset` (one input
pipeline per worker with `distribute_datasets_from_function`, for plain `fit`), and
`ReplicaFeeder`, the checkpointable per-worker input that `replica_input` uses under
`MultiWorkerMirroredStrategy` and TPUs.
"""

import json
import os

import tensorflow as tf

STRATEGIES = ("auto", "cpu", "mirrored", "multi_worker", "tpu")
_TASK_TYPES = ("chief", "worker", "evaluator", "ps")


def parse_tf_config(value=None):
    """Parses and validates `TF_CONFIG` (the environment variable unless `value` is given).

    Args:
        value: str, dict or None. A JSON string or dict; None reads `os.environ`.

    Returns:
        dict with `cluster` and `task`, or None when unset or empty.

    Raises:
        ValueError: invalid JSON, unknown task type, index out of range, bad address.
    """
    if value is None:
        value = os.environ.get("TF_CONFIG", "")
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            raise ValueError(f"TF_CONFIG is not valid JSON ({error}). Received: TF_CONFIG={value!r}.")
    if not isinstance(value, dict) or not isinstance(value.get("cluster"), dict):
        raise ValueError(
            "TF_CONFIG must be a JSON object with a `cluster` mapping, e.g. "
            '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            f'"task": {{"type": "worker", "index": 0}}}}. Received: TF_CONFIG={value!r}.'
        )
    cluster, task = value["cluster"], value.get("task", {})
    for task_type, addresses in cluster.items():
        if task_type not in _TASK_TYPES:
            raise ValueError(f"Unknown task type {task_type!r} in TF_CONFIG cluster; use one of {_TASK_TYPES}.")
        if not isinstance(addresses, list) or not addresses:
            raise ValueError(f"TF_CONFIG cluster[{task_type!r}] must be a non-empty list. Received: {addresses!r}.")
        for address in addresses:
            host, _, port = str(address).rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(
                    f"TF_CONFIG address {address!r} of {task_type!r} is not `host:port`."
                )
    if cluster and task:
        task_type, index = task.get("type"), task.get("index", 0)
        if task_type not in cluster:
            raise ValueError(
                f"TF_CONFIG task type {task_type!r} is not in the cluster ({sorted(cluster)})."
            )
        if not isinstance(index, int) or not 0 <= index < len(cluster[task_type]):
            raise ValueError(
                f"TF_CONFIG task index {index!r} is out of range for {task_type!r} "
                f"({len(cluster[task_type])} addresses)."
            )
    return value


def num_tasks(tf_config):
    """Number of chief + worker tasks in a parsed TF_CONFIG (0 for None)."""
    if not tf_config:
        return 0
    return sum(len(tf_config["cluster"].get(t, [])) for t in ("chief", "worker"))


def _tpu_strategy(tpu):
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, RuntimeError, tf.errors.OpError) as error:
        raise ValueError(
            f"No TPU could be reached (tpu={tpu!r}): {type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else ''} "
            "On a Cloud TPU VM pass tpu='local'; otherwise pass the TPU name or "
            "grpc:// address, or set TPU_NAME. Use strategy='cpu' or 'mirrored' without a TPU."
        ) from error
    return tf.distribute.TPUStrategy(resolver)


def _tpu_from_env():
    return os.environ.get("TPU_NAME") or None


def get_strategy(name="auto", tpu=None, tf_config=None):
    """Returns a `tf.distribute.Strategy` by name.

    Args:
        name: str. `"auto"`: a TPU if `tpu` or `TPU_NAME` is given, else
            `MultiWorkerMirroredStrategy` if `TF_CONFIG` lists more than one task,
            else `MirroredStrategy` with more than one GPU, else the default strategy.
            `"cpu"`: the default strategy (one device). `"mirrored"`: all local GPUs,
            or all logical CPUs when there is no GPU. `"multi_worker"`: from
            `TF_CONFIG`. `"tpu"`: `TPUClusterResolver(tpu)`.
        tpu: str or None. TPU name or address for `"tpu"`/`"auto"`.
        tf_config: str, dict or None. Overrides the `TF_CONFIG` variable (validated).

    Returns:
        A `tf.distribute.Strategy`.

    Raises:
        ValueError: unknown name, invalid TF_CONFIG, or an unreachable TPU.
    """
    if name not in STRATEGIES:
        raise ValueError(f"Unknown strategy. Received: strategy={name!r}. Use one of {STRATEGIES}.")
    config = parse_tf_config(tf_config)
    if tf_config is not None and config is not None:
        os.environ["TF_CONFIG"] = json.dumps(config)
    if name == "auto":
        if tpu or _tpu_from_env():
            name = "tpu"
        elif num_tasks(config) > 1:
            name = "multi_worker"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            name = "cpu"
    if name == "tpu":
        return _tpu_strategy(tpu or _tpu_from_env() or "")
    if name == "multi_worker":
        if config is None:
            raise ValueError(
                "strategy='multi_worker' needs TF_CONFIG describing the cluster and this "
                "task, e.g. {\"cluster\": {\"worker\": [\"h1:2222\", \"h2:2222\"]}, "
                "\"task\": {\"type\": \"worker\", \"index\": 0}}."
            )
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "mirrored":
        devices = tf.config.list_logical_devices("GPU") or tf.config.list_logical_devices("CPU")
        return tf.distribute.MirroredStrategy([d.name for d in devices])
    return tf.distribute.get_strategy()


def is_chief(strategy):
    """True on the task that writes checkpoints and artifacts."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return task_type == "chief" or (task_type == "worker" and task_id == 0 and not has_chief)


def per_replica_batch_size(strategy, global_batch_size):
    """`global_batch_size // replicas`, refusing a batch the replicas cannot share evenly."""
    replicas = strategy.num_replicas_in_sync
    if (not isinstance(global_batch_size, int) or isinstance(global_batch_size, bool)
            or global_batch_size < 1 or global_batch_size % replicas):
        raise ValueError(
            f"`batch_size` must be a positive integer divisible by the {replicas} replicas in "
            f"sync. Received: batch_size={global_batch_size!r}."
        )
    return global_batch_size // replicas


def distribute_dataset(strategy, dataset_fn, global_batch_size, options=None):
    """`distribute_datasets_from_function`: one input pipeline per worker (or per replica
    with `InputReplicationMode.PER_REPLICA` options), each yielding per-replica batches.

    Args:
        strategy: `tf.distribute.Strategy`.
        dataset_fn: callable `(index, count, per_replica_batch_size) ->
            tf.data.Dataset` of batches of `per_replica_batch_size`; `index` of `count`
            input pipelines.
        global_batch_size: int. Must divide evenly by the number of replicas.
        options: `tf.distribute.InputOptions` or None.

    Returns:
        A distributed dataset.
    """
    per_replica_batch_size(strategy, global_batch_size)

    def fn(context):
        return dataset_fn(
            context.input_pipeline_id,
            context.num_input_pipelines,
            context.get_per_replica_batch_size(global_batch_size),
        )

    return strategy.distribute_datasets_from_function(fn, options)


def worker_context(strategy):
    """Returns `(worker_index, num_workers, local_replicas)` for `strategy`."""
    try:
        local = max(1, len(strategy.extended.worker_devices))
    except (RuntimeError, AttributeError):  # the default strategy: one device
        local = 1
    workers = max(1, strategy.num_replicas_in_sync // local)
    resolver = getattr(strategy, "cluster_resolver", None)
    index = 0
    if resolver is not None and getattr(resolver, "task_type", None):
        chiefs = len(resolver.cluster_spec().as_dict().get("chief", []))
        index = resolver.task_id + (chiefs if resolver.task_type == "worker" else 0)
    return index, workers, local


class ReplicaFeeder:
    """Feeds every local replica its own batch from one checkpointable iterator per worker.

    The same sharding as `distribute_dataset` (worker `i` of `n` reads shard `i`,
    consecutive per-replica batches go to consecutive local replicas), but the
    iterator is a plain `tf.data` iterator that `tf.train.Checkpoint` can save: in
    TF 2.21 the iterator of a per-worker distributed dataset is not trackable (under
    `MirroredStrategy`, `replica_input` uses per-replica pipelines instead).

    Args:
        strategy: `tf.distribute.Strategy`.
        dataset_fn: callable `(shard_index, num_shards, per_replica_batch_size) ->
            tf.data.Dataset`.
        global_batch_size: int. Divisible by `strategy.num_replicas_in_sync`.
    """

    def __init__(self, strategy, dataset_fn, global_batch_size):
        per_replica = per_replica_batch_size(strategy, global_batch_size)
        self.strategy = strategy
        self.worker_index, self.num_workers, self.local_replicas = worker_context(strategy)
        self.dataset = dataset_fn(self.worker_index, self.num_workers, per_replica)
        self.iterator = iter(self.dataset)
        self._plain = strategy.num_replicas_in_sync == 1 and not getattr(strategy, "cluster_resolver", None)

    def __iter__(self):
        return self

    def __next__(self):
        batches = [next(self.iterator) for _ in range(self.local_replicas)]
        if self._plain:
            return batches[0]
        return self.strategy.experimental_distribute_values_from_function(
            lambda ctx: batches[ctx.replica_id_in_sync_group % self.local_replicas]
        )
