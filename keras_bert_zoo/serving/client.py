"""Answering JSON requests with an exported SavedModel or a preset, in TF Serving's REST shapes.

`tools/predict.py` is argparse over this module. A request is what TF Serving's REST
predict API takes, answered as it answers:

- row format: `{"instances": [{"text": "..."}, ...]}` -> `{"predictions": [{"label": ...,
  "label_id": ..., "probabilities": [...]}, ...]}`; with a single input, an instance may be
  the bare value (`{"instances": ["a film", ...]}`);
- columnar format: `{"inputs": {"text": [...]}}` -> `{"outputs": {"label": [...], ...}}`.

Strings come back as text (invalid UTF-8 bytes replaced), tensors as nested lists. Rows
are run in batches of similar length (sorted by characters) and returned in their order.
"""

import os

import keras
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops an exported graph uses)

from keras_bert_zoo.presets.preset import open as open_preset
from keras_bert_zoo.serving import specs
from keras_bert_zoo.serving.export import serving_functions
from keras_bert_zoo.utils import keras_internals, precision

DEFAULT_BATCH_SIZE = 32


def task_class(name):
    """The exportable task class registered with Keras as `keras_bert_zoo>{name}`; ValueError
    for a class that is not registered or has no serving spec."""
    task_cls = keras.saving.get_registered_object(f"keras_bert_zoo>{name}")
    if task_cls is None or not any(c in specs.SERVING_SPECS for c in getattr(task_cls, "__mro__", ())):
        exportable = sorted(c.__name__ for c in specs.SERVING_SPECS)
        raise ValueError(f"The preset holds a {name!r} task; exportable here: {exportable}.")
    return task_cls


def load_task(model, text_inputs=None, dtype=None):
    """A fine-tuned task from a preset directory (saved by `save_to_preset`) or a `.keras` file.

    `dtype`: None (the model's default, `utils.precision.default_policy()`: float32 unless
    Keras' global policy says otherwise), `"auto"` (bf16 where the CPU has it) or a policy
    name. A `.keras` file saved with an explicit policy keeps it: a `dtype` asking for
    another is refused (a setting takes effect or is refused), naming both.
    """
    if str(model).endswith(".keras"):
        return _load_keras_file(model, dtype)
    preset = open_preset(model)  # once: its saved task, then the task built from it
    task = preset.task_config.get("task")
    if not task:
        raise ValueError(
            f"`model` must be a task preset (written by task.save_to_preset) or a .keras file. "
            f"Received: {model!r}, which holds no task. Fine-tune and save the task first."
        )
    return task_class(task["class_name"]).from_preset(preset, dtype=dtype)


def _load_keras_file(path, dtype):
    """`keras.saving.load_model`; a policy saved as "pick on loading" (None) takes `dtype`,
    through Keras' global policy (what `default_policy()` follows) for the load only."""
    if dtype is None:
        return keras.saving.load_model(path, safe_mode=True)
    wanted = precision.resolve_precision(dtype)
    before = keras.config.dtype_policy()
    keras.config.set_dtype_policy(wanted)
    try:
        task = keras.saving.load_model(path, safe_mode=True)
    finally:
        keras.config.set_dtype_policy(before)
    got = task.backbone.dtype_policy.name
    if got != wanted:
        raise ValueError(
            f"{path} was saved computing in {got!r}, which a .keras file keeps; the requested "
            f"dtype/--precision {dtype!r} ({wanted}) cannot take effect. Leave --precision out to use {got!r}, "
            "or load it in Python, rebuild the task with the dtype you want and save it again."
        )
    return task


def serving_function(model, text_inputs=None):
    """The `serving_default` function of a SavedModel directory, a preset or a `.keras` file.

    For a preset or `.keras` file it is the function `export` would save, run in
    process (no SavedModel written).
    """
    if os.path.isfile(os.path.join(str(model), "saved_model.pb")):
        loaded = tf.saved_model.load(str(model))
        return keras_internals.keep_alive(loaded.signatures["serving_default"], loaded)
    task = load_task(model)
    spec = specs.serving_spec(task, text_inputs)
    return serving_functions(task, spec, ("text",))["serving_default"][0]


def input_specs(function):
    """The named inputs of a serving function: `{name: tf.TensorSpec}`, sorted by name."""
    args, kwargs = function.structured_input_signature
    specs = kwargs if kwargs else {spec.name: spec for spec in args}
    return dict(sorted(specs.items()))


def input_names(function):
    """The named inputs of a serving function, sorted."""
    return list(input_specs(function))


def row_problem(row, specs):
    """What is wrong with one instance for inputs `specs` (`input_specs`), or None: it must be
    an object with exactly those inputs, each a string (a list of as many strings as the
    input's second axis for a 2-D input, e.g. a multiple-choice task's `endings`)."""
    names = list(specs)
    if not isinstance(row, dict) or sorted(row) != names:
        return f"must be an object with exactly the inputs {names}. Received: {row!r:.200}."
    for name, spec in specs.items():
        value, shape = row[name], spec.shape.as_list() if spec.shape.rank is not None else [None]
        if len(shape) <= 1 and not isinstance(value, str):
            return f"`{name}` must be a string. Received: {value!r:.200}."
        if len(shape) == 2 and not (isinstance(value, list) and all(isinstance(v, str) for v in value)
                                    and (shape[1] is None or len(value) == shape[1])):
            count = "" if shape[1] is None else f"{shape[1]} "
            return f"`{name}` must be a list of {count}strings. Received: {value!r:.200}."
    return None


def _plain(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _length(row):
    return sum(len(v) if isinstance(v, (str, bytes)) else len(str(v)) for v in row.values())


def predict_rows(function, rows, batch_size=DEFAULT_BATCH_SIZE, progress=None):
    """Runs `rows` (dicts of named inputs) in batches of similar length; returns one dict
    of outputs per row, in the rows' order. `progress(n)` is called after each batch."""
    specs = input_specs(function)
    names = list(specs)
    for index, row in enumerate(rows):
        problem = row_problem(row, specs)
        if problem:
            raise ValueError(f"Instance {index} {problem}")
    order = np.argsort([_length(row) for row in rows], kind="stable")
    results = [None] * len(rows)
    for begin in range(0, len(rows), batch_size):
        batch = order[begin : begin + batch_size]
        inputs = {name: tf.constant([rows[i][name] for i in batch], tf.string) for name in names}
        outputs = {key: value.numpy().tolist() for key, value in function(**inputs).items()}
        for position, i in enumerate(batch):
            results[i] = {key: _plain(values[position]) for key, values in sorted(outputs.items())}
        if progress is not None:
            progress(len(batch))
    return results


def answer_request(function, request, batch_size=DEFAULT_BATCH_SIZE, progress=None):
    """A TF Serving REST predict request (row or columnar format) -> its response."""
    names = input_names(function)
    if not isinstance(request, dict) or len(request) != 1 or not set(request) & {"instances", "inputs"}:
        raise ValueError(
            'A request must be {"instances": [...]} (row format) or {"inputs": {...}} (columnar), '
            f"as TF Serving's REST API. Received: {request!r:.200}."
        )
    if "instances" in request:
        rows = request["instances"]
        if not isinstance(rows, list):
            raise ValueError(f"`instances` must be a list of instances. Received: {rows!r:.200}.")
        if len(names) == 1:
            rows = [row if isinstance(row, dict) else {names[0]: row} for row in rows]
        return {"predictions": predict_rows(function, rows, batch_size, progress)}
    columns = request["inputs"]
    if len(names) == 1 and not isinstance(columns, dict):
        columns = {names[0]: columns}
    if not isinstance(columns, dict) or sorted(columns) != names:
        raise ValueError(f"`inputs` must hold the inputs {names}. Received: {columns!r:.200}.")
    for name, column in columns.items():
        if not isinstance(column, list):
            raise ValueError(f"`inputs`' `{name}` must be a list (one entry per row). Received: {column!r:.200}.")
    lengths = {len(v) for v in columns.values()}
    if len(lengths) != 1:
        raise ValueError(f"Every input needs as many rows. Received lengths {sorted(lengths)}.")
    rows = [dict(zip(columns, values)) for values in zip(*columns.values())]
    predictions = predict_rows(function, rows, batch_size, progress)
    if not predictions:  # no rows: the outputs' names, from the graph's answer to an empty batch
        specs = input_specs(function)
        empty = function(**{n: tf.zeros([0] + [d or 0 for d in spec.shape.as_list()[1:]], tf.string)
                            for n, spec in specs.items()})
        return {"outputs": {key: [] for key in sorted(empty)}}
    return {"outputs": {key: [p[key] for p in predictions] for key in predictions[0]}}
