"""`Task`: a backbone plus a head, fed raw text, with the paper's fine-tuning recipe as `compile()`.

One `keras.Model` subclass, keras-hub's shape; its methods are thin where a function does the work: `task_inputs`
(raw inputs read and checked), `task_pipeline` (raw text through the preprocessor, `predict`'s answers back),
`presets.model_card` (the card's facts), `utils.summary` (`summary()`)."""

import functools
import logging

import keras

from keras_bert_zoo.layers import real_tokens
from keras_bert_zoo.models import task_inputs as inputs_lib, task_pipeline as pipeline_lib
from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.predict_precision import predicting_in
from keras_bert_zoo.presets import model_card as card_lib
from keras_bert_zoo.presets.class_presets import ClassPresets
from keras_bert_zoo.presets.task import keras_config, save_task_preset, task_from_keras_config, task_from_preset
from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
from keras_bert_zoo.training import finetuning_optimizer, replica_steps
from keras_bert_zoo.training.finetuning_optimizer import DEFAULT_LEARNING_RATE, DEFAULT_WARMUP_RATIO
from keras_bert_zoo.utils import quantization, summary as summary_lib
from keras_bert_zoo.utils.precision import as_float32, has_accelerator, widen_in_graph

logger = logging.getLogger("keras_bert_zoo.models")
# The key of a saved compile config that says whether the file holds the optimizer's variables.
OPTIMIZER_STATE = "optimizer_state"


class Task(keras.Model):
    """A backbone plus a task head that owns its loss, metrics, default `compile()` and presets.

    `fit`, `evaluate` and `predict` take raw text (strings, a tuple of columns or a list of pairs, or a batched
    `tf.data.Dataset` of `(x, y)`: `task_inputs.as_columns`) and run the attached `preprocessor` in a `tf.data`
    pipeline, batches padded to their longest row, not to `sequence_length`; packed ids (a dict with `token_ids`),
    or any input when `task.preprocessor = None`, go to Keras unchanged. In-memory inputs are checked before any
    graph (`checked_inputs`). A task is built compiled (by its constructor, `from_preset` or `from_config`), as
    keras-hub's are, with the paper's fine-tuning recipe (`compile()`), and settles how its encoder skips the
    padding (`settle_skip_padding`).

    Subclasses' `__init__` reads in keras-hub's order: set `backbone`, `preprocessor`, the head's layers and the
    task's arguments, build the functional model on `packed_inputs(backbone)`, and call
    `super().__init__(inputs=inputs, outputs=outputs, **kwargs)` last: `Task.__init__` gives the task the backbone's
    precision, settles the encoder's paths and compiles. They define `default_loss()`, `default_metrics()`,
    `head_variables()`, `postprocess()` (answering through `answers_as_numpy`) and `target_kind` (`task_inputs`).
    """

    backbone_cls = BertBackbone
    presets = ClassPresets()  # {name: {"metadata": ...}} of the registry, as keras-hub's `Task.presets`
    preprocessor_cls = BertPreprocessor
    default_sequence_length = 128
    preset_defaults = {}  # task arguments `from_preset` uses when neither caller nor preset sets them
    preprocessor = None
    target_kind = "classes"
    _run_schedule = None  # (peak learning rate, warm-up ratio) under compile(optimizer="auto")
    _without_optimizer = False  # set while `save(..., include_optimizer=False)` writes
    # How much padding the task lets its encoder skip (`TransformerEncoder.skip_padding`): "always" where neither its
    # outputs nor its loss read a padded position, "inference" where only its loss does, "never" where its outputs do.
    skippable_padding = "inference"

    def __init__(self, inputs, outputs, **kwargs):
        kwargs.pop("dtype", None)  # a functional model drops it: the task computes in its backbone's policy
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)
        # `compile()` reads the model's policy to add loss scaling under mixed_float16.
        self.dtype_policy = self.backbone.dtype_policy
        self.settle_skip_padding()  # before `compile`, which refuses XLA for a skipping encoder
        self.compile()

    def __setattr__(self, name, value):
        # On torch a layer is a `torch.nn.Module`, which takes no module attribute before its
        # `__init__`; subclasses set theirs before `super().__init__` (keras-hub's order), so until
        # then they are plain attributes (the functional graph tracks the layers), as in keras-hub's `Task`.
        if keras.backend.backend() == "torch" and "_modules" not in self.__dict__:
            return object.__setattr__(self, name, value)
        return super().__setattr__(name, value)

    def settle_skip_padding(self):
        """Chooses the backbone's `skip_padding` where it was left open (None): with CPUs only, on TensorFlow,
        where Keras compiles without XLA, as much as the task allows (`skippable_padding`: at inference, and
        in `fit` too for a task whose loss reads only [CLS], the classifier and multiple choice); "never" on
        a GPU or TPU (XLA) and on the other backends. A backbone built to skip more is refused."""
        allowed = self.skippable_padding
        on_cpu = keras.backend.backend() == "tensorflow" and not has_accelerator()
        chosen = self.backbone.choose_paths(allowed if on_cpu else "never", 128 if on_cpu else None)
        real_tokens.check_allowed(chosen, allowed, type(self).__name__)

    def default_loss(self):
        """The loss of `compile(loss="auto")`; None for a task that computes its own."""
        return None

    def default_metrics(self):
        return None

    def head_variables(self):
        """`{canonical name: variable}` of the head, in the checkpoints' names (see `weights/mapping.py`)."""
        return {}

    def declared_variables(self):
        """`{canonical name: variable}` of every weight: the backbone's and the head's."""
        return {**self.backbone.declared_variables(), **self.head_variables()}

    def postprocess(self, outputs):
        """Maps `predict`/serving outputs to the task's answers (dense tensors). Identity here."""
        return outputs

    @classmethod
    def config_from_checkpoint(cls, tensors):
        """Task arguments a checkpoint's head fixes (e.g. `num_classes`). None here."""
        return {}

    def compile(self, optimizer="auto", loss="auto", metrics="auto", learning_rate=DEFAULT_LEARNING_RATE,
                warmup_ratio=DEFAULT_WARMUP_RATIO, **kwargs):
        """Compiles with the paper's fine-tuning recipe, each default overridable alone (a task is built
        compiled with these defaults: `fit` works at once).

        Args:
            optimizer: `"auto"` (`FinetuningAdamW`: `BertAdamW`, weight decay 0.01, none on LayerNorm and biases,
                gradients clipped to global norm 1.0; `RunSchedule`: linear warm-up over the first `warmup_ratio`
                of the steps each `fit` call runs, then linear decay to 0 at its last step) or a Keras optimizer.
            loss: `"auto"` (the task's loss) or any Keras loss.
            metrics: `"auto"` (the task's metrics), a list, or None.
            learning_rate: float. Peak learning rate of `"auto"`. Defaults to 5e-5.
            warmup_ratio: float in [0, 1]. Warm-up share of each `fit` run for `"auto"`. Defaults to 0.1.
            **kwargs: other `keras.Model.compile` arguments (`jit_compile`, ...).
        """
        # What `.keras` files store to compile again on loading: the caller's arguments.
        self._compile_arguments = finetuning_optimizer.recipe_arguments(
            optimizer, loss, metrics, learning_rate, warmup_ratio, kwargs)
        self._run_schedule = None
        if isinstance(optimizer, str) and optimizer == "auto":  # a placeholder length: `fit` sets its run's
            optimizer = finetuning_optimizer.FinetuningAdamW(finetuning_optimizer.RunSchedule(learning_rate, 0, 1))
            self._run_schedule = (float(learning_rate), float(warmup_ratio))
        loss = self.default_loss() if isinstance(loss, str) and loss == "auto" else loss
        metrics = self.default_metrics() if isinstance(metrics, str) and metrics == "auto" else metrics
        kwargs = real_tokens.compile_arguments(getattr(self.backbone, "skip_padding", None), kwargs)
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_compile_config(self):
        arguments = getattr(self, "_compile_arguments", None)
        if not self.compiled or arguments is None:
            return None
        # Whether the file holds the optimizer's variables: `compile_from_config` builds the optimizer only
        # then, so that its variables match the saved ones.
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

    def save(self, filepath, overwrite=True, zipped=None, include_optimizer=True, **kwargs):
        """`keras.Model.save` (same arguments), plus `include_optimizer` (Keras 3 ignores it for `.keras` files).

        Which file for what: `save_to_preset(directory)` writes the weights once (BERT-Base: about 0.4 GB in
        float32), the vocabulary and the settings, what `from_preset` and the tools read: keep it to share,
        serve or fine-tune again. A `.keras` file also holds the optimizer's state (AdamW's two moments: about
        three times the weights) to resume training exactly where it stopped; `include_optimizer=False` leaves
        that out (the file loads compiled, with a fresh optimizer: logged when it loads).
        """
        optimizer = getattr(self, "optimizer", None)
        if include_optimizer or optimizer is None:
            return super().save(filepath, overwrite=overwrite, zipped=zipped, **kwargs)
        self.optimizer, self._without_optimizer = None, True  # the file's weights: the layers Keras walks to
        try:
            result = super().save(filepath, overwrite=overwrite, zipped=zipped, **kwargs)
        finally:
            self.optimizer, self._without_optimizer = optimizer, False
        logger.info("Saved %s to %s without the optimizer's variables (include_optimizer=False).",
                    type(self).__name__, filepath)
        return result

    def fit(self, x=None, y=None, batch_size=None, epochs=1, sample_weight=None, validation_data=None,
            validation_split=0.0, shuffle=True, initial_epoch=0, steps_per_epoch=None, length_buckets=None, **kwargs):
        """`keras.Model.fit` on raw text or packed ids (see the class); same arguments, plus:

        Args:
            length_buckets: int or None. For in-memory raw text with `shuffle=True`: batches of rows of similar
                length, windows of `length_buckets` batches sorted each epoch (`task_inputs.bucketed_dataset`).
                None (default): batches of random rows.
        """
        arguments, card = pipeline_lib.fit_arguments(self, self._prepare, x, y, batch_size, epochs, sample_weight,
                                                     validation_data, validation_split, shuffle, length_buckets, kwargs)
        if self._run_schedule is not None:  # the "auto" schedule over the steps this call runs
            steps = inputs_lib.run_steps(arguments["x"], arguments["batch_size"], epochs - initial_epoch,
                                         steps_per_epoch)
            finetuning_optimizer.start_run(self.optimizer, self._run_schedule, steps)
            self.train_function = None  # the schedule is traced into the train step: trace again
        fit = functools.partial(super().fit, epochs=epochs, initial_epoch=initial_epoch,
                                steps_per_epoch=steps_per_epoch, **arguments)
        history = replica_steps.run_fit(self, fit, arguments["x"])
        card(getattr(history, "history", None))
        return history

    def make_train_function(self, force=False):
        if not replica_steps.on_several_workers(self):
            return super().make_train_function(force)
        if self.train_function is None or force:  # Keras' own fails on several workers (replica_steps)
            self.train_function = replica_steps.batchwise(replica_steps.replica_step_function(self, self.train_step))
        return self.train_function

    def make_test_function(self, force=False):
        if not replica_steps.on_several_workers(self):
            return super().make_test_function(force)
        if self.test_function is None or force:
            self.test_function = replica_steps.batchwise(replica_steps.replica_step_function(self, self.test_step))
        return self.test_function

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """`keras.Model.evaluate` on raw text or packed ids; same arguments."""
        x, y, sample_weight = self.checked_inputs(x, y, sample_weight, "evaluate")
        prepared = self._prepare(x, y, sample_weight, batch_size)
        if prepared is not None:
            x, y, sample_weight, batch_size = prepared[0], None, None, None
        return super().evaluate(x=x, y=y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    def predict_step(self, data):
        return widen_in_graph(super().predict_step(data))  # float outputs leave the step as float32

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, precision=None):
        """`keras.Model.predict` on raw text (sorted by length, returned in input order) or ids.

        One example (a string, or a tuple of strings such as one pair) is a batch of one. `precision`: None (the
        model's own policy: no switch), `"auto"` (mixed_bfloat16 where bf16 is native) or a policy name, for this
        call only (`models/predict_precision.py`). Float outputs are float32 whatever the policy.
        """
        self.checked_inputs(x, call="predict")
        with predicting_in(self, precision):
            return as_float32(pipeline_lib.predict(self, super().predict, self._prepare, self._pipeline_cache, x,
                                                   batch_size, verbose, steps, callbacks))

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, sort=False, buckets=None):
        """`(dataset, order)` for raw text, or None to give `x` to Keras unchanged."""
        return pipeline_lib.prepare(self.preprocessor, self._pipeline_cache, x, y, sample_weight, batch_size,
                                    shuffle, sort, buckets)

    def _pipeline_cache(self):
        """`(prepare, count)` of `task_pipeline.pipeline_functions`, traced once per preprocessor and settings,
        not once per fit/evaluate/predict call: a setting changed since (`task.preprocessor.sequence_length =
        64`) traces them again, so that they pack, count and log with it."""
        key = pipeline_lib.settings_key(self.preprocessor)
        cached = getattr(self, "_pipeline_functions", None)
        if cached is None or cached[0] != key:
            self.check_sequence_length()
            cached = self._pipeline_functions = (key,) + pipeline_lib.pipeline_functions(self.preprocessor)
        return cached[1], cached[2]

    check_sequence_length = inputs_lib.check_sequence_length  # `task.check_sequence_length()`

    def checked_inputs(self, x, y=None, sample_weight=None, call="fit", names=("x", "y", "sample_weight")):
        """`(x, y, sample_weight)` checked before any graph, `y` mapped to ids where given as names
        (`task_inputs.checked_inputs`); `call` and `names` are what messages name."""
        arguments = getattr(self, "_compile_arguments", None)  # targets of the task's own loss are checked
        own_loss = isinstance(arguments, dict) and "loss" not in arguments
        return inputs_lib.checked_inputs(self, x, y, sample_weight, call, names, own_loss)

    checked_validation = inputs_lib.checked_validation  # `task.checked_validation(validation_data)`
    checked_targets = inputs_lib.checked_targets  # `task.checked_targets(y, columns, name="y")`

    @property
    def model_card(self):
        """dict: the facts the next `save_to_preset` writes into the preset's `README.md` (edit it
        to add your own, e.g. `task.model_card["intended_use"] = "..."`)."""
        if "_model_card" not in self.__dict__:
            object.__setattr__(self, "_model_card", {})  # not a tracked Keras attribute
        return self.__dict__["_model_card"]

    card_facts = card_lib.card_facts  # `task.card_facts()`: what `save_to_preset` writes in the card
    record_fit = inputs_lib.record_fit  # `task.record_fit(x, y, history, epochs, batch_size, validation=None)`

    def summary(self, line_length=None, positions=None, print_fn=None, expand_nested=False, show_trainable=False,
                layer_range=None):
        """Prints the task: its preprocessor, its backbone, then its layers and parameter counts.

        Without Keras' table arguments, the layers are one row each (name, class, output, parameters), in a
        table `line_length` wide (default 98); `positions`, `expand_nested`, `show_trainable` or `layer_range`
        print Keras' own table instead. `print_fn`: a callable taking one line, or None (`print`).
        """
        emit = print_fn or print
        for line in summary_lib.heading(self):
            emit(line)
        if positions is not None or expand_nested or show_trainable or layer_range is not None:
            return super().summary(line_length=line_length, positions=positions, print_fn=print_fn,
                                   expand_nested=expand_nested, show_trainable=show_trainable, layer_range=layer_range)
        for line in summary_lib.layer_table(self, line_length or 98):
            emit(line)

    def quantize(self, mode=None, config=None, **kwargs):
        """Quantises the task's `Dense` layers for inference (`task.quantize("int8")`): Keras' int8 weights, run by
        oneDNN's VNNI kernel on TensorFlow (`utils/quantization.py`); saves, reloads and exports quantised. Only
        the mode of Keras' derived `config` is used."""
        if kwargs:
            raise ValueError(f"`Task.quantize` takes only `mode`. Received: {sorted(kwargs)}.")
        quantization.quantize_task(self, mode if config is None else config.mode)

    def get_config(self):
        return keras_config(self)

    @classmethod
    def from_config(cls, config):
        return task_from_keras_config(cls, config)

    def task_config(self):
        """The task's own arguments (no backbone, preprocessor or Keras bookkeeping)."""
        skip = ("backbone", "preprocessor", "name", "trainable", "dtype", "quantization")
        return {k: v for k, v in self.get_config().items() if k not in skip}

    def save_to_preset(self, directory, vocabulary=None):
        """Writes the task as a preset: backbone and head weights, vocabulary, task and preprocessor settings.
        `type(task).from_preset(directory)` rebuilds it.

        Args:
            directory: str. Created or replaced, atomically (a failure keeps an existing preset intact).
            vocabulary: path to `vocab.txt`, a list of tokens, a tokenizer with `get_vocabulary()`, or None
                (default: the preprocessor's tokenizer's).

        Returns:
            The directory.
        """
        return save_task_preset(self, directory, vocabulary=vocabulary)

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, **kwargs):
        """Builds the task of a preset: backbone weights, vocabulary and casing, and the head.

        The head is the checkpoint's where it has one for this task (our saved task, Google's
        `output_weights`/`output_bias`, HF's `classifier.*`), otherwise freshly initialised (truncated
        normal, stddev 0.02, as the original).

        Args:
            preset: str. A registry name or alias, or a local directory / zip / checkpoint prefix in our,
                Google's or HF's layout.
            load_weights: bool. Defaults to True.
            sequence_length: int or None. The preprocessor's; None is the saved task's, else 128 (or the
                backbone's `max_sequence_length` if shorter).
            **kwargs: the task's arguments (`num_classes`, `labels`, `dropout`, ...); `dropout` also sets the
                backbone's. Arguments of the preprocessor's `from_preset` (`truncate`, `doc_stride`,
                `window_stride`, ...) set the preprocessor's, and default to the saved task's. Anything else
                overrides the backbone config (`dtype="mixed_bfloat16"`).
        """
        return task_from_preset(cls, preset, load_weights, sequence_length, kwargs)
