"""The progress bar's ETA leaves out the graph build (issue 46): a fit's first step traces and
builds the training graph, and Keras' bar showed that time per step times the steps left."""

import re
import time

import keras

from keras_bert_zoo.training.callbacks import BuildAwareProgbar
from keras_bert_zoo.training.resumable_fit import fit_resumable
from tests.training import tiny

# The bar's bold time field: the ETA while steps remain ("3:20", "1:02:03" or "12s").
TIME_FIELD = re.compile(r"\x1b\[1m((?:\d+:)?\d+:\d\d|\d+s)\x1b\[0m")


def _seconds(field):
    if field.endswith("s"):
        return int(field[:-1])
    seconds = 0
    for part in field.split(":"):
        seconds = seconds * 60 + int(part)
    return seconds


def _etas(logger, capsys, build_seconds, steps=200, step_seconds=0.06):
    """Drives `logger` as `fit` does through a first step of `build_seconds` and a few
    quick ones; returns the ETAs it drew, in seconds."""
    logger.set_params({"verbose": 1, "epochs": 1, "steps": steps})
    logger.on_train_begin()
    logger.on_epoch_begin(0)
    for batch in range(5):
        logger.on_train_batch_begin(batch)
        time.sleep(build_seconds if batch == 0 else step_seconds)
        logger.on_train_batch_end(batch, {"loss": 1.0})
    return [_seconds(f) for f in TIME_FIELD.findall(capsys.readouterr().out)]


def test_first_step_build_time_is_not_in_the_eta(capsys):
    # Keras' own bar: step 1's two seconds, times 199 steps left.
    assert max(_etas(keras.callbacks.ProgbarLogger(), capsys, build_seconds=2.0)) >= 300
    logger = BuildAwareProgbar()
    etas = _etas(logger, capsys, build_seconds=2.0)
    assert etas and max(etas) < 100, etas  # the quick steps' rate: about 0.06 s x 196
    assert logger.build_seconds >= 2.0


def test_the_build_is_announced_and_timed(capsys):
    logger = BuildAwareProgbar()
    logger.set_params({"verbose": 1, "epochs": 1, "steps": 3})
    logger.on_train_begin()
    logger.on_epoch_begin(0)
    logger.on_train_batch_begin(0)
    assert "Building the training graph" in capsys.readouterr().out
    logger.on_train_batch_end(0, {"loss": 1.0})
    assert re.search(r"Built the training graph in \d+\.\ds", capsys.readouterr().out)


def test_fit_resumable_shows_the_build_apart_from_the_bar(tmp_path, capsys):
    model = tiny.make_pretrainer()
    fit_resumable(model, lambda i, n, b: tiny.synthetic_dataset(b, shard=(i, n)), 4, 3, str(tmp_path / "c"),
                  save_every=3, verbose=1)
    out = capsys.readouterr().out
    assert "Building the training graph" in out and "Built the training graph in" in out
    assert out.index("Built the training graph") < out.index("3/3")
