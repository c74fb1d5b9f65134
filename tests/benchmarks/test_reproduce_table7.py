"""benchmarks/reproduce_table7.py end to end on tiny CoNLL files and a tiny preset."""

import json
import os

import pytest

from benchmarks import reproduce_table7

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "bob", "ann", "visited", "met", "paris", "rome", "in", "."]
TRAIN = "-DOCSTART- -X- -X- O\n\n" + "\n".join(
    "\n".join(f"{w} X X {t}" for w, t in sentence) + "\n"
    for sentence in [
        [("Bob", "B-PER"), ("visited", "O"), ("Paris", "B-LOC"), (".", "O")],
        [("Ann", "B-PER"), ("met", "O"), ("Bob", "B-PER"), ("in", "O"), ("Rome", "B-LOC")],
        [("Ann", "B-PER"), ("visited", "O"), ("Rome", "B-LOC")],
    ]
)


def test_features_match_the_library():
    from keras_bert_zoo.models.bert_feature_extractor import FEATURES

    assert sorted(reproduce_table7.FEATURE_CHOICES) == sorted(FEATURES)
    with pytest.raises(SystemExit):
        reproduce_table7.main(["--preset", "x", "--output-dir", "y", "--features", "last,first"])


@pytest.mark.heavy  # `make test-heavy`: its parts (feature extractor, tuning) are tested in make test
def test_run_writes_results_and_table(tmp_path):
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    backbone = BertBackbone(vocabulary_size=len(TOKENS), num_layers=2, num_heads=2, hidden_dim=8,
                            intermediate_dim=16, max_sequence_length=16)
    preset = backbone.save_to_preset(str(tmp_path / "preset"), vocabulary=TOKENS)
    for name in ("train.txt", "valid.txt"):
        (tmp_path / name).write_text(TRAIN, encoding="utf-8")
    out = str(tmp_path / "run")
    results = reproduce_table7.main([
        "--preset", preset, "--lowercase", "--train-file", str(tmp_path / "train.txt"),
        "--dev-file", str(tmp_path / "valid.txt"), "--output-dir", out, "--sequence-length", "16",
        "--epochs", "1", "--batch-size", "4", "--features", "last,weighted_sum_all", "--lstm-units", "4",
        "--tagger-epochs", "1"])
    assert json.load(open(os.path.join(out, "results.json"))) == results
    assert results["labels"] == ["O", "B-LOC", "I-LOC", "B-PER", "I-PER"]
    assert list(results["features"]) == ["last", "weighted_sum_all"]
    for row in [results["fine_tuning"], *results["features"].values()]:
        assert 0.0 <= row["f1"] <= 1.0 and row["train_tokens_per_second"] > 0 and row["predict_tokens_per_second"] > 0
    table = open(os.path.join(out, "table7.md")).read().splitlines()
    assert table[2].startswith("| fine tuning |") and table[2].endswith("| 96.4 |")
    assert table[3].startswith("| last |") and len(table) == 5
    with open(os.path.join(out, "table7.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _finetune_results(tmp_path, train_examples=3):
    """The fields of a `tools/finetune.py --task conll2003` results.json the table reads."""
    run = {"mode": "fine_tuning", "train_examples": train_examples, "dev_sentences": 2, "epochs": 3,
           "dev": {"precision": 0.5, "recall": 0.25, "f1": 1 / 3}, "dev_per_type": {},
           "train_seconds": 10.0, "train_tokens_per_second": 100.0, "predict_tokens_per_second": 300.0}
    path = tmp_path / f"finetune_{train_examples}.json"
    path.write_text(json.dumps(run), encoding="utf-8")
    return str(path)


def test_tables_from_an_earlier_run_add_the_fine_tuning_row(tmp_path):
    earlier = {"preset": "some/model", "train_sentences": 3, "dev_sentences": 2, "labels": ["O", "B-X", "I-X"],
               "fine_tuning": None, "features": {"last": {"precision": 0.2, "recall": 0.2, "f1": 0.2}}}
    path = tmp_path / "results.json"
    path.write_text(json.dumps(earlier), encoding="utf-8")
    out = str(tmp_path / "again")
    results = reproduce_table7.main(["--tables-from", str(path), "--output-dir", out,
                                     "--fine-tuning-results", _finetune_results(tmp_path)])
    assert results["fine_tuning"]["f1"] == pytest.approx(1 / 3) and results["features"] == earlier["features"]
    assert json.load(open(os.path.join(out, "results.json"))) == results
    table = open(os.path.join(out, "table7.md")).read().splitlines()
    assert table[2:] == ["| fine tuning | 33.3 | 96.4 |", "| last | 20.0 | 94.9 |"]
    assert open(os.path.join(out, "table7.png"), "rb").read(4) == b"\x89PNG"
    with pytest.raises(SystemExit, match="not a conll2003 fine-tuning run on these 3 training"):
        reproduce_table7.main(["--tables-from", str(path), "--output-dir", out,
                               "--fine-tuning-results", _finetune_results(tmp_path, 5)])
    with pytest.raises(SystemExit):
        reproduce_table7.main(["--output-dir", out])  # no --preset and nothing to redraw
