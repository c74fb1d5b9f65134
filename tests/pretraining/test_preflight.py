"""R40–R47: what `run_pretraining` refuses before its first step (issue 21); its time budget.

Each refusal happens before any model is built (so it costs seconds, not a run) and
names what to fix: an empty or too-small corpus (the files), an output path it could
not write at the end, a checkpoint directory of a run with other settings (the flag,
its old and new value).
"""

import dataclasses
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_zoo.pretraining import run as pretraining_run
from keras_bert_zoo.pretraining.config import PretrainingConfig
from keras_bert_zoo.pretraining.run import run_pretraining
from tests.training import tiny

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=16)


def _config(tmp_path, text, vocab, **overrides):
    kwargs = dict(train_files=text, vocabulary=vocab, size=dict(SIZE), strategy="cpu", steps=2, warmup_steps=1,
                  batch_size=4, learning_rate=1e-3, sequence_length=16, max_predictions=3, save_every=2,
                  progress=False)
    kwargs.update(overrides)
    return PretrainingConfig(str(tmp_path / "preset"), str(tmp_path / "ckpt"), **kwargs)


def _refuse_to_build(*args, **kwargs):
    raise AssertionError("a model was built")


@pytest.fixture
def no_model(monkeypatch):
    """Fails the test if `run_pretraining` gets as far as building a model."""
    monkeypatch.setattr(pretraining_run, "_build_model", _refuse_to_build)


def _assert_nothing_written(tmp_path):
    assert not os.path.exists(tmp_path / "ckpt") and not os.path.exists(tmp_path / "preset")


def test_r40_empty_text_corpus_is_refused_naming_the_file(tmp_path, corpus, no_model):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n")
    with pytest.raises(ValueError, match=r"yields 0 instance\(s\).*empty\.txt"):
        run_pretraining(_config(tmp_path, str(empty), corpus[1]))
    _assert_nothing_written(tmp_path)


def test_r41_corpus_smaller_than_one_batch_is_refused(tmp_path, corpus, no_model):
    small = tmp_path / "small.txt"
    small.write_text("the cat sat on the mat .\na big dog ran home .\n")
    with pytest.raises(ValueError, match=r"yields [1-9] instance\(s\).*fewer than one batch of 32.*small\.txt"):
        run_pretraining(_config(tmp_path, str(small), corpus[1], batch_size=32))
    _assert_nothing_written(tmp_path)


def test_r42_tfrecords_smaller_than_one_batch_are_refused(tmp_path, no_model):
    x, y = next(iter(tiny.synthetic_dataset(3)))
    path = tiny.write_tfrecord(tmp_path / "three.tfrecord",
                               {k: np.asarray(v) for part in (x, y) for k, v in part.items()})
    vocab = tiny.write_placeholder_vocab(tmp_path / "vocab.txt")
    config = _config(tmp_path, None, vocab, tfrecords=path, size=dict(tiny.TINY))
    with pytest.raises(ValueError, match=r"yields 3 instance\(s\).*batch of 4.*three\.tfrecord"):
        run_pretraining(config)
    _assert_nothing_written(tmp_path)


def test_r47_held_out_files_without_a_batch_are_refused(tmp_path, corpus, no_model):
    empty = tmp_path / "heldout.txt"
    empty.write_text("\n")
    with pytest.raises(ValueError, match=r"held-out data yields no batch of 4.*heldout\.txt"):
        run_pretraining(_config(tmp_path, *corpus, eval_files=str(empty), eval_every=2))
    _assert_nothing_written(tmp_path)


def test_r43_foreign_output_dir_is_refused_before_training(tmp_path, corpus, no_model):
    (tmp_path / "preset").mkdir()
    (tmp_path / "preset" / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"`output_dir` exists and is not a keras_bert_zoo preset"):
        run_pretraining(_config(tmp_path, *corpus))
    assert not os.path.exists(tmp_path / "ckpt")
    assert (tmp_path / "preset" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("name", ["output_dir", "checkpoint_dir", "log_dir"])
def test_r44_output_path_onto_a_regular_file_is_refused(tmp_path, corpus, no_model, name):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    config = _config(tmp_path, *corpus, log_dir=str(tmp_path / "logs"))
    config = dataclasses.replace(config, **{name: str(victim)})
    with pytest.raises(ValueError, match=rf"`{name}` is an existing file.*victim"):
        run_pretraining(config)
    assert victim.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == [
        "corpus.txt", "victim", "vocab.txt"]


def test_r44_output_dir_overlapping_the_checkpoints_is_refused(tmp_path, corpus, no_model):
    config = _config(tmp_path, *corpus)
    config = dataclasses.replace(config, output_dir=str(tmp_path / "ckpt" / "preset"))
    with pytest.raises(ValueError, match="`output_dir` and `checkpoint_dir` overlap"):
        run_pretraining(config)


def test_r45_time_budget_then_resume_with_changed_settings_names_the_flag(tmp_path, corpus, monkeypatch):
    # The time budget stops the run early (checkpointed, the last step evaluated) ...
    config = _config(tmp_path, *corpus, steps=50, eval_every=2, eval_batches=1, time_budget=1e-6)
    first = run_pretraining(config)
    assert first["stopped_early"] and first["step"] == 1
    assert [r["step"] for r in first["held_out"]] == [1]
    assert set(first["baselines"]) == {"unigram_id", "unigram_accuracy", "nsp_majority_accuracy"}
    # ... a rerun with another model or data shape is refused naming the flag, before any
    # model is built (R45) ...
    with monkeypatch.context() as patch:
        patch.setattr(pretraining_run, "_build_model", _refuse_to_build)
        bigger = dataclasses.replace(config, size=dict(SIZE, hidden_dim=32))
        with pytest.raises(ValueError, match=r"hidden_dim \(--hidden-dim\): 16 -> 32"):
            run_pretraining(bigger)
        with pytest.raises(ValueError, match=r"sequence_length \(--sequence-length\): 16 -> 8"):
            run_pretraining(dataclasses.replace(config, sequence_length=8))
        with pytest.raises(ValueError, match=r"masked_lm_prob \(--masked-lm-prob\): 0.15 -> 0.3"):
            run_pretraining(dataclasses.replace(config, masked_lm_prob=0.3))
    # ... and the same run continues, with other steps, learning rate and no budget.
    again = run_pretraining(dataclasses.replace(config, time_budget=None, steps=2, learning_rate=5e-4))
    assert again["resumed_from"] == 1 and again["step"] == 2 and not again["stopped_early"]


@pytest.mark.parametrize("tool", ["pretrain.py", "quickstart.py"])
def test_r46_help_does_not_import_tensorflow(tool):
    code = ("import runpy, sys; sys.argv = ['x', '--help']\n"
            f"try:\n    runpy.run_path({os.path.join(ROOT, 'tools', tool)!r}, run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('tensorflow' in sys.modules, 'keras' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage:" in proc.stdout and proc.stdout.strip().endswith("False False"), proc.stdout[-500:]
