"""The fair protocol: the same grid for each start on the first seed, the pick on dev alone, every
seed at the pick scored once on test, a rerun that trains nothing it has, and the mean ± std."""

import json

import numpy as np
import pytest

from keras_bert_zoo.finetuning import protocol
from keras_bert_zoo.models.bert_classifier import BertClassifier
from tests.weights import weights_testlib as lib

FIXTURE = lib.fixture_dir("gelu")  # HF layout: vocab w0..w58, hidden 16, 2 layers
CONFIG = protocol.ProtocolConfig(learning_rates=(1e-4, 3e-3), seeds=(0, 1, 2), epochs=2, batch_size=8)


def _data(rows, seed):
    rng = np.random.default_rng(seed)
    texts = [" ".join(f"w{i}" for i in rng.integers(5, 58, 6)) for _ in range(rows)]
    labels = np.array([int("w7" in t.split() or "w9" in t.split()) for t in texts], "int32")  # learnable
    return texts, labels


DATA = {"train": _data(48, 0), "dev": _data(24, 1), "test": _data(24, 2)}


def _build(calls):
    def build(seed):
        calls.append(seed)
        return BertClassifier.from_preset(FIXTURE, num_classes=2, sequence_length=12)
    return build


def test_grid_on_the_first_seed_pick_on_dev_then_every_seed_on_test(tmp_path, monkeypatch):
    scored = []
    score = protocol._score

    def spy(model, x, y, batch_size):
        scored.append("test" if x is DATA["test"][0] else "dev")
        return score(model, x, y, batch_size)

    monkeypatch.setattr(protocol, "_score", spy)
    calls, lines, picked = [], [], []
    ledger = protocol.Ledger(str(tmp_path / "ledger.jsonl"))
    result = protocol.run_protocol("tiny", "toy", _build(calls), DATA, CONFIG, ledger=ledger, log=lines.append,
                                   on_pick=picked.append)
    assert calls == [0, 0, 1, 2]  # the grid on seed 0, then seeds 1 and 2 (seed 0's pick is kept)
    assert scored[:2] == ["dev", "dev"]  # nothing is scored on test before the pick
    assert scored.count("test") == 3
    grid = result["grid"]
    assert set(grid) == {"0.0001", "0.003"}
    assert result["learning_rate"] == max(CONFIG.learning_rates, key=lambda r: (grid[f"{r:g}"], -r))
    tests = [run["test"] for run in result["runs"]]
    assert [run["seed"] for run in result["runs"]] == [0, 1, 2]
    assert result["test_mean"] == pytest.approx(np.mean(tests))
    assert result["test_std"] == pytest.approx(np.std(tests, ddof=1))
    assert len(lines) == 4 and "seed 0" in lines[0]
    assert len(picked) == 1 and isinstance(picked[0], BertClassifier)  # seed 0's model at the pick
    # Every run is on disk; a rerun trains nothing and answers the same.
    rows = [json.loads(line) for line in open(tmp_path / "ledger.jsonl", encoding="utf-8")]
    assert {(r["learning_rate"], r["seed"]) for r in rows} == {(1e-4, 0), (3e-3, 0), (result["learning_rate"], 1),
                                                              (result["learning_rate"], 2)}
    again = protocol.run_protocol("tiny", "toy", _build(calls), DATA, CONFIG,
                                  ledger=protocol.Ledger(str(tmp_path / "ledger.jsonl")))
    assert calls == [0, 0, 1, 2] and again == result


def test_config_and_ledger_refuse_what_they_cannot_use(tmp_path):
    with pytest.raises(ValueError, match="at least two distinct ints"):
        protocol.ProtocolConfig(seeds=(0,))
    with pytest.raises(ValueError, match="positive floats"):
        protocol.ProtocolConfig(learning_rates=(0.0,))
    (tmp_path / "ledger.jsonl").write_text('{"start": "a", "task": "b", "learning_rate": 1, "seed": 0}\n{"sta\n')
    with pytest.raises(ValueError, match="line 2: not JSON"):
        protocol.Ledger(str(tmp_path / "ledger.jsonl"))


def test_majority_accuracy_uses_the_training_labels():
    assert protocol.majority_accuracy([1, 1, 0], [0, 0, 1, 1]) == 0.5
    assert protocol.majority_accuracy([0, 0, 1], [0, 0, 0, 1]) == 0.75
