"""`TaskCompiling`: the `Task` methods of compiling and saving. A task comes compiled with the
paper's fine-tuning recipe (as keras-hub's tasks do), `compile(...)` overrides it, each `fit`
runs the recipe's schedule over its own steps, and `save(..., include_optimizer=False)` writes a
`.keras` file without the optimizer's state."""

import logging

import keras
import tensorflow as tf

from keras_bert_zoo.layers.real_tokens import skips_more
from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.training.finetuning_optimizer import FinetuningAdamW, RunSchedule

logger = logging.getLogger("keras_bert_zoo.models")

# The paper's grid is {5e-5, 4e-5, 3e-5, 2e-5} (§A.3). 5e-5 is its top, keras-hub's and
# HF Trainer's default, and the one that converges within the single short epoch that
# small models get on CPUs; pass `learning_rate=2e-5` for BERT-Large on small sets.
DEFAULT_LEARNING_RATE = 5e-5
DEFAULT_WARMUP_RATIO = 0.1  # run_classifier.py's warmup_proportion
# The key of a saved compile config that says whether the file holds the optimizer's variables.
OPTIMIZER_STATE = "optimizer_state"


class TaskCompiling:
    """Mixin of `Task` (before `keras.Model` in its bases)."""

    _run_schedule = None  # (peak learning rate, warm-up ratio) under compile(optimizer="auto")
    _without_optimizer = False  # set while `save(..., include_optimizer=False)` writes

    def compile(
        self,
        optimizer="auto",
        loss="auto",
        metrics="auto",
        learning_rate=DEFAULT_LEARNING_RATE,
        warmup_ratio=DEFAULT_WARMUP_RATIO,
        **kwargs,
    ):
        """Compiles with the paper's fine-tuning recipe, each default overridable alone.

        A task is built compiled with these defaults (its constructor and `from_preset` call
        `compile()`): `fit` works at once; call `compile(...)` to change any of them.

        Args:
            optimizer: `"auto"` (`FinetuningAdamW`: `BertAdamW` whose clipping sees the
                sum over replicas, with a warm-up/decay schedule over the
                steps each `fit` call runs) or any Keras optimizer.
            loss: `"auto"` (the task's loss) or any Keras loss.
            metrics: `"auto"` (the task's metrics), a list, or None.
            learning_rate: float. Peak learning rate of `"auto"`. Defaults to 5e-5.
            warmup_ratio: float in [0, 1]. Warm-up share of each `fit` run for
                `"auto"`. Defaults to 0.1.
            **kwargs: other `keras.Model.compile` arguments (`jit_compile`, ...).
        """
        if not learning_rate or learning_rate <= 0:
            raise ValueError(f"`learning_rate` must be positive. Received: learning_rate={learning_rate!r}.")
        if not 0.0 <= warmup_ratio <= 1.0:
            raise ValueError(f"`warmup_ratio` must be in [0, 1]. Received: warmup_ratio={warmup_ratio!r}.")
        # What `.keras` files store to compile again on loading: the caller's arguments.
        arguments = dict(optimizer=optimizer, **kwargs)
        defaults = dict(loss="auto", metrics="auto", learning_rate=DEFAULT_LEARNING_RATE,
                        warmup_ratio=DEFAULT_WARMUP_RATIO)
        for key, value in dict(loss=loss, metrics=metrics, learning_rate=learning_rate,
                               warmup_ratio=warmup_ratio).items():
            if not (isinstance(value, (str, float)) and value == defaults[key]):
                arguments[key] = value
        self._compile_arguments = keras.saving.serialize_keras_object(arguments)
        self._run_schedule = None
        if isinstance(optimizer, str) and optimizer == "auto":
            # A placeholder length: `fit` sets the schedule of its own run.
            optimizer = FinetuningAdamW(RunSchedule(learning_rate, 0, 1))
            self._run_schedule = (float(learning_rate), float(warmup_ratio))
        if isinstance(loss, str) and loss == "auto":
            loss = self.default_loss()
        if isinstance(metrics, str) and metrics == "auto":
            metrics = self.default_metrics()
        skipping = skips_more(getattr(self.backbone, "skip_padding", None), "never")
        if skipping and kwargs.get("jit_compile") is True:
            raise ValueError(
                "jit_compile=True cannot compile an encoder that skips the padding (each batch's token "
                f"count is a new shape, which XLA does not take). Received: jit_compile=True with the backbone's "
                f"skip_padding={self.backbone.skip_padding!r}. Build the task with skip_padding='never' "
                "(`from_preset(..., skip_padding='never')`), or leave jit_compile at 'auto'.")
        if skipping and kwargs.get("jit_compile", "auto") == "auto":
            kwargs["jit_compile"] = False  # what Keras picks on a CPU; the skipping path needs it elsewhere too
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_compile_config(self):
        arguments = getattr(self, "_compile_arguments", None)
        if not self.compiled or arguments is None:
            return None
        # Whether the file holds the optimizer's variables: `compile_from_config` builds the
        # optimizer only then, so that its variables match the saved ones.
        if not getattr(type(self).compile_from_config, "reads_optimizer_state", False):
            return arguments  # a subclass's own `compile_from_config` takes the arguments alone
        optimizer = getattr(self, "optimizer", None)
        built = optimizer is not None and optimizer.built and not self._without_optimizer
        return dict(arguments, **{OPTIMIZER_STATE: bool(built)})

    def compile_from_config(self, config):
        # Keras skips a custom `compile()` when loading; ours takes its own arguments back.
        config = dict(config)
        state = config.pop(OPTIMIZER_STATE, True)  # files written before the key held the state
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built and state:
            self.optimizer.build(self.trainable_variables)

    compile_from_config.reads_optimizer_state = True

    def _start_run(self, x, batch_size, epochs, steps_per_epoch):
        """Sets the `"auto"` schedule over the steps this `fit` call runs."""
        if isinstance(x, tf.data.Dataset):
            steps = inputs_lib.steps_of(x, steps_per_epoch)
        else:
            rows = inputs_lib.num_rows(x)
            steps = steps_per_epoch or -(-rows // (batch_size or inputs_lib.DEFAULT_BATCH_SIZE))
        total = max(int(steps) * max(int(epochs), 1), 1)
        peak, ratio = self._run_schedule
        start = int(keras.ops.convert_to_numpy(self.optimizer.iterations))
        # As run_classifier.py: int(num_train_steps * warmup_proportion).
        self.optimizer.learning_rate = RunSchedule(peak, int(total * ratio), total, start_step=start)
        self.train_function = None  # the schedule is traced into the train step: trace again

    def save(self, filepath, overwrite=True, zipped=None, include_optimizer=True, **kwargs):
        """`keras.Model.save`, plus `include_optimizer` (Keras 3 ignores it for `.keras` files).

        Which file for what: `save_to_preset(directory)` writes the weights once (BERT-Base:
        about 0.4 GB in float32), the vocabulary and the settings, and is what `from_preset`,
        `tools/export.py` and other tools read: keep it to share, serve or fine-tune again. A
        `.keras` file also holds the optimizer's state (AdamW's two moments: about three times
        the weights) to resume training exactly where it stopped; `include_optimizer=False`
        leaves that out: a Keras-native file of the weights and the compile arguments, which
        loads compiled with a fresh optimizer (logged when it loads).

        Args:
            filepath: str or path. A `.keras` file (or what `keras.Model.save` takes).
            overwrite: bool. Defaults to True.
            zipped: bool or None. As `keras.Model.save`.
            include_optimizer: bool. Save the optimizer's variables. Defaults to True.
            **kwargs: more `keras.Model.save` arguments.
        """
        optimizer = getattr(self, "optimizer", None)
        if include_optimizer or optimizer is None:
            return super().save(filepath, overwrite=overwrite, zipped=zipped, **kwargs)
        self.optimizer = None  # the file's weights are those of the layers Keras walks to
        self._without_optimizer = True
        try:
            result = super().save(filepath, overwrite=overwrite, zipped=zipped, **kwargs)
        finally:
            self.optimizer = optimizer
            self._without_optimizer = False
        logger.info("Saved %s to %s without the optimizer's variables (include_optimizer=False).",
                    type(self).__name__, filepath)
        return result
