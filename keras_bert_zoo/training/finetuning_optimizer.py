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

# The recipe's defaults (`Task.compile`'s). The paper's grid is {5e-5, 4e-5, 3e-5, 2e-5} (§A.3).
# 5e-5 is its top, keras-hub's and HF Trainer's default, and the one that converges within the
# single short epoch that small models get on CPUs; pass `learning_rate=2e-5` for BERT-Large on
# small sets.
DEFAULT_LEARNING_RATE = 5e-5
DEFAULT_WARMUP_RATIO = 0.1  # run_classifier.py's warmup_proportion


def recipe_arguments(optimizer, loss, metrics, learning_rate, warmup_ratio, kwargs):
    """`Task.compile`'s arguments, checked, as a `.keras` file stores them to compile again on
    loading: the caller's, without the recipe's defaults (serialized)."""
    if not learning_rate or learning_rate <= 0:
        raise ValueError(f"`learning_rate` must be positive. Received: learning_rate={learning_rate!r}.")
    if not 0.0 <= warmup_ratio <= 1.0:
        raise ValueError(f"`warmup_ratio` must be in [0, 1]. Received: warmup_ratio={warmup_ratio!r}.")
    arguments = dict(optimizer=optimizer, **kwargs)
    defaults = dict(loss="auto", metrics="auto", learning_rate=DEFAULT_LEARNING_RATE, warmup_ratio=DEFAULT_WARMUP_RATIO)
    for key, value in dict(loss=loss, metrics=metrics, learning_rate=learning_rate, warmup_ratio=warmup_ratio).items():
        if not (isinstance(value, (str, float)) and value == defaults[key]):
            arguments[key] = value
    return keras.saving.serialize_keras_object(arguments)


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


def start_run(optimizer, run_schedule, total_steps):
    """Sets `optimizer`'s learning rate to the `"auto"` schedule (`run_schedule`: peak learning
    rate and warm-up ratio) over the `total_steps` one `fit` call runs, from its current step."""
    peak, ratio = run_schedule
    start = int(keras.ops.convert_to_numpy(optimizer.iterations))
    # As run_classifier.py: int(num_train_steps * warmup_proportion).
    optimizer.learning_rate = RunSchedule(peak, int(total_steps * ratio), total_steps, start_step=start)


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
