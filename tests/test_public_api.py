"""`keras_bert_zoo.__all__`: what a user calls, every name resolving to the package's own object."""

import importlib
import inspect
import os
import re
import subprocess
import sys
import types

import pytest

import keras_bert_zoo

USER_FACING = {
    # every model, each task included
    "BertBackbone", "BertPretrainer", "BertClassifier", "BertMultipleChoice", "BertSpanExtractor",
    "BertTokenClassifier", "BertFeatureExtractor",
    # tokenizer, preprocessors, vocabularies
    "BertTokenizer", "BertPreprocessor", "MultipleChoicePreprocessor", "SpanExtractorPreprocessor",
    "TokenClassifierPreprocessor", "SegmentPacker", "MLMMasker", "SpanDecoder", "learn_vocabulary",
    "load_vocabulary", "save_vocabulary",
    # presets (a model saves itself: `model.save_to_preset(directory)`)
    "list_presets", "get_preset_vocabulary",
    # runs and their configs; optimizer, strategies, the fit loop
    "BertAdamW", "LinearWarmupLinearDecay", "get_strategy", "fit_resumable", "TrainingCheckpoint",
    "PretrainingConfig", "run_pretraining", "FinetuningConfig", "run_finetuning", "run_tuning", "tune",
    "fill_mask",
    # export
    "export", "export_encoder", "export_preprocessor", "save_hf_checkpoint", "save_keras_hub_preset",
}
SUBPACKAGES = {"data", "metrics", "text", "layers", "models", "presets", "weights", "training", "pretraining",
               "finetuning", "serving", "utils"}

# Run plumbing: importable from its module, not part of the top-level API.
PLUMBING = {"Task", "replica_step_function", "batchwise", "fit_on_workers", "RunSchedule", "FinetuningAdamW",
            "read_preset_tensors", "assign_declared_weights", "keras_internals", "HeldOutEvaluation",
            "serving_functions", "shards_dataset"}

def test_every_name_in_all_resolves_to_a_documented_package_object():
    names = keras_bert_zoo.__all__
    assert len(names) == len(set(names)), "a name is listed twice"
    for name in names:
        obj = getattr(keras_bert_zoo, name)
        if isinstance(obj, types.ModuleType):
            assert obj.__name__ == f"keras_bert_zoo.{name}", name
            continue
        assert obj.__module__.startswith("keras_bert_zoo."), (name, obj.__module__)
        assert inspect.getdoc(obj), f"{name} has no docstring"


def test_all_is_the_user_facing_names_and_the_subpackages():
    assert set(keras_bert_zoo.__all__) == USER_FACING | SUBPACKAGES, sorted(
        set(keras_bert_zoo.__all__) ^ (USER_FACING | SUBPACKAGES))
    assert not PLUMBING & set(keras_bert_zoo.__all__), sorted(PLUMBING & set(keras_bert_zoo.__all__))


def test_every_name_in_all_imports():
    for name in keras_bert_zoo.__all__:
        namespace = {}
        exec(f"from keras_bert_zoo import {name}", namespace)
        assert namespace[name] is getattr(keras_bert_zoo, name), name


def test_subpackages_export_what_their_folder_holds_for_users():
    assert {"MLMMasker", "TokenClassifierPreprocessor"} <= set(keras_bert_zoo.text.__all__)
    assert keras_bert_zoo.text.MLMMasker is keras_bert_zoo.MLMMasker
    assert keras_bert_zoo.text.TokenClassifierPreprocessor is keras_bert_zoo.TokenClassifierPreprocessor
    assert {"read_glue", "read_squad", "read_conll", "write_pretraining_tfrecords"} <= set(keras_bert_zoo.data.__all__)
    assert {"glue_metrics", "squad_v1_metrics", "tagging_metrics"} <= set(keras_bert_zoo.metrics.__all__)
    assert keras_bert_zoo.utils.precision.auto_precision is importlib.import_module(
        "keras_bert_zoo.utils.precision").auto_precision
    for package in ("data", "metrics", "text", "layers", "models", "presets", "weights", "training", "pretraining",
                    "utils"):
        module = getattr(keras_bert_zoo, package)
        for name in module.__all__:
            assert getattr(module, name) is not None, (package, name)


def test_submodules_keep_their_names_under_the_exports():
    """A package export never hides a module of the same name (`from pkg import module` gets the module)."""
    from keras_bert_zoo.data import pretraining_report
    from keras_bert_zoo.pretraining import fill_mask

    assert isinstance(pretraining_report, types.ModuleType) and isinstance(fill_mask, types.ModuleType)


def test_dir_shows_no_import_plumbing():
    names = dir(keras_bert_zoo)
    assert "os" not in names and not [n for n in names if n.startswith("_") and not n.startswith("__")]
    assert {"tune", "run_tuning"} <= set(names)


def test_dir_is_the_public_api_and_no_module_it_loaded():
    """Submodules the import system binds as it loads them and this package's
    helpers are no names a user types: `dir()` is `__all__` and the dunders."""
    names = set(dir(keras_bert_zoo))
    assert {n for n in names if not n.startswith("__")} == set(keras_bert_zoo.__all__), sorted(
        {n for n in names if not n.startswith("__")} ^ set(keras_bert_zoo.__all__))


def _import_in_a_subprocess(code, **env):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    environ = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # the package's default
    environ.update(PYTHONPATH=root, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)


STARTUP_NOISE = re.compile(r"cuInit|InitializeLog|cudart|cuda drivers|oneDNN custom operations")


def test_import_prints_no_tensorflow_startup_noise_but_real_errors_show():
    """A line TensorFlow's import writes that is not start-up noise (here one written while Keras
    loads) still reaches stderr, and so does an error after the import."""
    code = ("import builtins, os\n"
            "real_import = builtins.__import__\n"
            "def spy(name, *args, **kwargs):\n"
            "    if name == 'keras' and not getattr(spy, 'done', False):\n"
            "        spy.done = True\n"
            "        os.write(2, b'E0000 00:00:1.0 1 op_kernel.cc:1] a real error during the import\\n')\n"
            "    return real_import(name, *args, **kwargs)\n"
            "builtins.__import__ = spy\n"
            "import keras_bert_zoo\n"
            "builtins.__import__ = real_import\n"
            "import tensorflow as tf\n"
            "tf.io.read_file('/no/such/file/for/kbz')\n")
    proc = _import_in_a_subprocess(code)
    assert proc.returncode == 1
    noise = [line for line in proc.stderr.splitlines() if STARTUP_NOISE.search(line)]
    assert not noise, noise
    assert "a real error during the import" in proc.stderr
    assert "NotFoundError" in proc.stderr and "/no/such/file/for/kbz" in proc.stderr


def test_star_import_binds_exactly_all():
    namespace = {}
    exec("from keras_bert_zoo import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(keras_bert_zoo.__all__)


def test_import_needs_no_optional_dependency():
    """gensim (`demo` extra) and apache-beam (`beam` extra) load only when their feature runs;
    keras-tuner (~1.2 s with what it imports) only when the search is first named."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import sys, keras_bert_zoo\n"
            "loaded = lambda: sorted(m for m in ('gensim', 'apache_beam', 'keras_tuner') if m in sys.modules)\n"
            "print(loaded())\n"
            "from keras_bert_zoo import tune\n"
            "print(loaded(), tune.__module__, keras_bert_zoo.run_tuning.__module__, 'tune' in dir(keras_bert_zoo))")
    env = dict(os.environ, PYTHONPATH=root, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after = proc.stdout.strip().splitlines()[-2:]
    assert before == "[]"
    assert after == ("['keras_tuner'] keras_bert_zoo.finetuning.search.tuner "
                     "keras_bert_zoo.finetuning.search.run True")


def test_unknown_attribute_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        keras_bert_zoo.no_such_name


def test_names_and_module_paths_of_before_the_rehouse_are_gone():
    """No release had them (0.1.0 is the first), so no shim keeps them: the new homes only."""
    with pytest.raises(AttributeError, match="read_glue"):
        keras_bert_zoo.read_glue
    with pytest.raises(AttributeError, match="save_to_preset"):  # a model saves itself: model.save_to_preset
        keras_bert_zoo.save_to_preset
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("keras_bert_zoo.training.finetuning_run")
