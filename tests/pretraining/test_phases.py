"""Two-phase pretraining (paper: 90% of steps at 128, 10% at 512) and starting from a preset's heads."""

import logging
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_bert_zoo.presets import sources
from keras_bert_zoo.pretraining import run as pretraining_run
from keras_bert_zoo.pretraining.config import PretrainingConfig
from keras_bert_zoo.pretraining.run import run_pretraining

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

_REAL_FIT = pretraining_run.fit_resumable
LEN1, LEN2 = 16, 32  # phase lengths; the model's position table has LEN2 rows
SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=LEN2)


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
    args, kwargs = _kwargs(tmp_path, corpus, eval_every=2, eval_batches=1, log_dir=str(tmp_path / "logs"))
    with pytest.raises(_Stopped):
        run_pretraining(PretrainingConfig(*args, **kwargs))
    second = {}
    _record_phases(monkeypatch, second)
    result = run_pretraining(PretrainingConfig(*args, **kwargs))
    assert result["step"] == 6 and result["resumed_from"] == 4
    assert (2, "start") in second and (1, "start") not in second  # phase 1 was complete
    assert [r["step"] for r in result["held_out"]] == [6]  # global steps in phase 2 (its own: 2)
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
    located, locate = [], sources.locate
    monkeypatch.setattr(sources, "locate", lambda preset: located.append(preset) or locate(preset))
    args2, kwargs2 = _kwargs(tmp_path, corpus, name="from_preset", preset=args[0], load_weights=True,
                             size={}, vocabulary=None, steps=1, phase2_steps=0, phase2_sequence_length=None)
    again = run_pretraining(PretrainingConfig(*args2, **kwargs2))
    assert again["heads_loaded"] == ["mlm", "nsp"]
    assert located == [args[0]]  # the preset opened once: shape, vocabulary, backbone and heads ask it
    trained = {v.path: np.array(v) for v in result["model"].weights}
    _assert_same(fresh[(1, "start")], trained, "from_preset start vs written model")


def _config(preset, load_weights=True):
    return PretrainingConfig("o", "c", tfrecords="unused", size={}, objective="mlm", preset=preset,
                             precision="float32", nsp=True, load_weights=load_weights, learning_rate=1e-4,
                             warmup_steps=1, steps=10)


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

    backbone = BertBackbone(vocabulary_size=30, **SIZE)
    directory = backbone.save_to_preset(str(tmp_path / "bare"))
    with caplog.at_level(logging.INFO):
        model, heads = pretraining_run._build_model(_config(directory), None)
    assert heads == []
    assert any("no mlm/nsp head" in r.getMessage() for r in caplog.records), caplog.text
    np.testing.assert_array_equal(np.array(model.backbone.token_embedding.embeddings),
                                  np.array(backbone.token_embedding.embeddings))


def _cli_argv(tmp_path, corpus, name, extra=()):
    text, vocab = corpus
    return ["--train-files", text, "--vocabulary", vocab, "--num-layers", "2", "--num-heads", "2",
            "--hidden-dim", "16", "--intermediate-dim", "32", "--max-sequence-length", str(LEN2),
            "--sequence-length", str(LEN1), "--max-predictions", "3", "--steps", "7", "--phase2-steps", "4",
            "--phase2-sequence-length", str(LEN2), "--phase2-batch-size", "2", "--warmup-steps", "2",
            "--batch-size", "4", "--learning-rate", "1e-2", "--save-every", "2", "--strategy", "cpu",
            "--checkpoint-dir", str(tmp_path / name / "ckpt"), "--output-dir", str(tmp_path / name / "preset"),
            "--no-progress", *extra]


def _run_cli(argv, kill_after=None):
    own = ["--kill-in-phase2-after", str(kill_after)] if kill_after else []
    env = dict(os.environ, KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run([sys.executable, os.path.join(ROOT, "tests", "pretraining", "run_phased_pretrain.py"),
                           *own, "--", *argv], capture_output=True, text=True, env=env, timeout=600)


def _checkpoint_values(directory):
    import tensorflow as tf

    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(directory))
    names = [n for n, _ in tf.train.list_variables(directory) if "iterator" not in n and "CHECKPOINT" not in n]
    assert any("optimizer" in n for n in names) and any("step" in n for n in names), names
    return {n: reader.get_tensor(n) for n in names}


@pytest.mark.heavy  # `make test-heavy` (~2 min, 3 CLI processes); kill/resume stays in make test (test_resume.py)
def test_cli_two_phases_killed_in_phase_two_ends_bitwise_equal(tmp_path, corpus):
    from keras_bert_zoo.presets.loading import read_preset_tensors

    whole = _run_cli(_cli_argv(tmp_path, corpus, "whole"))
    assert whole.returncode == 0, whole.stderr[-3000:]
    assert "done 7 0" in whole.stdout
    # Killed after phase-2 step 3 (global step 6; last save at phase-2 step 2), then re-run.
    argv = _cli_argv(tmp_path, corpus, "killed")
    killed = _run_cli(argv, kill_after=3)
    assert killed.returncode == -9, (killed.returncode, killed.stderr[-3000:])
    assert not os.path.exists(tmp_path / "killed" / "preset")
    resumed = _run_cli(argv, kill_after=3)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "done 7 5" in resumed.stdout  # global step 5 = phase 1 (3) + phase-2 checkpoint 2
    expected, _ = read_preset_tensors(str(tmp_path / "whole" / "preset"))
    actual, _ = read_preset_tensors(str(tmp_path / "killed" / "preset"))
    assert any(n.startswith("cls/") for n in expected)  # heads are in the comparison
    _assert_same(actual, expected, "preset after kill + resume")
    # Optimizer slots and the step too, from the final phase-2 checkpoints.
    _assert_same(_checkpoint_values(str(tmp_path / "killed" / "ckpt" / "phase2")),
                 _checkpoint_values(str(tmp_path / "whole" / "ckpt" / "phase2")), "phase-2 checkpoint")


@pytest.mark.parametrize("overrides, match", [
    (dict(phase2_sequence_length=64), r"phase2_sequence_length`=64 is longer than the model's max_sequence_length=32"),
    (dict(sequence_length=40, phase2_sequence_length=None), r"`sequence_length`=40 is longer"),
    (dict(phase2_steps=6), r"phase2_steps.*\[0, steps\).*phase2_steps=6, steps=6"),
    (dict(phase2_steps=-1), r"phase2_steps=-1"),
    (dict(phase2_steps=0), r"\['phase2_sequence_length'\] only apply to phase 2"),
    (dict(phase2_batch_size=0), r"`phase2_batch_size` must be a positive integer.*=0"),
    (dict(phase2_tfrecords="x.tfrecord"), r"`phase2_tfrecords` needs TFRecord input"),
    (dict(train_files=None, tfrecords="x.tfrecord", phase2_sequence_length=None), r"pass `phase2_tfrecords`"),
    (dict(objective="ltr", nsp=False, eval_every=2), r"objective='ltr'.*eval_every=2"),
])
def test_bad_phase_arguments_are_refused_before_training(tmp_path, corpus, overrides, match):
    args, kwargs = _kwargs(tmp_path, corpus, **overrides)
    with pytest.raises(ValueError, match=match):
        run_pretraining(PretrainingConfig(*args, **kwargs))
    assert not os.path.exists(args[1])  # nothing started


def test_cli_refuses_phase_two_as_long_as_the_whole_run(tmp_path, corpus):
    from tools import pretrain

    argv = _cli_argv(tmp_path, corpus, "bad")
    argv[argv.index("--phase2-steps") + 1] = "7"
    with pytest.raises(ValueError, match=r"phase2_steps=7, steps=7"):
        pretrain.main(argv)


@pytest.mark.slow
@pytest.mark.parametrize("flags, outputs", [(["--no-nsp"], {"mlm_logits"}),
                                            (["--objective", "ltr"], {"lm_logits"})])
def test_cli_ablations_train_a_few_steps(tmp_path, corpus, flags, outputs):
    from tools import pretrain

    argv = _cli_argv(tmp_path, corpus, "ablation", flags)
    argv[argv.index("--steps") + 1], argv[argv.index("--phase2-steps") + 1] = "3", "1"
    result = pretrain.main(argv)
    model = result["model"]
    assert result["step"] == 3 and model.nsp_head is None and set(model.output) == outputs
    assert model.backbone.causal == (flags[-1] == "ltr")
    assert int(model.optimizer.iterations.numpy()) == 3


def test_left_to_right_batches_get_the_masked_tokens_back():
    x = {"token_ids": np.array([[2, 4, 7, 4, 3], [2, 9, 4, 3, 0]], "int32"),
         "segment_ids": np.zeros((2, 5), "int32"), "padding_mask": np.array([[1] * 5, [1, 1, 1, 1, 0]], "int32"),
         "mask_positions": np.array([[1, 3], [2, 0]], "int32")}
    y = {"mlm_ids": np.array([[5, 6], [8, 0]], "int32"), "mlm_weights": np.array([[1, 1], [1, 0]], "float32"),
         "nsp_labels": np.array([0, 1], "int32")}
    new_x, new_y = pretraining_run._drop_masking(x, y)
    assert sorted(new_x) == ["padding_mask", "segment_ids", "token_ids"]
    np.testing.assert_array_equal(new_x["token_ids"], [[2, 5, 7, 6, 3], [2, 9, 8, 3, 0]])
    assert new_y is y


@pytest.mark.slow
def test_tfrecord_input_runs_phase_two_on_its_own_records(tmp_path, monkeypatch):
    import tensorflow as tf

    from tests.training import tiny

    x, y = next(iter(tiny.synthetic_dataset(8)))
    paths = []
    for length in (tiny.SEQ, 2 * tiny.SEQ):  # phase 2: the same examples padded to twice the length
        pad = [[0, 0], [0, length - tiny.SEQ]]
        features = {k: np.pad(np.asarray(v), pad) if k != "mask_positions" else np.asarray(v)
                    for k, v in x.items()}
        features.update({k: np.asarray(v) for k, v in y.items()})
        paths.append(tiny.write_tfrecord(tmp_path / f"len{length}.tfrecord", features))
    vocab = tiny.write_placeholder_vocab(tmp_path / "vocab.txt")
    lengths = []
    real = pretraining_run._make_dataset_fn

    def spy(a, tokenizer, phase, **kwargs):  # records the length of each phase's batches
        fn = real(a, tokenizer, phase, **kwargs)

        def dataset_fn(*args, **kwargs):
            ds = fn(*args, **kwargs)
            lengths.append(ds.element_spec[0]["token_ids"].shape[1])
            return ds

        return dataset_fn

    monkeypatch.setattr(pretraining_run, "_make_dataset_fn", spy)
    result = run_pretraining(PretrainingConfig(
        str(tmp_path / "preset"), str(tmp_path / "ckpt"), tfrecords=paths[0], phase2_tfrecords=paths[1],
        vocabulary=str(vocab), size=dict(tiny.TINY, max_sequence_length=2 * tiny.SEQ), strategy="cpu",
        steps=3, phase2_steps=1, warmup_steps=1, batch_size=4, save_every=3, progress=False))
    assert result["step"] == 3 and lengths == [tiny.SEQ, 2 * tiny.SEQ]
    assert tf.train.latest_checkpoint(str(tmp_path / "ckpt" / "phase2")).endswith("-1")
    assert tf.train.latest_checkpoint(str(tmp_path / "ckpt")).endswith("-2")
