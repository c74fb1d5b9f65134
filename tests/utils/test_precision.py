"""auto_precision, the opt-in: bf16 only where the CPU (or an accelerator) runs it natively."""

import json
import os

import pytest

from keras_bert_zoo.utils import precision


def test_native_bf16_flags_pick_mixed_bfloat16(monkeypatch):
    monkeypatch.delenv(precision.ENV, raising=False)
    zen4 = ["fma", "avx2", "avx512f", "avx512_bf16", "avx512_vnni"]
    zen3 = ["fma", "avx2"]
    assert precision.auto_precision(zen4, accelerator=False) == "mixed_bfloat16"
    assert precision.auto_precision(["amx_bf16"], accelerator=False) == "mixed_bfloat16"
    assert precision.auto_precision(zen3, accelerator=False) == "float32"
    assert precision.auto_precision(zen3, accelerator=True) == "mixed_bfloat16"


def test_cpu_flags_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512_bf16\n\nprocessor\t: 1\nflags\t\t: fpu\n")
    assert precision.cpu_flags(str(info)) == frozenset({"fpu", "avx2", "avx512_bf16"})
    assert precision.cpu_flags(str(tmp_path / "missing")) == frozenset()


def test_environment_override_and_bad_values(monkeypatch):
    monkeypatch.setenv(precision.ENV, "float32")
    assert precision.auto_precision(["avx512_bf16"], accelerator=True) == "float32"
    assert precision.resolve_precision("auto") == "float32"
    monkeypatch.setenv(precision.ENV, "bf16")
    with pytest.raises(ValueError, match="KERAS_BERT_ZOO_PRECISION.*'bf16'"):
        precision.auto_precision()
    monkeypatch.delenv(precision.ENV)
    assert precision.resolve_precision("mixed_float16") == "mixed_float16"
    with pytest.raises(ValueError, match="`precision`.*'half'"):
        precision.resolve_precision("half")


def _finetuning_config(tmp_path, **kwargs):
    from keras_bert_zoo.finetuning.config import FinetuningConfig

    data = tmp_path / "train.tsv"
    data.write_text("sentence\tlabel\ngood\t1\n")
    return FinetuningConfig(task="sst2", train_file=str(data), dev_file=str(data), preset="p",
                            output_dir=str(tmp_path / "out"), **kwargs)


@pytest.mark.parametrize("forced", ["float32", "mixed_bfloat16"])
def test_auto_resolved_once_and_recorded(tmp_path, monkeypatch, forced):
    from keras_bert_zoo.finetuning import glue, kind
    from keras_bert_zoo.pretraining.config import PretrainingConfig
    from tools import finetune, pretrain

    monkeypatch.setenv(precision.ENV, forced)  # what auto_precision() answers on this machine
    assert finetune.build_parser().parse_args(["--precision", "auto", "--task", "sst2", "--train-file", "t",
                                               "--dev-file", "d", "--preset", "p", "--output-dir", "o"]).precision == "auto"
    assert _finetuning_config(tmp_path).precision == "float32"  # fine-tuning's default (finetuning_config.py)
    config = _finetuning_config(tmp_path, precision="auto")
    assert config.precision == forced
    assert _finetuning_config(tmp_path, precision="float32").precision == "float32"  # explicit wins over env

    class Dev:
        history = [{"epoch": 0, "accuracy": 0.5}]

    os.makedirs(config.output_dir)
    kind.write_results(config, glue.glue_results(config, {"dev": Dev()}, 1, 1.0, 0.0))
    with open(os.path.join(config.output_dir, "results.json")) as f:
        assert json.load(f)["precision"] == forced

    assert pretrain.build_parser().get_default("precision") is None  # float32, as every command
    text, vocab = tmp_path / "corpus.txt", tmp_path / "vocab.txt"
    text.write_text("a b\n")
    vocab.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\na\nb\n")
    size = {"num_layers": 1, "num_heads": 2, "hidden_dim": 8, "intermediate_dim": 16}
    pre = PretrainingConfig("o", "c", train_files=str(text), vocabulary=str(vocab), size=size)
    assert pre.precision == "float32"  # pretraining's default, whatever auto would pick
    pre = PretrainingConfig("o", "c", train_files=str(text), vocabulary=str(vocab), size=size, precision="auto")
    assert pre.precision == forced  # run_settings.json stores config.precision


def test_tool_precision_bad_values(tmp_path, monkeypatch):
    monkeypatch.delenv(precision.ENV, raising=False)
    with pytest.raises(ValueError, match=r"--precision: unknown precision.*'bf16'.*'auto'"):
        _finetuning_config(tmp_path, precision="bf16")
    monkeypatch.setenv(precision.ENV, "half")
    with pytest.raises(ValueError, match="KERAS_BERT_ZOO_PRECISION.*'half'"):
        _finetuning_config(tmp_path, precision="auto")
