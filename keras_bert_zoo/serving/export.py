"""`export(task, path)`: a SavedModel that answers raw strings, with no Python around it.

The SavedModel runs in any TensorFlow runtime that has the tensorflow-text ops (TF
Serving's stock model server has them; a Python client imports `tensorflow_text` before
`tf.saved_model.load`): tokenizer, packing, the model and the task's post-processing are
one graph. Signatures:

- `serving_default` ("text"): raw UTF-8 strings under named inputs (a classifier's
  `text`, or `text_a`/`text_b` for pairs), the task's answers under named dense outputs
  (a classifier's `label`, `label_id`, `probabilities`; regression `score`). Batch and
  length vary: a request is padded to its longest row (rounded up to 8, as
  `Task.predict`), never to `sequence_length`.
- `ids`: packed `token_ids`, `segment_ids`, `padding_mask` for clients that tokenize
  themselves (with `assets/vocab.txt`), the same outputs.
- `examples`: serialized `tf.train.Example`s under `inputs` with the text features named
  as the text inputs; for a classifier its method is TF Serving's classify (`classes`,
  `scores`) or, for regression, regress (`outputs`).

Each task supplies only its post-processing (`keras_bert_zoo/serving/specs.py`); the
vocabulary is a SavedModel asset (`assets/vocab.txt`) and `do_lower_case` a variable,
as TF Hub's BERT preprocessors have them; the string variable `precision` records the float
policy the graph computes in: the task's own (float32 unless the user built or loaded it
with another `dtype`; nothing is switched on export). Outputs are dense tensors only (a ragged
output would export as `DT_INVALID`); a variable number of results comes padded, with
a count. The write is atomic: a failed export leaves no directory behind and an existing
export at `path` untouched.

Where it writes (`export_target`): only its own SavedModel directory. A folder holding other
files is refused; in TF Serving's layout (MODEL/<version>/) a new version folder is added
(`version`, by default the next number) and the others are left alone; an earlier export
is replaced only with `overwrite=True`. The next number is taken at the rename that publishes
the export (`serving/versions.py`), so two exports into one model folder at once get two
versions; a target that another writer filled while this export ran is never replaced without
`overwrite`. A write that fails (a full disk) is one ValueError naming the folder and the
reason; nothing is left, and an earlier export there is kept.

Bounded requests: each string input is read up to its first `max_input_chars` characters
(100 000 by default), so a request of any length costs memory in proportion to that cap
and to its rows, never to the text; every text answer says which rows were cut
(`input_truncated`, one bool per row) (tests/serving/test_export_limits.py serves a 1 MB string
to each task; the span and token tasks window only the kept text, and their offsets index
it). An empty batch gets
empty outputs of the usual dtypes and ranks. Rows of a request's inputs must agree, and
the `ids` signature takes at most the backbone's `max_sequence_length` positions: else
the request fails with a message naming the input and the limit.
"""

import os
import re
import shutil
import tempfile

import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_bert_zoo.models import answer_names
from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.models import task_pipeline
from keras_bert_zoo.serving import specs as export_tasks
from keras_bert_zoo.serving.export_target import (RECORD, VOCABULARY_FILE, export_target, is_export,
                                                  next_version_base)
from keras_bert_zoo.serving.spec_base import PREDICT, check_ids, check_rows
from keras_bert_zoo.serving.versions import publish_next_version
from keras_bert_zoo.text import normalize as norm
from keras_bert_zoo.text.vocabulary import save_vocabulary
from keras_bert_zoo.utils import files, keras_internals

__all__ = ["MAX_INPUT_CHARS", "RECORD", "SIGNATURES", "export", "export_target", "exported_precision", "is_export",
           "serving_functions"]

SIGNATURES = ("text", "ids", "examples")
MAX_INPUT_CHARS = 100_000
"""Characters of each string input an export reads by default (see the module: long inputs)."""


def _check_signatures(signatures):
    if isinstance(signatures, str):
        signatures = (signatures,)
    signatures = tuple(signatures)
    unknown = [s for s in signatures if s not in SIGNATURES]
    if unknown or not signatures or len(set(signatures)) != len(signatures):
        raise ValueError(
            f"`signatures` must be distinct names from {SIGNATURES}, at least one. "
            f"Received: signatures={signatures!r}."
        )
    return signatures


class _ServingModule(keras_internals.auto_trackable_class()):
    """What the SavedModel tracks: the task's variables, the vocabulary asset, the casing."""

    def __init__(self, task, vocabulary_path):
        # Variables, not the Keras objects: the SavedModel holds no Keras object graph,
        # so a process without Keras loads it. The tf.Variables under the Keras ones:
        # a Keras variable exports a copy that TF1-style loaders (TF Serving's C++
        # loader, `saved_model_cli run`) restore while the graph reads the original.
        self.variables = [getattr(v, "value", v) for v in task.variables]
        self.vocab_file = tf.saved_model.Asset(vocabulary_path)
        self.do_lower_case = tf.Variable(bool(task.preprocessor.tokenizer.lowercase), trainable=False)
        self.precision = tf.Variable(exported_precision(task), trainable=False)


def exported_precision(task):
    """The float policy `export(task, ...)` writes the graph in: the task's backbone's."""
    return getattr(task, "backbone", task).dtype_policy.name


def _function(specs, body):
    """A tf.function over named inputs (`specs`: ordered {name: TensorSpec}) calling `body(dict)`."""
    names = list(specs)

    def call(*args):
        return body(dict(zip(names, args)))

    return tf.function(call, input_signature=[specs[n] for n in names], autograph=False)


def one_row_if_empty(ids, rows):
    """`ids` unchanged, or with no rows: one row of zeros (each other axis at least 1 long)."""
    return tf.cond(rows > 0, lambda: ids, lambda: tf.zeros(tf.maximum(tf.shape(ids), 1), ids.dtype))


def cut_rows(raw, capped):
    """bool (rows,): whether `cap_length` shortened any string input of a row (bytes compared, so
    any input, valid UTF-8 or not, is judged alike)."""
    flags = None
    for name, value in raw.items():
        cut = tf.strings.length(capped[name]) < tf.strings.length(value)
        if cut.shape.rank > 1:  # e.g. a multiple-choice row's endings
            cut = tf.reduce_any(cut, axis=list(range(1, cut.shape.rank)))
        flags = cut if flags is None else tf.logical_or(flags, cut)
    return flags


def serving_functions(task, spec, signatures, max_input_chars=MAX_INPUT_CHARS):
    """`{signature key: (concrete function, method name)}` for `task` under `spec`; each
    string input is read up to its first `max_input_chars` characters (None: all of it)."""
    preprocessor = task.preprocessor
    max_length = getattr(getattr(task, "backbone", None), "max_sequence_length", None)

    model_keys = getattr(spec, "model_inputs", inputs_lib.SEQUENCE_KEYS)

    def run_model(ids):
        own = getattr(spec, "run_model", None)  # a spec that needs more than the task's outputs
        rows = tf.shape(ids["token_ids"])[0]
        # The backbone's layers cannot run on zero rows (an empty TensorArray has no shape to
        # stack): an empty batch runs one padding row, and its outputs are cut back to none.
        ids = {key: one_row_if_empty(value, rows) for key, value in ids.items()}
        outputs = own(ids) if own else task(ids, training=False)
        return tf.nest.map_structure(lambda t: t[:rows], outputs)

    # The model is traced once, into a function each signature calls: the SavedModel holds one
    # copy of its graph, and three signatures cost about one model trace instead of three.
    model_function = tf.function(run_model, autograph=False, reduce_retracing=True)

    def answer(packed, raw):
        return spec.outputs(model_function({key: packed[key] for key in model_keys}), raw, packed)

    def from_text(raw):
        # The cap bounds what one request costs: tokens, windows and model rows all grow with
        # the text; the outputs' offsets and answers index the capped text, a prefix of the input,
        # and `input_truncated` says which rows it cut.
        capped = {name: norm.cap_length(value, max_input_chars) for name, value in raw.items()}
        truncated = cut_rows(raw, capped)
        with tf.control_dependencies(check_rows(capped)):
            raw = {name: tf.identity(value) for name, value in capped.items()}
        packed = spec.preprocess(preprocessor, raw)
        packed, _, _ = task_pipeline.trim_to_longest(packed)
        return {**answer(packed, raw), answer_names.INPUT_TRUNCATED: truncated}

    def from_ids(packed):
        with tf.control_dependencies(check_ids(packed, max_length)):
            packed = {name: tf.identity(value) for name, value in packed.items()}
        return answer(packed, None)

    functions = {}
    if "text" in signatures:
        functions["serving_default"] = (_function(spec.text_specs(), from_text), PREDICT)
    if "ids" in signatures:
        functions["ids"] = (_function(spec.ids_specs(), from_ids), PREDICT)
    if "examples" in signatures:
        features = spec.example_features()
        method = spec.examples_method()

        def from_examples(inputs):
            raw = tf.io.parse_example(inputs["inputs"], features)
            return spec.example_outputs(from_text(raw))

        specs = {"inputs": tf.TensorSpec([None], tf.string, name="inputs")}
        functions["examples"] = (_function(specs, from_examples), method)
    return {key: (fn.get_concrete_function(), method) for key, (fn, method) in functions.items()}


def _set_method_names(directory, methods):
    """TF2 saves every signature as `predict`; TF Serving's classify/regress APIs need theirs."""
    if all(m == PREDICT for m in methods.values()):
        return
    pb_path = os.path.join(directory, "saved_model.pb")
    saved_model = saved_model_pb2.SavedModel()
    with open(pb_path, "rb") as f:
        saved_model.ParseFromString(f.read())
    for meta_graph in saved_model.meta_graphs:
        for key, method in methods.items():
            if key in meta_graph.signature_def:
                meta_graph.signature_def[key].method_name = method
    with open(pb_path, "wb") as f:
        f.write(saved_model.SerializeToString())


def export(task, path, *, signatures=SIGNATURES, text_inputs=None, version=None, overwrite=False,
           max_input_chars=MAX_INPUT_CHARS):
    """Writes `task` as a SavedModel that answers raw strings (see the module).

    Args:
        task: a `keras_bert_zoo` task with its preprocessor (`BertClassifier`, ...).
        path: str. The SavedModel directory (new or empty), or a TF Serving model folder
            (only numbered version folders in it: the export goes to the next number).
        signatures: names from `("text", "ids", "examples")`: `serving_default` on
            strings, `ids` on packed ids, `examples` on serialized `tf.train.Example`s.
            Defaults to all three.
        text_inputs: names of the string inputs where a task takes one or two texts
            (a classifier: `("text",)`, the default, or `("text_a", "text_b")` for
            sentence pairs). None: the task's default.
        version: None, an int >= 0 or "next": write `path/<version>` (TF Serving's
            layout), leaving everything else in `path` as it is. Defaults to None.
        overwrite: bool. Replace an earlier export at the target (only once the new one
            is complete). Anything else there is never replaced. Defaults to False.
        max_input_chars: int or None. Characters of each string input the graph reads
            (the rest is ignored: offsets index the kept prefix); None reads all (an
            unbounded request then costs unbounded memory). Defaults to 100 000.

    Returns:
        The absolute path written.

    Raises:
        ValueError: the task has no preprocessor, is not exportable, an argument is
            invalid, or the target holds what is not an earlier export (or one, without
            `overwrite`); nothing is written then.

    Examples:
    >>> classifier = keras_bert_zoo.BertClassifier.from_preset(
    ...     "tiny_preset", num_classes=2, labels=["negative", "positive"])
    >>> path = keras_bert_zoo.export(classifier, "served/sst2/1", signatures=["text"])
    >>> # elsewhere, with only TensorFlow:
    >>> import tensorflow_text  # noqa: F401 (registers the text ops)
    >>> serve = tf.saved_model.load("served/sst2/1").signatures["serving_default"]
    >>> sorted(serve(text=tf.constant(["a gripping film"])))
    ['input_truncated', 'label', 'label_id', 'probabilities']
    """
    signatures = _check_signatures(signatures)
    if getattr(task, "preprocessor", None) is None:
        raise ValueError(
            "`task.preprocessor` is None: an export tokenizes in the graph and needs the "
            "task's preprocessor. Attach one (`task.preprocessor = ...`) before exporting."
        )
    if max_input_chars is not None and (not isinstance(max_input_chars, int) or isinstance(max_input_chars, bool)
                                        or max_input_chars < 1):
        raise ValueError(f"`max_input_chars` must be a positive int or None. Received: {max_input_chars!r}.")
    spec = export_tasks.serving_spec(task, text_inputs)
    base = next_version_base(path, version)
    path = export_target(path, version, overwrite)
    with tempfile.TemporaryDirectory() as scratch:
        vocabulary_path = os.path.join(scratch, VOCABULARY_FILE)
        save_vocabulary(task.preprocessor.tokenizer.get_vocabulary(), vocabulary_path)
        module = _ServingModule(task, vocabulary_path)
        functions = serving_functions(task, spec, signatures, max_input_chars)
        record = {"format": "keras_bert_zoo", "task": type(task).__name__, "signatures": list(signatures),
                  "max_input_chars": max_input_chars, "precision": exported_precision(task)}
        try:
            if base is not None:
                return _publish_version(module, functions, record, base)
            with files.atomic_directory(path, replace=overwrite) as tmp:
                _write_saved_model(module, functions, record, tmp)
        except (OSError, tf.errors.OpError) as e:
            raise ValueError(_write_failure(path if base is None else base, e)) from e
    return path


def _write_saved_model(module, functions, record, directory):
    tf.saved_model.save(module, directory, signatures={k: fn for k, (fn, _) in functions.items()})
    _set_method_names(directory, {k: method for k, (_, method) in functions.items()})
    files.atomic_write_json(os.path.join(directory, RECORD), record)


def _publish_version(module, functions, record, base):
    """Writes the SavedModel into a hidden folder in `base`, then renames it to the next version."""
    os.makedirs(base, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".tmp-export-{os.getpid()}-", dir=base)
    try:
        os.chmod(tmp, 0o777 & ~files.current_umask())
        _write_saved_model(module, functions, record, tmp)
        return publish_next_version(tmp, base)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def _write_failure(path, error):
    """The one line of an export that could not be written (a full disk, a lost permission)."""
    if isinstance(error, OSError) and error.strerror:
        reason = error.strerror
    else:  # TensorFlow's: `{{function_node ...}} <file>; No space left on` (its own words, cut short)
        reason = re.sub(r"\{\{[^}]*\}\}\s*", "", (getattr(error, "message", None) or str(error)).strip())
        reason = "No space left on device" if "No space left" in reason else (reason.splitlines() or [""])[0]
    return (f"Could not write the SavedModel to {path}: {' '.join(reason.split())[:300]}. Nothing was written "
            "there (an earlier export there is kept). Free space or fix the folder and export again.")
