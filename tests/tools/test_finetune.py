"""tools/finetune.py end to end on tiny fixture files and a tiny preset; flags refused early."""

import csv
import hashlib
import json
import os
import shutil

import numpy as np
import pytest

from tests.data import glue_fixtures
from tests.helpers import serve_strings
from tools import finetune

WORDS = ("a good great fine film movie bad dull awful boring it is was the and plot of ok man woman eats "
         "eating someone sleeps cat dog sits runs").split()
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
POSITIVE = ["a good film", "a great movie", "it is fine", "the plot is great", "good and fine", "a great film"]
NEGATIVE = ["a bad film", "a dull movie", "it is awful", "the plot is boring", "bad and dull", "an awful film"]


def _tiny_preset(directory, name="tiny_preset", tokens=None):
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    tokens = tokens or SPECIALS + list(WORDS) + [".", ","]
    backbone = BertBackbone(vocabulary_size=len(tokens), num_layers=2, num_heads=2, hidden_dim=16,
                            intermediate_dim=32, max_sequence_length=32)
    return backbone.save_to_preset(os.path.join(str(directory), name), vocabulary=tokens)


def _sst2(tmp_path):
    rows = [(t, 1) for t in POSITIVE] + [(t, 0) for t in NEGATIVE]
    train = "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows)
    dev = "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows[::3])
    test = "index\tsentence\n0\ta good movie\n1\tan awful plot\n"
    return [glue_fixtures.write(tmp_path, "sst2", s, t) for s, t in (("train", train), ("dev", dev), ("test", test))]


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    return _tiny_preset(tmp_path_factory.mktemp("presets"))


def _argv(task, train, dev, preset, out, *more):
    return ["--task", task, "--train-file", train, "--dev-file", dev, "--preset", preset, "--output-dir", out,
            "--epochs", "1", "--batch-size", "4", "--learning-rate", "1e-3", "--sequence-length", "16",
            "--seed", "1", "--no-progress", *more]


def test_sst2_run_writes_results_predictions_preset_and_submission(tmp_path, preset):
    from keras_bert_zoo.data.glue import read_glue
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    train, dev, test = _sst2(tmp_path)
    # A malformed second dev row (label "7"), dropped by --skip-malformed: counted, and the rows
    # after it keep their own place in the file (1 is gone, not renumbered).
    lines = open(dev, encoding="utf-8").read().splitlines(keepends=True)
    open(dev, "w", encoding="utf-8").write("".join(lines[:2] + ["a broken row\t7\n"] + lines[2:]))
    out = str(tmp_path / "run")
    results = finetune.main(_argv("sst2", train, dev, preset, out, "--test-file", test,
                                  "--max-train-examples", "10", "--dropout", "0.25", "--skip-malformed",
                                  "--export-dir", str(tmp_path / "served")))
    saved = json.load(open(os.path.join(out, "results.json")))
    assert saved == results and saved["task"] == "sst2" and saved["train_examples"] == 10
    assert set(saved["dev"]) == {"accuracy"} and len(saved["dev_per_epoch"]) == 1
    assert saved["seconds"] > 0 and saved["train_examples_per_second"] > 0
    # How the run was made: every config field as used, the files, versions, what the times measure.
    config = saved["config"]
    assert (config["batch_size"], config["learning_rate"], config["epochs"], config["sequence_length"],
            config["seed"], config["precision"], config["dropout"], config["max_train_examples"],
            config["lowercase"], config["warmup_ratio"]) == (4, 1e-3, 1, 16, 1, "float32", 0.25, 10, True, 0.1)
    assert saved["precision"] == "float32" and saved["dev_examples"] == 4
    assert saved["data"]["dev_file"]["skipped"] == 1 and saved["data"]["dev_file"]["skipped_lines"] == [3]
    assert saved["data"]["dev_file"]["read"] == 4 and saved["data"]["test_file"]["read"] == 2
    assert (saved["data"]["train_file"]["read"], saved["data"]["train_file"]["used"]) == (12, 10)
    assert saved["data"]["train_file"]["sha256"] == hashlib.sha256(open(train, "rb").read()).hexdigest()
    assert set(saved["versions"]) == {"keras_bert_zoo", "tensorflow", "keras", "python"}
    assert {"seconds", "train_seconds", "train_examples_per_second"} <= set(saved["time_keys"])
    with open(os.path.join(out, "dev_predictions.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["index"] for r in rows] == ["0", "2", "3", "4"]
    assert [r["label"] for r in rows] == ["positive", "positive", "negative", "negative"]
    accuracy = np.mean([r["prediction"] == r["label"] for r in rows])
    assert saved["dev"]["accuracy"] == pytest.approx(accuracy)
    # The baseline: the dev set's majority class (a tie: the first label id), by the same accuracy.
    assert saved["baseline"]["dev"] == {"accuracy": 0.5} and "'negative'" in saved["baseline"]["predicts"]
    predicted = [r["prediction"] for r in rows]
    assert saved["dev_predictions"]["count"] == 4 and saved["dev_predictions"]["distinct"] == len(set(predicted))
    assert bool(saved["warnings"]) == (len(set(predicted)) == 1)
    # Each class's probability, as the served model gives them.
    dev_probabilities = np.array([[float(r["probability_negative"]), float(r["probability_positive"])] for r in rows])
    np.testing.assert_allclose(dev_probabilities.sum(-1), 1.0, atol=1e-5)
    assert [["negative", "positive"][i] for i in dev_probabilities.argmax(-1)] == predicted
    submission = open(os.path.join(out, "SST-2.tsv")).read().splitlines()
    assert submission[0] == "index\tprediction" and [r.split("\t")[0] for r in submission[1:]] == ["0", "1"]
    # The preset reloads into the same classifier: its predictions are the files'.
    reloaded = BertClassifier.from_preset(os.path.join(out, "preset"))
    assert reloaded.dropout == reloaded.backbone.dropout == 0.25  # --dropout: head and backbone (preset: 0.1)
    x = read_glue("sst2", dev, errors="skip")[0] + read_glue("sst2", test)[0]
    class_ids = reloaded.predict(x, verbose=0).argmax(-1)
    assert [reloaded.labels[i] for i in class_ids[:4]] == [r["prediction"] for r in rows]
    assert [r.split("\t")[1] for r in submission[1:]] == [str(i) for i in class_ids[4:]]
    # --export-dir: the fine-tuned model as a SavedModel on raw strings, answering as it was scored.
    assert saved["export_dir"] == str(tmp_path / "served")
    served = serve_strings(saved["export_dir"], text=x[:4])
    assert [label.decode() for label in served["label"].numpy()] == [r["prediction"] for r in rows]
    logits = reloaded.predict(x[:4], verbose=0)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    np.testing.assert_allclose(served["probabilities"].numpy(), probabilities, atol=1e-5)
    np.testing.assert_allclose(dev_probabilities, probabilities, atol=1e-5)


def test_mnli_pairs_score_matched_and_mismatched_dev_sets(tmp_path, preset):
    train = glue_fixtures.write(tmp_path, "mnli", "dev")
    out = str(tmp_path / "mnli")
    results = finetune.main(_argv("mnli", train, train, preset, out, "--dev-mismatched-file", train,
                                  "--export-dir", str(tmp_path / "served")))
    assert set(results["dev"]) == {"accuracy"} and results["dev"] == results["dev_mismatched"]
    lines = open(os.path.join(out, "dev_mismatched_predictions.tsv")).read().splitlines()
    assert lines[0] == "\t".join(["index", "prediction", "label", "probability_contradiction",
                                   "probability_entailment", "probability_neutral"])
    assert [r.split("\t")[2] for r in lines[1:]] == ["neutral", "contradiction"]
    # A pair task's export takes the two sentences, and answers as the run predicted.
    from keras_bert_zoo.data.glue import read_glue

    first, second = read_glue("mnli", train)[0]
    served = serve_strings(results["export_dir"], text_a=first, text_b=second)
    assert [label.decode() for label in served["label"].numpy()] == [r.split("\t")[1] for r in lines[1:]]


def test_snli_runs_from_its_files_as_a_glue_layout_pair_task(tmp_path, preset):
    snli = glue_fixtures.write(tmp_path, "snli", "train")  # 3 rows with a gold label, 1 without
    out = str(tmp_path / "snli")
    results = finetune.main(_argv("snli", snli, snli, preset, out, "--test-file", snli))
    assert set(results["dev"]) == {"accuracy"} and results["train_examples"] == 3 and results["dev_examples"] == 3
    dev = open(os.path.join(out, "dev_predictions.tsv")).read().splitlines()
    assert [r.split("\t")[0] for r in dev[1:]] == ["0", "1", "3"]  # the row without a gold label dropped
    assert [r.split("\t")[2] for r in dev[1:]] == ["neutral", "contradiction", "entailment"]
    predicted = [r.split("\t")[1] for r in dev[1:]]
    assert results["dev"]["accuracy"] == pytest.approx(
        sum(p == g for p, g in zip(predicted, ["neutral", "contradiction", "entailment"])) / 3)
    test = open(os.path.join(out, "SNLI.tsv")).read().splitlines()
    assert test == ["index\tprediction"] + [f"{i}\t{p}" for i, p in zip(["0", "1", "3"], predicted)]


def test_bad_flags_are_refused_before_any_work_naming_the_flag(tmp_path, preset):
    train, dev, _ = _sst2(tmp_path)
    out = str(tmp_path / "never")
    with pytest.raises(ValueError, match=r"--train-file: no such file"):
        finetune.main(_argv("sst2", str(tmp_path / "missing.tsv"), dev, preset, out))
    with pytest.raises(SystemExit):
        finetune.main(_argv("sst3", train, dev, preset, out))
    with pytest.raises(ValueError, match=r"--dev-mismatched-file is MNLI's"):
        finetune.main(_argv("sst2", train, dev, preset, out, "--dev-mismatched-file", dev))
    with pytest.raises(ValueError, match=r"--dropout must be in \[0, 1\). Received: dropout=1.0"):
        finetune.main(_argv("sst2", train, dev, preset, out, "--dropout", "1"))
    with pytest.raises(ValueError, match=r"--export-dir is a file, not a directory"):
        finetune.main(_argv("sst2", train, dev, preset, out, "--export-dir", train))
    with pytest.raises(ValueError, match=r"--epochs must be an integer >= 1"):
        finetune.main(_argv("sst2", train, dev, preset, out, "--epochs", "0"))
    with pytest.raises(ValueError, match=r"--no-lowercase contradicts the vocabulary of .* which is uncased"):
        finetune.main(_argv("sst2", train, dev, preset, out, "--no-lowercase"))
    # A directory named "uncased" holding a cased vocabulary (its words capitalised).
    cased = SPECIALS + [w.capitalize() for w in WORDS]
    mismatched = _tiny_preset(tmp_path, "tiny_uncased", cased)
    with pytest.raises(ValueError, match=r"--preset: .* reads as uncased .* but its vocabulary is cased"):
        finetune.main(_argv("sst2", train, dev, mismatched, out))
    with pytest.raises(ValueError, match=r"--dev-file: .*sst2_test.tsv' has no labels"):
        finetune.main(_argv("sst2", train, str(tmp_path / "sst2_test.tsv"), preset, out))
    assert not os.path.exists(out)


def test_lowercase_settles_a_preset_whose_casing_reads_wrong(tmp_path, preset):
    from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
    from keras_bert_zoo.finetuning import kind as finetuning_kind, run as finetuning_run
    from keras_bert_zoo.finetuning.config import FinetuningConfig

    train, dev, _ = _sst2(tmp_path)
    # A folder whose name says cased around an uncased vocabulary with one capital symbol.
    odd = tmp_path / "model_cased"
    odd.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(os.path.dirname(__file__), "..", "weights", "fixtures", "hf_tiny_gelu", name), odd)
    filler = [f"w{i}" for i in range(100)]  # one capitalised token in 130: under the 1% of a cased vocabulary
    (odd / "vocab.txt").write_text("\n".join(SPECIALS + list(WORDS) + filler + ["\u211d"]) + "\n", encoding="utf-8")
    odd = str(odd)
    with pytest.raises(ValueError, match=r"reads as cased .* vocabulary is uncased .* say so with --lowercase"):
        finetuning_run.check_preset(FinetuningConfig("sst2", train, dev, odd, str(tmp_path / "o")))
    config = FinetuningConfig("sst2", train, dev, odd, str(tmp_path / "o"), lowercase=True)
    assert finetuning_run.check_preset(config) == (True, False)
    recased = finetuning_kind.recased(BertPreprocessor.from_preset(odd, sequence_length=16), odd, True)
    assert recased.tokenizer.lowercase and recased.sequence_length == 16
    assert recased(["A Good FILM"])["token_ids"].numpy()[0, :5].tolist() == [2, 5, 6, 9, 3]  # [CLS] a good film [SEP]


def test_an_hf_folder_with_a_neutral_name_takes_its_tokenizer_configs_casing(tmp_path):
    """all-MiniLM-L6-v2's folder: a neutral name, an uncased vocabulary holding "ℝ", and HF's
    tokenizer_config.json saying do_lower_case. It read as cased (any capital token decided)."""
    from keras_bert_zoo.presets.config import preset_lowercase

    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join(os.path.dirname(__file__), "..", "weights", "fixtures", "hf_tiny_gelu", name), folder)
    tokens = SPECIALS + list(WORDS) + ["\u211d"]  # 1 capitalised token in 35: the vocabulary alone says cased
    (folder / "vocab.txt").write_text("\n".join(tokens) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text('{"do_lower_case": true}', encoding="utf-8")
    assert preset_lowercase(str(folder), tokens) is True
    (folder / "tokenizer_config.json").write_text('{"do_lower_case": false}', encoding="utf-8")
    assert preset_lowercase(str(folder), tokens) is False
    (folder / "tokenizer_config.json").unlink()
    assert preset_lowercase(str(folder), tokens) is False  # 1 in 35 capitalised: more than a symbol or two
    assert preset_lowercase(str(folder), tokens + [f"w{i}" for i in range(100)]) is True  # 1 in 135


def test_tool_task_choices_are_the_configs():
    from keras_bert_zoo.text.span_windows import RULES
    from keras_bert_zoo.finetuning.config import TASKS

    assert finetune.TASKS == TASKS
    assert finetune.RULES == RULES


def test_swag_multiple_choice_run(tmp_path, preset):
    swag = glue_fixtures.write(tmp_path, "swag", "train")
    out = str(tmp_path / "swag")
    results = finetune.main(_argv("swag", swag, swag, preset, out, "--test-file", swag))
    assert set(results["dev"]) == {"accuracy"} and results["train_examples"] == 2
    dev = open(os.path.join(out, "dev_predictions.tsv")).read().splitlines()
    assert [r.split("\t")[2] for r in dev[1:]] == ["0", "3"]
    test = open(os.path.join(out, "test_predictions.tsv")).read().splitlines()
    assert [r.split("\t")[1] for r in test[1:]] == [r.split("\t")[1] for r in dev[1:]]


def test_tfds_splits_read_as_the_files_do(tmp_path, preset):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    from keras_bert_zoo.finetuning import glue as finetuning_glue
    from keras_bert_zoo.finetuning.config import FinetuningConfig

    features = tfds.features.FeaturesDict({"sentence": tfds.features.Text(), "idx": tf.int32,
                                           "label": tfds.features.ClassLabel(names=["negative", "positive"])})
    rows = [{"sentence": t, "label": 1 - i // 6, "idx": i} for i, t in enumerate(POSITIVE + NEGATIVE)]
    tfds.dataset_builders.store_as_tfds_dataset(
        name="glue", version="2.0.0", config="sst2", data_dir=str(tmp_path), features=features,
        split_datasets={"train": list(enumerate(rows))})
    config = FinetuningConfig("sst2", "tfds:train", "tfds:train", preset, str(tmp_path / "out"),
                              tfds_data_dir=str(tmp_path))
    x, y, ids = finetuning_glue.read_glue_data(config, "train_file", labelled=True)
    assert x == POSITIVE + NEGATIVE and y.tolist() == [1] * 6 + [0] * 6 and ids == [str(i) for i in range(12)]
    with pytest.raises(ValueError, match="--test-file: tensorflow-datasets has no SWAG"):
        FinetuningConfig("swag", __file__, __file__, preset, str(tmp_path), test_file="tfds:test")
