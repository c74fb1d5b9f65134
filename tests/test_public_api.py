"""`keras_bert_zoo.__all__`: what a user calls, every name resolving to the package's own object."""

import inspect
import os
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
    # presets
    "list_presets", "save_to_preset", "get_preset_vocabulary",
    # data pipelines and readers
    "pretraining_dataset", "read_pretraining_tfrecords", "write_pretraining_tfrecords", "read_glue", "read_squad",
    "read_swag", "read_conll", "conll_inputs", "load_glue_tfds", "load_squad_tfds", "load_conll2003_tfds",
    # optimizer, strategies, drivers, search
    "BertAdamW", "LinearWarmupLinearDecay", "get_strategy", "PretrainingConfig", "run_pretraining",
    "FinetuningConfig", "run_finetuning", "tune",
    # metrics
    "glue_metrics", "squad_v1_metrics", "squad_v2_metrics", "entity_scores",
    # export
    "export", "export_encoder", "export_preprocessor",
}

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


def test_all_holds_the_user_facing_names_and_no_plumbing():
    assert USER_FACING <= set(keras_bert_zoo.__all__), sorted(USER_FACING - set(keras_bert_zoo.__all__))
    assert not PLUMBING & set(keras_bert_zoo.__all__), sorted(PLUMBING & set(keras_bert_zoo.__all__))


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
