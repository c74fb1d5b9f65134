"""R30, R31: a missing or damaged `checkpoint` state file (issue 21 items 2 and 3).

R30: state file deleted, or `ckpt-N.*` copied to a new directory without it -> resume from
the newest complete save found by listing the files; no complete save is deleted.
R31: state file with bad bytes, empty, or not in the text format -> a warning naming it,
then the same resume (fallback on), or `CheckpointCorruptError` naming it (fallback off).
"""

import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.training.checkpoints import CheckpointCorruptError, TrainingCheckpoint
from tests.training import tiny


def _batches():
    # A seeded shuffle: its buffer and position are part of what a checkpoint saves.
    return iter(tf.data.Dataset.range(1000).shuffle(16, seed=3))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A directory with saves at steps 2 and 4 (new weights and one input element each),
    and what a restore of each must give: `{step: (weights, next input element)}`."""
    directory = str(tmp_path_factory.mktemp("saved") / "run")
    model, batches = tiny.make_pretrainer(dropout=0.0), _batches()
    checkpoint = TrainingCheckpoint(directory, model, iterator=batches)
    rng, expected = np.random.default_rng(0), {}
    for step in (2, 4):
        for v in model.trainable_weights:
            v.assign(rng.normal(size=v.shape).astype("float32"))
        next(batches)
        checkpoint.step.assign(step)
        checkpoint.save()
        expected[step] = (tiny.numpy_weights(model), int(next(iter(tf.data.Dataset.range(1000).shuffle(
            16, seed=3).skip(step // 2)))))
    return directory, expected


def _copy(saved, tmp_path, steps=(2, 4), state=True):
    """The saved directory's files of `steps` (and its state file) in a new directory."""
    directory = str(tmp_path / "copy")
    os.mkdir(directory)
    for name in os.listdir(saved[0]):
        if (name == "checkpoint" and state) or name.split(".")[0] in {f"ckpt-{s}" for s in steps}:
            shutil.copy(os.path.join(saved[0], name), directory)
    return directory


def _fresh(directory, **kwargs):
    model, batches = tiny.make_pretrainer(seed=1, dropout=0.0), _batches()
    return model, batches, TrainingCheckpoint(directory, model, iterator=batches, **kwargs)


def _saves(directory):
    return sorted({n.split(".")[0] for n in os.listdir(directory) if n.startswith("ckpt-")},
                  key=lambda n: int(n.split("-")[1]))


def _assert_resumed(model, batches, expected):
    weights, next_element = expected
    assert all(np.array_equal(a, b) for a, b in zip(weights, tiny.numpy_weights(model)))
    assert int(next(batches)) == next_element


def test_r30_missing_state_file_resumes_from_newest_save_and_keeps_every_save(saved, tmp_path, caplog):
    directory = _copy(saved, tmp_path, state=False)
    os.mkdir(os.path.join(directory, "ckpt-7_temp"))  # scratch of a killed save
    open(os.path.join(directory, "ckpt-6.index"), "wb").write(b"x")  # a killed save: no data file
    model, batches, checkpoint = _fresh(directory)
    with caplog.at_level("WARNING"):
        assert checkpoint.restore() == 4  # was 0: training started over
    assert "No checkpoint state file" in caplog.text and "ckpt-4" in caplog.text
    _assert_resumed(model, batches, saved[1][4])
    checkpoint.step.assign(5)
    checkpoint.save()
    # Was ["ckpt-5"]: the complete saves 2 and 4 were deleted as "orphans". The killed
    # save's leftovers are gone.
    assert _saves(directory) == ["ckpt-2", "ckpt-4", "ckpt-5"]
    assert [os.path.basename(p) for p in checkpoint.checkpoints()] == ["ckpt-2", "ckpt-4", "ckpt-5"]
    # max_to_keep=3 rotates the oldest out, exactly as with the original state file.
    checkpoint.step.assign(6)
    checkpoint.save()
    assert _saves(directory) == ["ckpt-4", "ckpt-5", "ckpt-6"]


def test_r30_r4_missing_state_file_and_truncated_newest_save_falls_back(saved, tmp_path, caplog):
    directory = _copy(saved, tmp_path, state=False)
    data = os.path.join(directory, "ckpt-4.data-00000-of-00001")
    with open(data, "r+b") as f:
        f.truncate(os.path.getsize(data) // 2)
    model, batches, checkpoint = _fresh(directory)
    with caplog.at_level("WARNING"):
        assert checkpoint.restore() == 2
    assert "ckpt-4.data-00000-of-00001" in caplog.text
    _assert_resumed(model, batches, saved[1][2])


@pytest.mark.parametrize("content", [b"\xff\xfe\x00\x81garbage\n", b"", b"not a checkpoint state\n"],
                         ids=["bad_bytes", "empty", "not_text_format"])
def test_r31_damaged_state_file_is_named_and_the_newest_save_on_disk_restored(saved, tmp_path, caplog, content):
    directory = _copy(saved, tmp_path)
    state = os.path.join(directory, "checkpoint")
    open(state, "wb").write(content)

    # Fallback off: refused by name, before anything is loaded or written.
    with pytest.raises(CheckpointCorruptError, match=f"{state} is damaged.*ckpt-4"):
        _fresh(directory, fallback=False)
    assert open(state, "rb").read() == content

    model, batches, checkpoint = _fresh(directory)
    with caplog.at_level("WARNING"):
        assert checkpoint.restore() == 4  # was UnicodeDecodeError / "Invalid checkpoint state" / 0
    assert f"Checkpoint state file {state} is damaged" in caplog.text
    _assert_resumed(model, batches, saved[1][4])
    checkpoint.step.assign(5)
    checkpoint.save()
    assert _saves(directory) == ["ckpt-2", "ckpt-4", "ckpt-5"]


def test_r31_damaged_state_file_without_saves_starts_fresh(tmp_path):
    directory = tmp_path / "run"
    directory.mkdir()
    (directory / "checkpoint").write_bytes(b"\xff\xfe")
    model, _, checkpoint = _fresh(str(directory))
    assert checkpoint.restore() == 0
    checkpoint.step.assign(1)
    checkpoint.save()
    assert _saves(str(directory)) == ["ckpt-1"]
