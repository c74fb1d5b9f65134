"""Two-phase pretraining (paper: 90% of steps at 128, 10% at 512) and starting from a preset's heads."""

import logging
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bert_zoo.training import pretraining_run
from keras_bert_zoo.training.pretraining_run import run_pretraining

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "big", "small", "red", "ran", "home"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
_REAL_FIT = pretraining_run.fit_resumable
LEN1, LEN2 = 16, 32  # phase lengths; the model's position table has LEN2 rows
SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=LEN2)


@pytest.fixture
def corpus(tmp_path):
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(30):  # documents of 2-4 sentences
        for _ in range(int(rng.integers(2, 5))):
            lines.append(" ".join(rng.choice(WORDS, int(rng.integers(3, 8)))) + " .")
        lines.append("")
    text = tmp_path / "corpus.txt"
    text.write_text("\n".join(lines) + "\n")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + WORDS + ["."]) + "\n")
    return str(text), str(vocab)


def _kwargs(tmp_path, corpus, name="run", **overrides):
    text, vocab = corpus
    kwargs = dict(train_files=text, vocabulary=vocab, size=dict(SIZE), strategy="cpu", steps=6,
                  phase2_steps=2, warmup_steps=2, batch_size=4, learning_rate=1e-2, sequence_length=LEN1,
                  max_predictions=3, phase2_sequence_length=LEN2, save_every=2, progress=False)
    kwargs.update(overrides)
    return [str(tmp_path / name / "preset"), str(tmp_path / name / "ckpt")], kwargs


class _Snapshots(keras.callbacks.Callback):
    """Copies of every weight as each phase's first step starts and as each phase ends."""

    def __init__(self, record, phase):
        super().__init__()
        self.record, self.phase = record, phase

    def _take(self, key):
        self.record[(self.phase, key)] = {v.path: np.array(v) for v in self.model.weights}
        self.record[(self.phase, key, "iterations")] = int(self.model.optimizer.iterations.numpy())

    def on_train_batch_begin(self, batch, logs=None):
        if batch == 0:
            self._take("start")

    def on_train_end(self, logs=None):
        self._take("end")


class _Stopped(Exception):
    """A run stopped between its phases (the process ended there)."""


def _record_phases(monkeypatch, record, fail_in_phase2=False):
    """Wraps `fit_resumable` as `run_pretraining` calls it, adding `_Snapshots`."""
    def wrapped(model, dataset_fn, batch, steps, checkpoint_dir, callbacks=(), **kwargs):
        phase = 2 if os.path.basename(checkpoint_dir) == "phase2" else 1
        if phase == 2 and fail_in_phase2:
            raise _Stopped("stopped between the phases")
        callbacks = [*callbacks, _Snapshots(record, phase)]
        return _REAL_FIT(model, dataset_fn, batch, steps, checkpoint_dir, callbacks=callbacks, **kwargs)

    monkeypatch.setattr(pretraining_run, "fit_resumable", wrapped)


def _assert_same(actual, expected, what):
    assert sorted(actual) == sorted(expected), what
    for path, value in expected.items():
        np.testing.assert_array_equal(actual[path], value, err_msg=f"{what}: {path}")


def _decay_only_residual(after, before):
    """Relative residual of `after` against its best scalar multiple of `before`."""
    scale = float((after * before).sum() / (before * before).sum())
    return float(np.linalg.norm(after - scale * before) / np.linalg.norm(after)), scale


def _position_table(weights):
    tables = [v for p, v in weights.items() if "position_embeddings" in p]
    assert len(tables) == 1, [p for p in weights if "position" in p]
    return tables[0]


@pytest.mark.slow
def test_phase_two_continues_phase_one_and_heads_survive_a_preset(tmp_path, corpus, monkeypatch):
    # Stopped between the phases, then re-run: phase 2 resumes from phase 1's checkpoint.
    first = {}
    _record_phases(monkeypatch, first, fail_in_phase2=True)
    args, kwargs = _kwargs(tmp_path, corpus)
    with pytest.raises(_Stopped):
        run_pretraining(*args, **kwargs)
    second = {}
    _record_phases(monkeypatch, second)
    result = run_pretraining(*args, **kwargs)
    assert result["step"] == 6 and result["resumed_from"] == 4
    assert (2, "start") in second and (1, "start") not in second  # phase 1 was complete
    # (a) Phase 2 at step 0 is phase 1's final model, every weight (backbone and heads),
    # and the one schedule continues (optimizer step 4 of 6).
    phase1_end = first[(1, "end")]
    assert any("mlm_head" in p for p in phase1_end) and any("nsp_head" in p for p in phase1_end)
    _assert_same(second[(2, "start")], phase1_end, "phase-2 start vs phase-1 end")
    assert second[(2, "start", "iterations")] == 4 and second[(2, "end", "iterations")] == 6
    # (b) One LEN2-row position table: rows >= LEN1 only decayed in phase 1, trained in phase 2.
    init, mid, final = (_position_table(w) for w in (first[(1, "start")], phase1_end, second[(2, "end")]))
    assert init.shape == (LEN2, SIZE["hidden_dim"])
    residual, scale = _decay_only_residual(mid[LEN1:], init[LEN1:])
    assert residual < 1e-6 and 0.9 < scale < 1.0, (residual, scale)
    assert _decay_only_residual(mid[:LEN1], init[:LEN1])[0] > 1e-3  # trained rows
    assert _decay_only_residual(final[LEN1:], mid[LEN1:])[0] > 1e-3  # now trained too

    # Heads carried over by a new run from the written preset (the original's recipe).
    fresh = {}
    _record_phases(monkeypatch, fresh)
    args2, kwargs2 = _kwargs(tmp_path, corpus, name="from_preset", preset=args[0], load_weights=True,
                             size={}, vocabulary=None, steps=1, phase2_steps=0, phase2_sequence_length=None)
    again = run_pretraining(*args2, **kwargs2)
    assert again["heads_loaded"] == ["mlm", "nsp"]
    trained = {v.path: np.array(v) for v in result["model"].weights}
    _assert_same(fresh[(1, "start")], trained, "from_preset start vs written model")


def _config(preset, load_weights=True):
    return dict(size={}, objective="mlm", preset=preset, precision="float32", nsp=True,
                load_weights=load_weights, learning_rate=1e-4, warmup_steps=1, steps=10)


@pytest.mark.parametrize("layout", ["hf", "google"])
def test_start_loads_google_and_hf_pretraining_heads(tmp_path, layout):
    from tests.weights import weights_testlib as lib

    preset = lib.fixture_dir("gelu")
    if layout == "google":
        preset = lib.make_google_dir("gelu", str(tmp_path / "google"))
    hf = lib.hf_tensors("gelu")
    model, heads = pretraining_run._build_model(_config(preset), None)
    assert heads == ["mlm", "nsp"]
    np.testing.assert_allclose(np.array(model.nsp_head.kernel), hf["cls.seq_relationship.weight"].T)
    np.testing.assert_allclose(np.array(model.mlm_head.output_bias), hf["cls.predictions.bias"])
    np.testing.assert_allclose(np.array(model.mlm_head.transform_dense.kernel),
                               hf["cls.predictions.transform.dense.weight"].T)
    np.testing.assert_allclose(np.array(model.backbone.token_embedding.embeddings),
                               hf["bert.embeddings.word_embeddings.weight"])


def test_start_from_a_bare_backbone_leaves_heads_random_and_says_so(tmp_path, caplog):
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.weights.loading import save_to_preset

    backbone = BertBackbone(vocabulary_size=30, **SIZE)
    directory = save_to_preset(backbone, str(tmp_path / "bare"))
    with caplog.at_level(logging.INFO):
        model, heads = pretraining_run._build_model(_config(directory), None)
    assert heads == []
    assert any("no mlm/nsp head" in r.getMessage() for r in caplog.records), caplog.text
    np.testing.assert_array_equal(np.array(model.backbone.token_embedding.embeddings),
                                  np.array(backbone.token_embedding.embeddings))
