"""auto_precision: bf16 only where the CPU (or an accelerator) runs it natively."""

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
