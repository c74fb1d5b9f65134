"""tools/tune.py: the paper's search on real polarity snippets with a tiny BERT preset."""

import json
import os

import numpy as np
import pytest

from tests.tools.test_finetune import _tiny_preset
from tools import tune

polarity = pytest.importorskip("keras_bert_zoo.data.polarity")


@pytest.fixture(scope="module")
def polarity_files(tmp_path_factory):
    try:
        texts, labels = polarity.read_polarity("train")
        dev_texts, dev_labels = polarity.read_polarity("dev")
    except FileNotFoundError as e:
        pytest.skip(str(e))
    root = tmp_path_factory.mktemp("polarity")
    rng = np.random.default_rng(0)
    paths = []
    for name, (t, y, n) in {"train": (texts, labels, 32), "dev": (dev_texts, dev_labels, 32)}.items():
        rows = rng.choice(len(t), n, replace=False)
        path = str(root / f"{name}.tsv")
        with open(path, "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(f"{t[i]}\t{y[i]}\n" for i in rows))
        paths.append(path)
    tokens = polarity_vocabulary(texts)
    return paths, _tiny_preset(root, tokens=tokens)


def polarity_vocabulary(texts, size=300):
    """The most frequent lower-cased words of the snippets (a whole-word WordPiece vocabulary)."""
    import collections
    import re

    counts = collections.Counter(w for t in texts[:3000] for w in re.findall(r"[a-z]+|[^\sa-z]", t.lower()))
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [w for w, _ in counts.most_common(size)]


def _argv(paths, preset, out, *more):
    return ["--task", "sst2", "--train-file", paths[0], "--dev-file", paths[1], "--preset", preset,
            "--output-dir", str(out), "--sequence-length", "32", "--seed", "5", "--no-progress", *more]


@pytest.mark.slow
def test_tune_runs_the_grid_with_restarts_and_keeps_the_best(polarity_files, tmp_path):
    paths, preset = polarity_files
    # Two trials: the flags reach the search (the order of a larger grid with restarts, and its resume,
    # are tests/finetuning/test_tuning.py's, on a model that trains in a fraction of the time).
    grid = '{"learning_rate": [1e-3], "batch_size": [16], "epochs": [1]}'
    result = tune.main(_argv(paths, preset, tmp_path / "search", "--grid", grid, "--restarts", "2"))
    trials = result["trials"]
    assert [(t["learning_rate"], t["restart"]) for t in trials] == [(1e-3, 0), (1e-3, 1)]
    best = max(trials, key=lambda t: t["accuracy"])
    assert result["best"] == best and [t["best"] for t in trials].count(True) == 1
    for name in ("results.md", "heatmap.png", "results.json"):
        assert os.path.getsize(tmp_path / "search" / name) > 0
    with open(tmp_path / "search" / "results.json", encoding="utf-8") as f:
        assert json.load(f)["best"]["accuracy"] == best["accuracy"]
    # The kept preset is the best trial's model: it scores the best trial's dev accuracy.
    from keras_bert_zoo.data.glue import read_glue
    from keras_bert_zoo.metrics.glue import glue_metrics
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    dev_x, dev_y = read_glue("sst2", paths[1])
    model = BertClassifier.from_preset(str(tmp_path / "search" / "preset"))
    assert glue_metrics("sst2", dev_y, model.predict(dev_x, verbose=0))["accuracy"] == pytest.approx(best["accuracy"])


def test_tune_refuses_bad_grids_and_grid_flags_before_any_trial(polarity_files, tmp_path, capsys):
    paths, preset = polarity_files
    for more, message in [(["--grid", '{"learning_rate": []}'], "--grid"),
                          (["--grid", "huge"], "--grid"),
                          (["--learning-rate", "1e-4"], "the grid sets these"),
                          (["--export-dir", "a", "--export", "b"], "name the same thing here")]:
        with pytest.raises(SystemExit):
            tune.main(_argv(paths, preset, tmp_path / "bad", *more))
        assert message in capsys.readouterr().err
    from keras_bert_zoo.finetuning.config import FinetuningConfig
    from keras_bert_zoo.finetuning.search.run import run_tuning

    config = FinetuningConfig("sst2", paths[0], paths[1], preset, str(tmp_path / "bad"), progress=False)
    with pytest.raises(ValueError, match="not the objective 'pearson'"):
        run_tuning(config, grid="small", objective="pearson")
    exporting = FinetuningConfig("sst2", paths[0], paths[1], preset, str(tmp_path / "bad"), progress=False,
                                 export_dir=str(tmp_path / "served"))
    with pytest.raises(ValueError, match=r"a search exports its best trial with `export`"):
        run_tuning(exporting, grid="small")
    assert not os.path.exists(tmp_path / "bad")


def _one_trial(paths, preset, out, *more):
    grid = '{"learning_rate": [1e-3], "batch_size": [16], "epochs": [1]}'
    return _argv(paths, preset, out, "--grid", grid, *more)


@pytest.mark.slow
def test_tune_exports_the_best_model_and_keeps_it_on_resume(polarity_files, tmp_path):
    import tensorflow as tf
    import tensorflow_text  # noqa: F401 (the export's text ops)

    from keras_bert_zoo.models.bert_classifier import BertClassifier

    paths, preset = polarity_files
    served = tmp_path / "served" / "1"
    argv = _one_trial(paths, preset, tmp_path / "search", "--export", str(served))
    result = tune.main(argv)
    assert result["export"] == str(served)
    sentence = "a gripping , funny and moving film"
    expected = BertClassifier.from_preset(str(tmp_path / "search" / "preset")).predict([sentence], verbose=0)

    def answer():
        serve = tf.saved_model.load(str(served)).signatures["serving_default"]
        return serve(text=tf.constant([sentence]))

    out = answer()
    np.testing.assert_allclose(out["probabilities"].numpy(), tf.nn.softmax(expected).numpy(), atol=1e-5, rtol=0)
    assert out["label"].numpy()[0].decode() == ["negative", "positive"][int(np.argmax(expected))]
    # Resumed (all trials done): no trial runs again, the export is rewritten from the same best preset
    # (named with finetune.py's --export-dir this time: the same flag here).
    before = os.path.getmtime(served / "saved_model.pb")
    again = tune.main(_one_trial(paths, preset, tmp_path / "search", "--export-dir", str(served)))
    assert again["trials"] == result["trials"] and os.path.getmtime(served / "saved_model.pb") >= before
    np.testing.assert_allclose(answer()["probabilities"].numpy(), out["probabilities"].numpy(), atol=1e-6, rtol=0)


@pytest.mark.heavy  # `make test-heavy`: a precision variant of the one-trial search (bf16 fits run in make test)
def test_tune_under_bfloat16_reports_a_finite_dev_metric(polarity_files, tmp_path):
    paths, preset = polarity_files
    result = tune.main(_one_trial(paths, preset, tmp_path / "bf16", "--precision", "mixed_bfloat16"))
    assert len(result["trials"]) == 1 and 0.0 <= result["best"]["accuracy"] <= 1.0
    # The trials' tasks are built in bf16 (the kept preset reloads in the caller's policy).
    from keras_bert_zoo.finetuning.config import FinetuningConfig
    from keras_bert_zoo.finetuning.run import task_kind

    config = FinetuningConfig("sst2", paths[0], paths[1], preset, str(tmp_path / "k"),
                              sequence_length=32, precision="mixed_bfloat16")
    kind = task_kind(config, True, True)
    kind.read()
    assert kind.build(1e-3, 0).dtype_policy.name == "mixed_bfloat16"


@pytest.mark.heavy  # `make test-heavy`: MirroredStrategy fits run in make test (classifier, pretraining)
def test_tune_under_mirrored_strategy_on_two_logical_cpus(polarity_files, tmp_path):
    import subprocess
    import sys

    paths, preset = polarity_files
    script = os.path.join(os.path.dirname(__file__), "tune_on_logical_cpus.py")
    argv = _one_trial(paths, preset, tmp_path / "mirrored", "--strategy", "mirrored")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=root)
    proc = subprocess.run([sys.executable, script, "2", *argv], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads([x for x in proc.stdout.splitlines() if x.startswith("RESULT ")][-1][7:])
    assert result["devices"] == 2 and 0.0 <= result["best"]["accuracy"] <= 1.0
    assert os.path.getsize(tmp_path / "mirrored" / "results.md") > 0


def test_tune_rerun_of_another_experiment_is_refused_before_reading_naming_the_change(tmp_path, monkeypatch):
    """Issue 45: a rerun with other training data or --sequence-length reused the old trials, and
    results.json recorded neither. Now the tuner folder records the experiment, a rerun that
    changes it is refused before anything is read, and --overwrite starts a new search."""
    from keras_bert_zoo.finetuning import kind as finetuning_kind
    from keras_bert_zoo.utils.output_dirs import read_run_record
    from tests.tools.test_finetune import _sst2

    train, dev, _ = _sst2(tmp_path)
    preset = _tiny_preset(tmp_path)
    out = tmp_path / "search"

    def argv(length="16", train_file=train, output=out, *more):
        return ["--task", "sst2", "--train-file", train_file, "--dev-file", dev, "--preset", preset, "--output-dir",
                str(output), "--sequence-length", length, "--no-progress", "--grid",
                '{"learning_rate": [1e-3], "batch_size": [4], "epochs": [1]}', *more]

    result = tune.main(argv())
    saved = json.load(open(out / "results.json"))
    assert saved["experiment"]["sequence_length"] == 16 and saved["experiment"]["train_file"]["name"] == "sst2_train.tsv"
    assert read_run_record(out)["tool"] == "tune" and "tuner" in read_run_record(out)["files"]
    other_train = tmp_path / "more.tsv"
    other_train.write_text(open(train).read() + "a fine film\t1\n")

    def refuse(*args, **kwargs):
        raise AssertionError("the search read its data")

    read = finetuning_kind.TaskKind.read
    for kind in (finetuning_kind.TaskKind, *finetuning_kind.TaskKind.__subclasses__()):
        monkeypatch.setattr(kind, "read", refuse, raising=False)
    with pytest.raises(ValueError, match=r"holds a search of another experiment: sequence_length: 16 -> 24 \(the"):
        tune.main(argv("24"))
    with pytest.raises(ValueError, match=r"train_file: sst2_train.tsv \(sha256 \w+\) -> more.tsv \(sha256 \w+\)"):
        tune.main(argv("16", str(other_train)))
    # A fine-tuning run's folder is not a search's.
    finetuned = tmp_path / "finetuned"
    finetuned.mkdir()
    (finetuned / "run_files.json").write_text(json.dumps({"tool": "finetune", "status": "complete",
                                                          "files": ["results.json"]}))
    (finetuned / "results.json").write_text("{}")
    with pytest.raises(ValueError, match=r"holds a previous finetune run \(results.json; .*--overwrite"):
        tune.main(argv("16", train, finetuned))
    monkeypatch.undo()
    assert finetuning_kind.TaskKind.read is read
    again = tune.main(argv("24", train, out, "--overwrite"))
    assert len(again["trials"]) == 1 and again["trials"] != result["trials"]
    assert json.load(open(out / "results.json"))["experiment"]["sequence_length"] == 24
