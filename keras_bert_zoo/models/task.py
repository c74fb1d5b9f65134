"""`Task`: a backbone plus a head, fed raw text, with the paper's fine-tuning recipe as `compile()`."""

import functools

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.layers.real_tokens import skips_more
from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.models import task_predict
from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.predict_precision import predicting_in
from keras_bert_zoo.presets.class_presets import ClassPresets
from keras_bert_zoo.presets.task import (
    keras_config, save_task_preset, task_from_keras_config, task_from_preset)
from keras_bert_zoo.models.task_card import TaskCard
from keras_bert_zoo.models.task_compiling import DEFAULT_LEARNING_RATE, DEFAULT_WARMUP_RATIO, TaskCompiling
from keras_bert_zoo.models.task_input_checks import TaskInputChecks
from keras_bert_zoo.models.task_raw_text import RawTextInputs
from keras_bert_zoo.models.task_summary import TaskSummary
from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
from keras_bert_zoo.training.callbacks import BuildAwareProgbar
from keras_bert_zoo.training.replica_steps import batchwise, fit_on_workers, placeholder_batch, replica_step_function
from keras_bert_zoo.utils import keras_internals, quantization
from keras_bert_zoo.utils.precision import has_accelerator, model_precision_line


class Task(TaskCompiling, TaskSummary, RawTextInputs, TaskInputChecks, TaskCard, keras.Model):
    """A backbone plus a task head that owns its loss, metrics, default `compile()` and presets.

    `fit`, `evaluate` and `predict` take raw text: a list or NumPy array of strings,
    a tuple of columns `(texts_a, texts_b)` (or a list of pairs), or a batched
    `tf.data.Dataset` of `(x, y)`; they run the attached `preprocessor` in a
    `tf.data` pipeline, with batches padded to their longest row, not to
    `sequence_length`. `predict` sorts in-memory rows by length and returns outputs in
    the input order. Packed ids (a dict with `token_ids`), or any input when
    `task.preprocessor = None`, go to Keras unchanged. In-memory inputs are checked before any
    graph (`TaskInputChecks`): label names are mapped through `labels`, and texts that are not
    strings, empty inputs, rows that disagree and labels the task does not know are refused in
    one line naming the argument, the row and the fix. `from_preset` on a CPU builds the
    encoder to skip the padding in its dense layers (`BertBackbone(skip_padding=...)`) as far as
    the task allows (`skippable_padding`): at inference, and in `fit` too for a task whose loss
    reads only [CLS] (the classifier and multiple choice).

    A task is built compiled (by its constructor, `from_preset` or `from_config`), as
    keras-hub's are: `compile()`'s defaults are the paper's fine-tuning recipe, `BertAdamW`
    (decoupled weight decay 0.01, none on LayerNorm and biases, gradients clipped to
    global norm 1.0), peak learning rate 5e-5 warmed up linearly over the first 10% of
    the steps each `fit` call runs (epochs × steps per epoch, counted by `fit`) and
    decayed linearly to 0 at its last step; the task's own loss and metrics.
    `compile(...)` overrides any of them. `summary()` names the preprocessor and the
    backbone; `save(path, include_optimizer=False)` writes a `.keras` file without the
    optimizer's state (`save_to_preset` is the smaller, shareable format).

    Subclasses' `__init__` reads in keras-hub's order: set `backbone`, `preprocessor`, the head's
    layers and the task's arguments, build the functional model on `packed_inputs(backbone)`, and
    call `super().__init__(inputs=inputs, outputs=outputs, **kwargs)` last: `Task.__init__` gives the
    task the backbone's precision, settles the encoder's paths and compiles. They define
    `default_loss()`, `default_metrics()`, `head_variables()` and `postprocess()` (which answers
    through `answers_as_numpy`).
    """

    backbone_cls = BertBackbone
    presets = ClassPresets()  # {name: {"metadata": ...}} of the registry, as keras-hub's `Task.presets`
    preprocessor_cls = BertPreprocessor
    default_sequence_length = 128
    preset_defaults = {}  # task arguments `from_preset` uses when neither caller nor preset sets them
    preprocessor = None

    # How much padding the task lets its encoder skip (`TransformerEncoder.skip_padding`): "always"
    # where neither its outputs nor its loss read a padded position, "inference" where only its loss
    # does, "never" where its outputs do.
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
        """Chooses the backbone's `skip_padding` where it was left open (None): with CPUs only, on
        TensorFlow, where Keras compiles without XLA, as much as the task allows
        (`skippable_padding`); "never" on a GPU or TPU (XLA) and on the other backends. A backbone
        built to skip more than the task allows is refused."""
        allowed = self.skippable_padding
        on_cpu = keras.backend.backend() == "tensorflow" and not has_accelerator()
        chosen = self.backbone.choose_paths(allowed if on_cpu else "never", 128 if on_cpu else None)
        if skips_more(chosen, allowed):
            raise ValueError(
                f"{type(self).__name__} reads its encoder's outputs at padded positions (allows skip_padding="
                f"{allowed!r}), but the backbone was built with skip_padding={chosen!r}. Build the backbone with "
                f"skip_padding={allowed!r} or None (the task then picks).")

    # === What a task defines ===
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

    def fit(self, x=None, y=None, batch_size=None, epochs=1, sample_weight=None, validation_data=None,
            validation_split=0.0, shuffle=True, initial_epoch=0, steps_per_epoch=None, length_buckets=None,
            **kwargs):
        """`keras.Model.fit` on raw text or packed ids (see the class); same arguments, plus:

        Args:
            length_buckets: int or None. For in-memory raw text with `shuffle=True`: each
                epoch, shuffle, sort windows of `length_buckets` batches by length, and
                shuffle those batches, so that a batch is padded to about its rows' length
                (`task_inputs.bucketed_dataset`). None (default): batches of random rows.
        """
        if not self.compiled:  # a task is built compiled; Keras' own check comes after `_build_state`
            raise ValueError(
                f"Call `compile()` before `fit()`: this {type(self).__name__} is not compiled. "
                "`task.compile()` with no arguments gives the paper's fine-tuning recipe (BertAdamW, "
                f"peak learning rate {DEFAULT_LEARNING_RATE:g}, {DEFAULT_WARMUP_RATIO:.0%} warm-up then linear decay).")
        x, y, sample_weight = self.checked_inputs(x, y, sample_weight, "fit")
        if validation_data is not None:
            validation_data = self.checked_validation(validation_data)
        card = functools.partial(self.record_fit, x, y, epochs=epochs, batch_size=batch_size,
                                 validation=validation_data[1] if isinstance(validation_data, tuple) and len(validation_data) > 1
                                 else None)
        raw = not isinstance(x, tf.data.Dataset) and not inputs_lib.is_packed(x) and self.preprocessor is not None
        if validation_split and raw:
            x, y, sample_weight, validation_data = inputs_lib.split_off(x, y, sample_weight, validation_split)
            validation_split = 0.0
        validation_batch_size = kwargs.get("validation_batch_size")
        if validation_data is not None:
            prepared = self._prepare_validation(validation_data, validation_batch_size, batch_size)
            if prepared is not None:
                validation_data = prepared
                kwargs.pop("validation_batch_size", None)  # batched in the pipeline
        if length_buckets is not None and not (raw and shuffle):
            raise ValueError(
                "`length_buckets` applies to shuffled in-memory raw text only. Received: "
                f"length_buckets={length_buckets!r} with shuffle={shuffle!r} and x of type {type(x).__name__}. "
                "Drop `length_buckets`, or pass raw strings with shuffle=True."
            )
        prepared = self._prepare(x, y, sample_weight, batch_size, shuffle, buckets=length_buckets)
        if prepared is not None:
            x, y, sample_weight, batch_size = prepared[0], None, None, None
        if self._run_schedule is not None:
            self._start_run(x, batch_size, epochs - initial_epoch, steps_per_epoch)
        if prepared is not None:
            shuffle = False  # done in the pipeline (Keras warns that it ignores it on datasets)
        kwargs["callbacks"] = self._fit_callbacks(kwargs.pop("callbacks", None), kwargs.get("verbose", "auto"))
        fit = functools.partial(super().fit, x=x, y=y, batch_size=batch_size, epochs=epochs,
                                sample_weight=sample_weight, validation_data=validation_data,
                                validation_split=validation_split, shuffle=shuffle, initial_epoch=initial_epoch,
                                steps_per_epoch=steps_per_epoch, **kwargs)
        if isinstance(x, tf.data.Dataset) and self._on_several_workers():
            history = fit_on_workers(self, fit, x)
        else:
            self._build_state(x)
            history = fit()
        card(getattr(history, "history", None))
        return history

    def _fit_callbacks(self, callbacks, verbose):
        """`fit`'s callbacks: with a progress bar (verbose) and none of the caller's, ours, which says
        the graph build apart (kept out of the ETA) after a line naming the precision it trains in."""
        callbacks = list(callbacks or [])
        if verbose != 0 and not any(isinstance(c, keras.callbacks.ProgbarLogger) for c in callbacks):
            callbacks.append(BuildAwareProgbar(announce=model_precision_line(self.backbone.dtype_policy.name)))
        return callbacks

    def _build_state(self, dataset):
        """Creates the optimizer's and compiled metrics' variables before the first step.

        Without a distribution strategy, Keras 3.15 (TensorFlow) creates them while tracing
        the first step, and TensorFlow then traces the step a second time without variable
        creation: twice the graph building of every `fit`. Built here from zeros of one batch's structure,
        the step is traced once."""
        if (not isinstance(dataset, tf.data.Dataset) or keras.backend.backend() != "tensorflow"
                or not isinstance(dataset.element_spec, tuple) or len(dataset.element_spec) < 2):
            return
        with self.distribute_strategy.scope():
            keras_internals.symbolic_build(self, placeholder_batch(dataset))

    def _on_several_workers(self):
        strategy = getattr(self, "distribute_strategy", None)  # TensorFlow backend only
        return strategy is not None and keras_internals.in_multi_worker_mode(strategy)

    def make_train_function(self, force=False):
        if not self._on_several_workers():
            return super().make_train_function(force)
        if self.train_function is None or force:  # Keras' own fails on several workers (replica_steps)
            self.train_function = batchwise(replica_step_function(self, self.train_step))
        return self.train_function

    def make_test_function(self, force=False):
        if not self._on_several_workers():
            return super().make_test_function(force)
        if self.test_function is None or force:
            self.test_function = batchwise(replica_step_function(self, self.test_step))
        return self.test_function

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        """`keras.Model.evaluate` on raw text or packed ids; same arguments."""
        x, y, sample_weight = self.checked_inputs(x, y, sample_weight, "evaluate")
        prepared = self._prepare(x, y, sample_weight, batch_size)
        if prepared is not None:
            x, y, sample_weight, batch_size = prepared[0], None, None, None
        return super().evaluate(x=x, y=y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    # === Predict: on raw text (length-sorted batches, answers in input order) or packed ids, in the
    # model's or a per-call precision ===
    def predict_step(self, data):
        # Float outputs leave the step as float32: a MultiWorkerMirroredStrategy gathers them with
        # collective ops that take no bfloat16 (a bf16 model's predict failed there), and users get
        # float32 from `predict` whatever the policy.
        return task_predict.widen_in_graph(super().predict_step(data))

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None, precision=None):
        """`keras.Model.predict` on raw text (sorted by length, returned in input order) or ids.

        One example (a string, or a tuple of strings such as one pair) is a batch of one.

        `precision`: None (the model's own policy, float32 unless the user asked otherwise: no
        switch), `"auto"` (`utils.precision.auto_precision()`: mixed_bfloat16 where bf16 is
        native) or a policy name, for this call only; the
        model's policy is untouched for training (`models/predict_precision.py`). Float
        outputs are float32 whatever the policy.
        """
        self.checked_inputs(x, call="predict")
        with predicting_in(self, precision):
            return task_predict.as_float32(self._predict(x, batch_size, verbose, steps, callbacks))

    def _predict(self, x, batch_size, verbose, steps, callbacks):
        if (self.preprocessor is not None and steps is None and not callbacks and not isinstance(x, tf.data.Dataset)
                and not inputs_lib.is_packed(x) and x is not None):
            columns = inputs_lib.as_columns(x)
            if inputs_lib.num_rows(columns) and all(c.dtype.kind in "USO" for c in keras.tree.flatten(columns)):
                prepare, count = self._pipeline_cache()
                return task_predict.predict_sorted(self, columns, prepare, count, batch_size, verbose)
        prepared = self._prepare(x, batch_size=batch_size, sort=True)
        if prepared is None:
            return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)
        dataset, order = prepared
        outputs = super().predict(dataset, verbose=verbose, steps=steps, callbacks=callbacks)
        if order is None:
            order = np.arange(len(keras.tree.flatten(outputs)[0]))
        return task_predict.restore_order(outputs, order)

    # === Quantisation ===
    def quantize(self, mode=None, config=None, **kwargs):
        """Quantises the task's `Dense` layers for inference: `task.quantize("int8")`.

        Keras' int8 weights, run by oneDNN's VNNI kernel on TensorFlow (`utils/quantization.py`);
        saves, reloads and exports quantised. Only the mode of Keras' derived `config` is used.
        """
        if kwargs:
            raise ValueError(f"`Task.quantize` takes only `mode`. Received: {sorted(kwargs)}.")
        quantization.quantize_task(self, mode if config is None else config.mode)

    # === Config and presets ===
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
        """Writes the task as a preset: backbone and head weights, vocabulary, task and
        preprocessor settings. `type(task).from_preset(directory)` rebuilds it.

        Args:
            directory: str. Created or replaced, atomically (a failure keeps an existing
                preset intact).
            vocabulary: path to `vocab.txt`, a list of tokens, a tokenizer with
                `get_vocabulary()`, or None (default: the preprocessor's tokenizer's).

        Returns:
            The directory.
        """
        return save_task_preset(self, directory, vocabulary=vocabulary)

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, **kwargs):
        """Builds the task of a preset: backbone weights, vocabulary and casing, and the head.

        The head is the checkpoint's where it has one for this task (our saved task,
        Google's `output_weights`/`output_bias`, HF's `classifier.*`), otherwise
        freshly initialised (truncated normal, stddev 0.02, as the original).

        Args:
            preset: str. A registry name or alias, or a local directory / zip /
                checkpoint prefix in our, Google's or HF's layout.
            load_weights: bool. Defaults to True.
            sequence_length: int or None. The preprocessor's; None is the saved
                task's, else 128 (or the backbone's `max_sequence_length` if shorter).
            **kwargs: the task's arguments (`num_classes`, `labels`, `dropout`, ...);
                `dropout` also sets the backbone's. Arguments of the preprocessor's
                `from_preset` (`truncate`, `doc_stride`, `window_stride`, ...) set the
                preprocessor's, and default to the saved task's. Anything else
                overrides the backbone config (`dtype="mixed_bfloat16"`).
        """
        return task_from_preset(cls, preset, load_weights, sequence_length, kwargs)
