"""results.json says how a run was made and what it compares with; bad lengths and one-class runs are named."""

import dataclasses
import hashlib
import logging

import numpy as np
import pytest

from keras_bert_zoo.finetuning import kind as finetuning_kind
from keras_bert_zoo.finetuning.config import FinetuningConfig, tagging_recipe
from keras_bert_zoo.finetuning.results_file import TIME_KEYS, file_record, one_class_warning, run_record
from keras_bert_zoo.metrics.baselines import all_o_baseline, empty_answer_baseline, glue_baseline
from keras_bert_zoo.metrics.glue import glue_metrics
from keras_bert_zoo.metrics.squad import squad_v2_metrics


@pytest.fixture
def files(tmp_path):
    train, dev = tmp_path / "train.tsv", tmp_path / "dev.tsv"
    train.write_text("sentence\tlabel\na good film\t1\n", encoding="utf-8")
    dev.write_text("sentence\tlabel\na bad film\t0\n", encoding="utf-8")
    return str(train), str(dev)


def test_baselines_are_scored_with_the_tasks_own_metric():
    y = np.array([1, 1, 0, 1])
    majority = glue_baseline("mrpc", y, ["not_equivalent", "equivalent"])
    assert "'equivalent' (3 of 4 rows)" in majority["predicts"]
    assert majority["dev"] == glue_metrics("mrpc", y, np.ones(4, "int64"))
    assert glue_baseline("cola", y)["dev"]["matthews_corrcoef"] == 0.0
    swag = glue_baseline("swag", np.array([0, 3, 1, 0]))
    assert "first ending" in swag["predicts"] and swag["dev"] == {"accuracy": 0.5}
    assert np.isnan(glue_baseline("stsb", np.array([1.0, 2.5, 4.0]))["dev"]["pearson"])  # a constant: undefined
    tags = [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]
    assert all_o_baseline(tags)["dev"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    gold = {"q1": ["Zürich"], "q2": [], "q3": [], "q4": ["John Smith"]}
    empty = empty_answer_baseline(gold, "v2.0")
    official = squad_v2_metrics({q: "" for q in gold}, gold)
    assert empty["dev"] == {k: official[k] for k in ("exact", "f1", "HasAns_f1", "NoAns_f1")}
    assert empty["dev"]["f1"] == 50.0 and empty["dev"]["NoAns_f1"] == 100.0
    assert empty_answer_baseline({"q1": ["Zürich"]}, "v1.1")["dev"] == {"exact_match": 0.0, "f1": 0.0}


def test_one_class_predictions_are_named_with_the_levers():
    note = one_class_warning({"O": 40})
    assert note.startswith("all 40 dev predictions are class 'O'")
    for lever in ("--epochs", "--batch-size", "--learning-rate"):
        assert lever in note
    assert one_class_warning({"O": 38, "B-PER": 2}) is None


def test_run_record_holds_the_resolved_config_data_baseline_versions_and_time_keys(files):
    train, dev = files
    config = FinetuningConfig("sst2", train, dev, "some_preset", "out", skip_malformed=True)
    data = {"dev_file": file_record(config, "dev_file", "rows", 1, skipped=2, skipped_lines=[3, 5])}
    assert data["dev_file"]["sha256"] == hashlib.sha256(open(dev, "rb").read()).hexdigest()
    assert (data["dev_file"]["read"], data["dev_file"]["skipped"], data["dev_file"]["flag"]) == (1, 2, "--dev-file")
    baseline = glue_baseline("sst2", [0], ["negative", "positive"])
    results = run_record({"dev": {"accuracy": 1.0}, "seconds": 9.0, "train_seconds": 5.0}, config, data,
                         baseline, ["negative"], lowercase=True, dropout=0.1)
    fields = {f.name for f in dataclasses.fields(FinetuningConfig)}
    assert set(results["config"]) == fields - {"export_dir"}  # recorded once: results' own "export_dir"
    assert results["command"] == (
        f"python tools/finetune.py --task sst2 --train-file {train} --dev-file {dev} --preset some_preset "
        "--output-dir out --epochs 3 --batch-size 32 --learning-rate 5e-05 --warmup-ratio 0.1 --sequence-length 128 "
        "--seed 12345 --strategy auto --precision float32 --skip-malformed")
    assert (results["config"]["batch_size"], results["config"]["learning_rate"], results["config"]["epochs"],
            results["config"]["sequence_length"], results["config"]["seed"]) == (32, 5e-5, 3, 128, 12345)
    assert results["config"]["lowercase"] is True and results["config"]["dropout"] == 0.1  # resolved
    assert results["data"] == data and results["baseline"] == baseline
    assert set(results["versions"]) == {"keras_bert_zoo", "tensorflow", "keras", "python"}
    assert results["time_keys"] == {k: TIME_KEYS[k] for k in ("seconds", "train_seconds")}
    assert results["dev_predictions"] == {"count": 1, "distinct": 1, "most_common": [["negative", 1]]}
    assert results["warnings"][0].startswith("all 1 dev predictions are class 'negative'")


def test_the_summary_line_says_when_every_prediction_is_one_class(tmp_path, files, caplog):
    train, dev = files
    config = FinetuningConfig("sst2", train, dev, "some_preset", str(tmp_path))
    note = one_class_warning({"negative": 3})
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo.training"):
        finetuning_kind.write_results(config, {"dev": {"accuracy": 0.5}, "warnings": [note]})
        finetuning_kind.write_results(config, {"dev": {"accuracy": 0.9}, "warnings": []})
    warned, fine = caplog.records[-2:]
    assert warned.levelno == logging.WARNING and note in warned.getMessage()
    assert warned.getMessage().startswith("Fine-tuned sst2: dev {'accuracy': 0.5}")
    assert fine.levelno == logging.INFO and "all" not in fine.getMessage()


def test_conll_picks_batch_and_learning_rate_from_the_training_sentences(files):
    """A tagger leaves the all-O prior only after enough updates (docs/ner.md): 3 epochs, and the
    largest batch of 32, 16, 8 that gives 375 steps (5e-5 at 32, else 1e-4). A flag given wins."""
    train, dev = files
    conll = FinetuningConfig("conll2003", train, dev, "p", "o")
    assert (conll.epochs, conll.batch_size, conll.learning_rate) == (3, None, None)
    assert [tagging_recipe(rows, 3) for rows in (1000, 2000, 4000, 14041, 100)] == [
        (8, 1e-4), (16, 1e-4), (32, 5e-5), (32, 5e-5), (8, 1e-4)]
    picked, note = conll.for_training_rows(1000)
    assert (picked.epochs, picked.batch_size, picked.learning_rate) == (3, 8, 1e-4)
    assert note == ("recipe: batch 8, peak learning rate 1e-4 for 1000 training sentences x 3 epochs (375 steps): "
                    "the largest batch of 32, 16, 8 with at least 375 steps, 5e-5 at batch 32, else 1e-4 "
                    "(docs/ner.md; --batch-size and --learning-rate set them)")
    assert conll.for_training_rows(2000)[0].batch_size == 16
    batch_given = FinetuningConfig("conll2003", train, dev, "p", "o", batch_size=32).for_training_rows(1000)[0]
    assert (batch_given.batch_size, batch_given.learning_rate) == (32, 5e-5)
    features = FinetuningConfig("conll2003", train, dev, "p", "o", feature_based="last")
    assert (features.epochs, features.batch_size, features.learning_rate) == (10, 32, 1e-3)
    assert features.for_training_rows(1000) == (features, None)
    glue = FinetuningConfig("mrpc", train, dev, "p", "o")
    assert (glue.epochs, glue.batch_size, glue.learning_rate) == (3, 32, 5e-5)
    given = FinetuningConfig("conll2003", train, dev, "p", "o", batch_size=8, epochs=2, learning_rate=3e-5)
    assert (given.epochs, given.batch_size, given.learning_rate) == (2, 8, 3e-5)
    assert given.for_training_rows(1000) == (given, None)
    with pytest.raises(ValueError, match=r"--batch-size must be an integer >= 1"):
        FinetuningConfig("conll2003", train, dev, "p", "o", batch_size=0)


@pytest.mark.parametrize("task, length, match", [
    ("sst2", 2, r"--sequence-length must be at least 3 for task='sst2'.* Received: sequence_length=2"),
    ("conll2003", 2, r"--sequence-length must be at least 3 for task='conll2003'"),
    ("mrpc", 4, r"--sequence-length must be at least 5 for task='mrpc': .*\[CLS\] a \[SEP\] b \[SEP\]"),
    ("swag", 4, r"--sequence-length must be at least 5 for task='swag'"),
    ("squad1", 60, r"--sequence-length must exceed .* --max-query-length is 64, so at least 68"),
])
def test_a_sequence_length_that_holds_no_text_is_refused_naming_the_flag(files, task, length, match):
    train, dev = files
    with pytest.raises(ValueError, match=match):
        FinetuningConfig(task, train, dev, "p", "o", sequence_length=length)
    minimum = {"sst2": 3, "conll2003": 3, "mrpc": 5, "swag": 5, "squad1": 68}[task]
    assert FinetuningConfig(task, train, dev, "p", "o", sequence_length=minimum).sequence_length == minimum


def test_squad_window_settings_are_checked_against_each_other(files):
    train, dev = files
    assert FinetuningConfig("squad1", train, dev, "p", "o", sequence_length=16, max_query_length=12).max_query_length
    with pytest.raises(ValueError, match=r"--doc-stride: with --rules hf_pipeline .* = 21. Received: doc_stride=21"):
        FinetuningConfig("squad2", train, dev, "p", "o", sequence_length=48, max_query_length=24, doc_stride=21,
                         rules="hf_pipeline")
