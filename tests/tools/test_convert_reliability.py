"""tools/convert_checkpoint.py under mistakes (issue 21): a target holding another model is
refused unless `--overwrite`, and written atomically (R18); `--no-verify` accepts a
hand-edited preset (R17); `--help` answers without importing TensorFlow (R29)."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from keras_bert_zoo.presets import download, loading
from keras_bert_zoo.weights import safetensors_checkpoint
from tests.weights import weights_testlib as lib
from tests.presets.conftest import _isolated_cache  # noqa: F401  (autouse: an empty cache, as in tests/presets/)
from tools import convert_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _snapshot(directory):
    return {n: (directory / n).read_bytes() for n in sorted(os.listdir(directory))}


@pytest.fixture
def other_model(tmp_path):
    """A target directory that already holds another model (HF layout)."""
    target = tmp_path / "target"
    target.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        shutil.copy(os.path.join(lib.fixture_dir("gelu_new"), name), target)
    return target


def test_r18_target_holding_another_model_is_refused(other_model, tmp_path):
    before = _snapshot(other_model)
    with pytest.raises(ValueError, match="already holds a checkpoint .*--overwrite"):
        convert_checkpoint.main([lib.fixture_dir("gelu"), str(other_model), "--to", "hf"])
    assert _snapshot(other_model) == before and sorted(os.listdir(tmp_path)) == ["target"]


def test_r18_overwrite_replaces_the_model_but_never_foreign_files(other_model, tmp_path):
    convert_checkpoint.main([lib.fixture_dir("gelu"), str(other_model), "--to", "google", "--overwrite"])
    assert sorted(os.listdir(other_model)) == [
        "bert_config.json", "bert_model.ckpt.data-00000-of-00001", "bert_model.ckpt.index", "vocab.txt"]
    assert json.loads((other_model / "bert_config.json").read_text())["hidden_act"] == "gelu"
    (other_model / "notes.md").write_text("mine")
    with pytest.raises(ValueError, match=r"not part of a checkpoint: \['notes.md'\]"):
        convert_checkpoint.main([lib.fixture_dir("gelu"), str(other_model), "--to", "hf", "--overwrite"])
    assert (other_model / "notes.md").read_text() == "mine"


def test_r18_failure_mid_write_leaves_the_target_as_it_was(other_model, tmp_path, monkeypatch):
    before = _snapshot(other_model)

    def half_written(tensors, directory, *args, **kwargs):
        (pathlib.Path(directory) / "model.safetensors").write_bytes(b"half")
        raise OSError("disk full")

    monkeypatch.setattr(safetensors_checkpoint, "write_hf_checkpoint", half_written)
    with pytest.raises(OSError, match="disk full"):
        convert_checkpoint.main([lib.fixture_dir("gelu"), str(other_model), "--to", "hf", "--overwrite"])
    assert _snapshot(other_model) == before and sorted(os.listdir(tmp_path)) == ["target"]


def test_r17_no_verify_converts_a_hand_edited_preset(tmp_path):
    preset = tmp_path / "preset"
    convert_checkpoint.main([lib.fixture_dir("gelu"), str(preset), "--to", "keras_bert_zoo"])
    config = json.loads((preset / "config.json").read_text())
    config["backbone"]["dropout"] = 0.0
    (preset / "config.json").write_text(json.dumps(config))
    with pytest.raises(download.IntegrityError, match="--no-verify"):
        convert_checkpoint.main([str(preset), str(tmp_path / "hf"), "--to", "hf"])
    convert_checkpoint.main([str(preset), str(preset), "--to", "keras_bert_zoo", "--no-verify", "--overwrite"])
    assert loading.read_preset_tensors(str(preset))[0].keys() == loading.read_preset_tensors(lib.fixture_dir("gelu"))[0].keys()
    assert json.loads((preset / "config.json").read_text())["backbone"]["dropout"] == 0.0


def test_r29_help_does_not_import_tensorflow():
    code = (
        "import runpy, sys; sys.argv = ['convert_checkpoint.py', '--help']\n"
        "try:\n    runpy.run_path('tools/convert_checkpoint.py', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print('IMPORTED', sorted(m for m in ('tensorflow', 'keras', 'keras_bert_zoo') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    assert "--overwrite" in out and "--no-verify" in out and "IMPORTED []" in out


STARTUP_NOISE = ("InitializeLog", "cuInit", "cudart", "cuda drivers", "oneDNN custom operations")


def test_a_normal_run_prints_no_tensorflow_startup_noise(tmp_path):
    """A conversion of a tiny Google checkpoint: stdout is the summary line, stderr holds no
    absl banner, no-CUDA or oneDNN line (each used to come twice, once per TF library)."""
    google = tmp_path / "google"
    convert_checkpoint.main([lib.fixture_dir("gelu"), str(google), "--to", "google"])
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a user runs it
    proc = subprocess.run([sys.executable, "tools/convert_checkpoint.py", str(google), str(tmp_path / "hf"), "--to", "hf"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "(google, " in proc.stdout and "-> " in proc.stdout
    noise = [line for line in proc.stderr.splitlines() if any(word in line for word in STARTUP_NOISE)]
    assert not noise, noise
