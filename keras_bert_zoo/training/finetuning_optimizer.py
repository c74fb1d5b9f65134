"""The optimizer of `Task.compile(optimizer="auto")`: the paper's AdamW over one `fit` run.

`RunSchedule` is the original's warm-up/decay schedule over the steps one `fit` call
runs. `FinetuningAdamW` is `BertAdamW` whose gradient clipping sees the gradient one
device would see: Keras clips each replica's share before summing across replicas,
which under `MirroredStrategy` changes the update whenever the global norm exceeds
the clip (and fails outright when the embeddings' sparse gradients of different sizes
meet in the clip), so `fit` would not equal one device.
"""

import logging

import keras
import tensorflow as tf

from keras_bert_zoo.training.optimizer import BertAdamW, LinearWarmupLinearDecay

logger = logging.getLogger("keras_bert_zoo.training")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class RunSchedule(LinearWarmupLinearDecay):
    """`LinearWarmupLinearDecay` over one `fit` run that starts at optimizer step `start_step`.

    `Task.fit` sets it for `compile(optimizer="auto")`: warm-up over the first
    `warmup_steps` of the run, then linear decay to 0 at its last step.
    """

    def __init__(self, peak_learning_rate, warmup_steps, total_steps, end_learning_rate=0.0, start_step=0):
        super().__init__(peak_learning_rate, warmup_steps, total_steps, end_learning_rate)
        self.start_step = int(start_step)

    def __call__(self, step):
        return super().__call__(keras.ops.cast(step, "float32") - float(self.start_step))

    def get_config(self):
        return dict(super().get_config(), start_step=self.start_step)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class FinetuningAdamW(BertAdamW):
    """`BertAdamW` (same arguments) clipping the sum of the replicas' gradients by its global norm.

    The gradients are made dense (so the norm is the gradient's, also for embedding
    rows seen twice in a batch), summed across replicas once to measure the global
    norm, and scaled by `min(1, global_clipnorm / norm)` before Keras sums and applies
    them: the update of one device, at the cost of one more all-reduce per step.
    (Keras' own clipping is off: it would clip each replica's share.)
    """

    def __init__(self, *args, global_clipnorm=1.0, **kwargs):
        super().__init__(*args, global_clipnorm=None, **kwargs)
        self.clip_global_norm = global_clipnorm

    def _clip(self, grads):
        # Dense: the norm of an embedding's sparse gradient would count a token seen
        # twice in the batch as two rows; the update densifies it anyway.
        grads = [None if g is None else tf.convert_to_tensor(g) for g in grads]
        present = [g for g in grads if g is not None]
        context = tf.distribute.get_replica_context()
        if context is not None and context.num_replicas_in_sync > 1:
            present = context.all_reduce("sum", present)
        norm = tf.linalg.global_norm(present)
        # As tf.clip_by_global_norm: scale = clip * min(1 / norm, 1 / clip).
        scale = self.clip_global_norm * tf.minimum(1.0 / norm, 1.0 / self.clip_global_norm)
        return [None if g is None else g * tf.cast(scale, g.dtype) for g in grads]

    def apply(self, grads, trainable_variables=None):
        if self.clip_global_norm:
            grads = self._clip(list(grads))
        return super().apply(grads, trainable_variables)

    def load_own_variables(self, store):
        """Keras' loading; a file saved without optimizer state (`Task.save(...,
        include_optimizer=False)`) leaves this optimizer fresh, and says so, where Keras would
        warn of a mismatch between its unbuilt variables and none."""
        if not list(store.keys()) and not self.built:
            logger.info("The file holds no optimizer state: %s starts fresh (step 0).", type(self).__name__)
            return
        super().load_own_variables(store)

    def get_config(self):
        return dict(super().get_config(), global_clipnorm=self.clip_global_norm)
