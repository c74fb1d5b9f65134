"""`fit_resumable`: `model.fit` for a fixed number of steps that resumes step-exactly.

Restarting the same command after a crash continues from the newest complete
checkpoint with the same weights, optimizer slots, loss scale, dropout seeds and data
position as if it had never stopped (bit for bit on CPU with op determinism).
"""

import keras
import tensorflow as tf

from keras_bert_zoo.training.callbacks import BuildAwareProgbar, NonFiniteGuard, ScalarLogger, StepCheckpointer
from keras_bert_zoo.training.checkpoints import TrainingCheckpoint
from keras_bert_zoo.training.distribute import is_chief
from keras_bert_zoo.training.held_out import HeldOutEvaluation
from keras_bert_zoo.training.replica_input import resumable_input
from keras_bert_zoo.utils import keras_internals


def _placeholder_batch(element_spec):
    """Zeros with the structure of one `(x, y)` batch; fit never trains on them."""
    def zeros(spec):
        shape = [1 if d is None else d for d in spec.shape]
        return tf.zeros(shape, spec.dtype)

    return tf.nest.map_structure(zeros, (element_spec[0], element_spec[1]))


def fit_resumable(
    model,
    dataset_fn,
    global_batch_size,
    total_steps,
    checkpoint_dir,
    save_every=100,
    max_to_keep=3,
    callbacks=(),
    verbose="auto",
    fallback=True,
    on_batch=None,
    save_input=True,
):
    """Trains `model` with `model.fit` to `total_steps`, resuming from `checkpoint_dir`.

    The model must be compiled inside `model.distribute_strategy`'s scope. Its
    dataset must use stateless random ops only (so its iterator can be saved).

    Args:
        model: compiled `keras.Model` (e.g. `BertPretrainer`).
        dataset_fn: callable `(index, count, per_replica_batch_size) ->
            tf.data.Dataset` of `(x, y)` (or `(x, y, example_ids)`) batches, the
            `index`-th of `count` disjoint streams: one per replica under
            `MirroredStrategy` (`distribute_datasets_from_function`), one per worker
            under `MultiWorkerMirroredStrategy`/TPU (see `replica_input`); repeat it
            so it lasts `total_steps`.
        global_batch_size: int. Summed over replicas.
        total_steps: int. Steps of the whole run, including ones done before a restart.
        checkpoint_dir: str. Checkpoints are written and resumed from here.
        save_every: int. Checkpoint every N steps. Defaults to 100.
        max_to_keep: int. Defaults to 3.
        callbacks: more Keras callbacks (TensorBoard, `HeldOutEvaluation`, ...).
        verbose: passed to `fit` (progress bar: `BuildAwareProgbar`, whose ETA leaves out the
            graph build).
        fallback: bool. Restore the previous checkpoint when the newest is damaged.
        on_batch: callable `(step, example_ids)` or None, see `StepCheckpointer`.
        save_input: bool. Checkpoint the data position too (exact resume). False for input
            whose iterator cannot be saved (tf.data service): a resumed run restores the
            model, optimizer and step, and its input starts afresh. Defaults to True.

    Returns:
        dict: `step` (final global step), `resumed_from` (0 on a fresh run) and
        `history` (the `fit` History, or None if there was nothing left to do).

    Raises:
        NonFiniteError: a NaN/inf loss or weight; names the step.
        CheckpointCorruptError: damaged newest checkpoint with `fallback=False`.
    """
    if not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"`total_steps` must be a positive integer. Received: total_steps={total_steps!r}.")
    strategy = model.distribute_strategy
    data = resumable_input(strategy, dataset_fn, global_batch_size)
    checkpoint = TrainingCheckpoint(
        checkpoint_dir, model, iterator=data.trackables if save_input else None, max_to_keep=max_to_keep,
        fallback=fallback, is_chief=is_chief(strategy), worker=(data.worker_index, data.num_workers),
    )
    start = checkpoint.restore()
    if start >= total_steps:
        return {"step": start, "resumed_from": start, "history": None, "checkpoint": checkpoint}
    placeholder = _placeholder_batch(data.element_spec)
    # Build compile metrics from plain tensors here. Keras 3.15's fit would build them
    # from a batch reduced across replicas, which fails for dict batches under
    # MultiWorkerMirroredStrategy; so fit's own symbolic build is skipped below.
    with strategy.scope():
        keras_internals.symbolic_build(model, placeholder)
    keras_internals.skip_fit_metric_build(model)
    for callback in callbacks:
        if isinstance(callback, (HeldOutEvaluation, ScalarLogger)) and callback.step is None:
            callback.step = checkpoint.step  # report the global step, across restarts
    checkpointer = StepCheckpointer(checkpoint, data.iterator, save_every, on_batch=on_batch)
    guard = NonFiniteGuard(checkpoint.step)
    # The graph build is the first step: the bar says so and keeps it out of the ETA (unless the
    # caller passed a bar of its own, which Keras then uses).
    progress = [] if any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks) else [BuildAwareProgbar()]
    try:
        history = model.fit(
            tf.data.Dataset.from_tensors(placeholder).repeat(),
            steps_per_epoch=total_steps - start,
            epochs=1,
            shuffle=False,
            callbacks=[guard, checkpointer, *callbacks, *progress],
            verbose=verbose,
        )
    finally:
        checkpointer.restore_train_function()
        keras_internals.restore_fit_metric_build(model)
    return {"step": int(checkpoint.step.numpy()), "resumed_from": start, "history": history,
            "checkpoint": checkpoint}
