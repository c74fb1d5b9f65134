"""On-the-fly pretraining input through tf.data service: many input workers, many trainers.

`pretraining_dataset(...).apply(distribute("grpc://dispatcher:5050", job_name="run-1"))` moves
the whole pipeline (reading, tokenization, NSP pairing, masking, batching) onto tf.data
service workers (`tf.data.experimental.service`); trainers only receive batches. Start a
dispatcher and workers with TensorFlow's own servers (`DispatchServer`, `WorkerServer`, or
the `tf.data service` binaries/containers of a cluster); nothing here schedules anything.

Sharding is dynamic (`ShardingPolicy.DYNAMIC`): the dispatcher hands the input *files* to
workers one at a time, so within an epoch every file is read by exactly one worker, and a
fast worker takes more files. Trainers that pass the same `job_name` share one job: each
batch goes to one trainer.

What this changes against the local pipeline (stated, not hidden):
- The instances are not the local pipeline's: windows of documents (and so the random next
  documents and the window-indexed random draws) are formed from the files each worker got,
  in the order it got them. Every document is still used once per epoch.
- A worker that dies loses the split it was reading (tf.data service's at-most-once
  visitation for dynamic sharding): its remaining documents of that epoch are skipped.
- The service's iterator cannot be checkpointed (TF 2.21: "SaveInternal is not yet
  supported"). A killed trainer resumes its weights, optimizer state and step from its
  checkpoint, but the input starts a fresh pass: the exact-resume guarantee of the local
  pipeline (no example replayed or skipped) does not hold with the service.
"""

import re

import tensorflow as tf

SERVICE_PATTERN = re.compile(r"^(grpc://)?[^\s/:]+:\d+$")


def check_service_address(service):
    """Validates a dispatcher address (`host:port` or `grpc://host:port`); returns it with the protocol."""
    if not isinstance(service, str) or not SERVICE_PATTERN.match(service):
        raise ValueError(
            "`service` must be a tf.data service dispatcher address such as 'grpc://localhost:5050' or "
            f"'dispatcher:5050'. Received: service={service!r}."
        )
    return service if service.startswith("grpc://") else f"grpc://{service}"


def distribute(service, job_name=None, max_outstanding_requests=None):
    """A `Dataset.apply` transformation that runs the pipeline on tf.data service workers.

    Args:
        service: str. The dispatcher's address, `host:port` or `grpc://host:port`.
        job_name: str or None. Trainers with the same name share one job (each batch goes to
            one of them); `None` gives this trainer a job of its own — with several trainers
            each would then see every batch. Defaults to None.
        max_outstanding_requests: int or None. Bounds the trainer's prefetch from the
            workers (memory). Defaults to tf.data's default.

    Returns:
        A function `Dataset -> Dataset` for `dataset.apply(...)`.

    Examples:
    >>> service = tf.data.experimental.service
    >>> dispatcher = service.DispatchServer(service.DispatcherConfig(port=0))
    >>> worker = service.WorkerServer(service.WorkerConfig(dispatcher.target.split("://")[1]))
    >>> ds = tf.data.Dataset.range(4).apply(
    ...     keras_bert_zoo.data.data_service.distribute(dispatcher.target, job_name="run-1"))
    >>> sorted(int(i) for i in ds.as_numpy_iterator())
    [0, 1, 2, 3]
    >>> worker.stop(); dispatcher.stop()
    """
    service = check_service_address(service)
    if job_name is not None and (not isinstance(job_name, str) or not job_name):
        raise ValueError(f"`job_name` must be a non-empty str or None. Received: job_name={job_name!r}.")
    if max_outstanding_requests is not None and (
            not isinstance(max_outstanding_requests, int) or max_outstanding_requests < 1):
        raise ValueError("`max_outstanding_requests` must be a positive int or None. "
                         f"Received: max_outstanding_requests={max_outstanding_requests!r}.")

    def apply(dataset):
        return dataset.apply(tf.data.experimental.service.distribute(
            processing_mode=tf.data.experimental.service.ShardingPolicy.DYNAMIC, service=service,
            job_name=job_name, max_outstanding_requests=max_outstanding_requests))

    return apply
