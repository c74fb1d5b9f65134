"""What a `tools/finetune.py` run leaves besides its scores (issue #58): TensorBoard logs and a
curves PNG beside results.json, one clean dev line per epoch with and without the progress bar,
a model card in the preset that `from_preset` reads back, and `export_dir` recorded once."""

import glob
import os

import numpy as np
import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.tools.test_finetune import _argv, _sst2, _tiny_preset
from tools import finetune

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    return _tiny_preset(tmp_path_factory.mktemp("presets"))


def _scalars(log_dir):
    events = EventAccumulator(log_dir, size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    tags = events.Tags()
    # TF2 summaries are tensors; older writers' are scalars.
    if tags.get("tensors"):
        return {tag: [float(np.asarray(__import__("tensorflow").make_ndarray(e.tensor_proto))) for e in events.Tensors(tag)]
                for tag in tags["tensors"]}
    return {tag: [e.value for e in events.Scalars(tag)] for tag in tags.get("scalars", [])}


def test_a_run_writes_tensorboard_logs_curves_and_a_card(tmp_path, preset, capsys):
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    train, dev, _ = _sst2(tmp_path)
    out = str(tmp_path / "run")
    argv = [a for a in _argv("sst2", train, dev, preset, out, "--epochs", "2") if a != "--no-progress"]
    argv[argv.index("--epochs") + 1] = "2"
    results = finetune.main(argv)
    printed = capsys.readouterr().out
    # One clean line per epoch: the bar's line ends first, and the bar does not repeat the dev metrics.
    lines = printed.splitlines()
    dev_lines = [line for line in lines if "dev: accuracy=" in line]
    assert [line.split(" dev:")[0] for line in dev_lines] == ["epoch 1", "epoch 2"]
    assert "dev_accuracy" not in printed
    accuracies = [row["accuracy"] for row in results["dev_per_epoch"]]
    assert dev_lines == [f"epoch {i + 1} dev: accuracy={a:.4f}" for i, a in enumerate(accuracies)]
    # TensorBoard: training loss, learning rate and dev accuracy per epoch.
    train_logs = os.path.join(out, "tensorboard", "train")
    assert glob.glob(os.path.join(train_logs, "events.out.tfevents.*"))
    scalars = _scalars(train_logs)
    assert {"epoch_loss", "epoch_learning_rate", "epoch_dev_accuracy"} <= set(scalars)
    assert scalars["epoch_dev_accuracy"] == pytest.approx(accuracies)
    assert len(scalars["epoch_loss"]) == 2 and scalars["epoch_learning_rate"][-1] == pytest.approx(0.0, abs=1e-9)
    # The curves beside results.json: a real PNG.
    png = os.path.join(out, "curves.png")
    assert open(png, "rb").read(8) == PNG_MAGIC
    import matplotlib.image

    height, width = matplotlib.image.imread(png).shape[:2]
    assert height > 100 and width > 300
    # The card: the run's files, scores beside the baseline, precision, versions, the command.
    card = open(os.path.join(out, "preset", "README.md"), encoding="utf-8").read()
    data = results["data"]["train_file"]
    assert f"| --train-file {data['path']} | 12 | `{data['sha256']}` |" in card
    assert f"| accuracy | {results['dev']['accuracy']:.4f} | {results['baseline']['dev']['accuracy']:.4f} |" in card
    assert results["command"].startswith("python tools/finetune.py --task sst2 --train-file ")
    assert results["command"] in card and "Saved in `float32`" in card
    assert 'pipeline_tag: "text-classification"' in card
    reloaded = BertClassifier.from_preset(os.path.join(out, "preset"))
    assert reloaded.model_card["metrics"] == results["dev"]
    assert reloaded.model_card["made_by"] == {"command": results["command"]}
    assert {"tensorboard", "curves.png", "results.json", "preset"} <= set(os.listdir(out))
    assert "export_dir" not in results["config"]


def test_no_progress_keeps_one_dev_line_per_epoch(tmp_path, preset, capsys):
    train, dev, _ = _sst2(tmp_path)
    argv = _argv("sst2", train, dev, preset, str(tmp_path / "quiet"), "--epochs", "2")
    argv[argv.index("--epochs") + 1] = "2"
    results = finetune.main(argv)
    lines = capsys.readouterr().out.splitlines()
    accuracies = [row["accuracy"] for row in results["dev_per_epoch"]]
    assert lines[0].startswith("precision: float32")
    assert lines[1:3] == [f"epoch {i + 1} dev: accuracy={a:.4f}" for i, a in enumerate(accuracies)]
    assert lines[3].startswith("sst2: dev accuracy=")
    assert all(line.startswith("warning: ") for line in lines[4:])  # e.g. every dev prediction one class
