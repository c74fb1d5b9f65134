"""Float32 unless the user asks otherwise, everywhere: a model built without `dtype` follows
Keras' global policy (not the CPU), `"auto"` is an opt-in, predict switches nothing unless
asked, and every command prints and records the policy it runs in."""

import json
import os

import keras
import numpy as np
import pytest

from keras_bert_zoo.utils import precision as precision_lib
from tests.models.test_bert_classifier import SENTENCES, tiny_classifier


@pytest.fixture
def bf16_cpu(monkeypatch):
    """A CPU with native bf16 (where the old default switched to mixed_bfloat16), no accelerator."""
    monkeypatch.delenv(precision_lib.ENV, raising=False)
    monkeypatch.setattr(precision_lib, "has_accelerator", lambda: False)
    monkeypatch.setattr(precision_lib, "cpu_flags", lambda path=None: frozenset({"avx2", "avx512f", "avx512_bf16"}))
    return monkeypatch


def test_defaults_are_float32_and_predict_stays_float32_on_a_bf16_cpu(bf16_cpu):
    task = tiny_classifier()
    assert task.backbone.dtype_policy.name == "float32" and task.backbone.auto_dtype
    assert task.get_layer("logits").dtype_policy.name == "float32"
    pinned = tiny_classifier(dtype="float32")
    pinned.set_weights(task.get_weights())
    float32 = pinned.predict(SENTENCES, verbose=0)
    np.testing.assert_array_equal(task.predict(SENTENCES, verbose=0), float32)
    bf16 = task.predict(SENTENCES, verbose=0, precision="auto")  # the opt-in still switches, for the call
    assert np.abs(bf16 - float32).max() > 1e-6
    assert task.backbone.dtype_policy.name == "float32"
    bf16_cpu.setenv(precision_lib.ENV, "mixed_bfloat16")  # the user's choice by environment
    assert tiny_classifier().backbone.dtype_policy.name == "mixed_bfloat16"


def test_the_global_policy_is_followed_when_built_and_when_reloaded(bf16_cpu, tmp_path):
    keras.config.set_dtype_policy("mixed_bfloat16")  # the fixture resets it
    task = tiny_classifier()
    assert task.backbone.dtype_policy.name == "mixed_bfloat16"
    assert {v.dtype for v in task.weights} == {"float32"}
    assert task.backbone.get_config()["dtype"] is None  # saved as "the global policy"
    task.save(tmp_path / "task.keras")
    keras.config.set_dtype_policy("float32")
    reloaded = keras.saving.load_model(tmp_path / "task.keras")
    assert reloaded.backbone.dtype_policy.name == "float32"  # not the CPU's pick
    keras.config.set_dtype_policy("mixed_bfloat16")
    assert keras.saving.load_model(tmp_path / "task.keras").backbone.dtype_policy.name == "mixed_bfloat16"


def test_auto_is_an_opt_in_saved_as_the_policy_it_picked(bf16_cpu, tmp_path):
    task = tiny_classifier(dtype="auto")
    assert task.backbone.dtype_policy.name == "mixed_bfloat16" and not task.backbone.auto_dtype
    task.save(tmp_path / "auto.keras")
    bf16_cpu.setattr(precision_lib, "cpu_flags", lambda path=None: frozenset({"avx2"}))
    assert keras.saving.load_model(tmp_path / "auto.keras").backbone.dtype_policy.name == "mixed_bfloat16"
    assert precision_lib.resolve_precision(None) == "float32"


def test_preset_and_export_record_the_policy_and_loading_stays_float32(bf16_cpu, tmp_path):
    import tensorflow as tf

    import keras_bert_zoo

    task = tiny_classifier(dtype="mixed_bfloat16")
    preset = task.save_to_preset(str(tmp_path / "preset"))
    with open(os.path.join(preset, "config.json")) as f:
        assert json.load(f)["precision_when_saved"] == "mixed_bfloat16"
    reloaded = type(task).from_preset(preset)
    assert reloaded.backbone.dtype_policy.name == "float32"  # a record, not a setting
    path = keras_bert_zoo.export(task, str(tmp_path / "served"), signatures=["ids"])
    assert tf.saved_model.load(path).precision.numpy() == b"mixed_bfloat16"  # the model's own, unchanged


def test_the_line_says_what_runs_and_why(bf16_cpu):
    line = precision_lib.precision_line("float32")
    assert line == ("precision: float32 (default; --precision auto picks mixed_bfloat16 on this machine: "
                    "this CPU runs bf16 natively (AVX512-BF16/AMX))")
    assert precision_lib.precision_line("mixed_bfloat16", "auto").startswith(
        "precision: mixed_bfloat16 (--precision auto: this CPU runs bf16")
    assert precision_lib.precision_line("float32", "float32") == "precision: float32 (--precision float32)"
    assert precision_lib.precision_line("mixed_bfloat16", "float32") == (
        "precision: mixed_bfloat16 (the model's own saved policy; --precision float32 (float32) does not change it)")
    bf16_cpu.setattr(precision_lib, "cpu_flags", lambda path=None: frozenset({"avx2"}))
    assert "auto picks float32 on this machine: this CPU has no native bf16" in precision_lib.precision_line("float32")


def test_every_command_prints_the_policy_once_at_its_start(bf16_cpu, tmp_path, capsys):
    import importlib

    from keras_bert_zoo.finetuning import run as finetuning_run
    from keras_bert_zoo.pretraining import run as pretraining_run
    from tools import export as export_tool
    from tools import finetune, pretrain

    seen = []
    results = {"task": "sst2", "dev": {}, "train_examples": 0, "train_examples_per_second": 0.0, "seconds": 0.0}
    bf16_cpu.setattr(finetuning_run, "run_finetuning", lambda config, **kw: seen.append(config.precision) or results)
    data = tmp_path / "train.tsv"
    data.write_text("sentence\tlabel\ngood\t1\n")
    flags = ["--task", "sst2", "--train-file", str(data), "--dev-file", str(data), "--preset", "p",
             "--output-dir", str(tmp_path / "out")]
    finetune.main(flags)
    finetune.main(flags + ["--precision", "auto"])
    assert seen == ["float32", "mixed_bfloat16"]
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("precision:")]
    assert lines == [precision_lib.precision_line("float32"), precision_lib.precision_line("mixed_bfloat16", "auto")]

    result = {"heads_loaded": [], "held_out": [], "baselines": None, "stopped_early": False, "step": 0,
              "resumed_from": None, "output_dir": "o"}
    bf16_cpu.setattr(pretraining_run, "run_pretraining", lambda config, **kw: seen.append(config.precision) or result)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\n")
    pretrain.main(["--train-files", str(data), "--vocabulary", str(vocab), "--num-layers", "1", "--num-heads", "1",
                   "--hidden-dim", "4", "--intermediate-dim", "4", "--checkpoint-dir", str(tmp_path / "c"),
                   "--output-dir", str(tmp_path / "p")])
    assert seen[-1] == "float32"
    assert capsys.readouterr().out.splitlines()[0] == precision_lib.precision_line("float32")

    tiny_classifier().save_to_preset(str(tmp_path / "preset"))
    export_module = importlib.import_module("keras_bert_zoo.serving.export")  # the package's `export` is the function
    bf16_cpu.setattr(export_module, "export", lambda task, path, **kw: seen.append(task.backbone.dtype_policy.name))
    export_tool.main(["--model", str(tmp_path / "preset"), "--output", str(tmp_path / "served")])
    assert seen[-1] == "float32"
    assert capsys.readouterr().out.splitlines()[0] == precision_lib.precision_line("float32")


def test_fit_in_the_python_api_says_its_precision_first(bf16_cpu, capsys):
    """As every command's first line: `fit` with a progress bar names the policy it trains in."""
    task = tiny_classifier()
    task.fit(SENTENCES, np.arange(len(SENTENCES)) % 2, epochs=1, verbose=1)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ('precision: float32 (the default; from_preset(..., dtype="auto") picks mixed_bfloat16 on '
                        'this machine: this CPU runs bf16 natively (AVX512-BF16/AMX))')
    assert lines[1] == "Building the training graph (the first step)..."
    task.fit(SENTENCES, np.arange(len(SENTENCES)) % 2, epochs=1, verbose=0)
    assert capsys.readouterr().out == ""  # verbose=0: nothing printed
    assert precision_lib.model_precision_line("mixed_bfloat16") == "precision: mixed_bfloat16 (the model's dtype policy)"
