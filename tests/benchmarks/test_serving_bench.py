"""The serving benchmark section at a tiny size: both tasks exported and measured, the served
answers equal `task.predict`'s, the table reads the measurements."""

import importlib

import numpy as np
import pytest

from benchmarks import predict_overhead, serving
from tests.weights import weights_testlib as lib


def _in_process(module, func, kwargs):
    return getattr(importlib.import_module(module), func)(**kwargs)


@pytest.mark.heavy  # `make test-heavy` (~55 s in the suite): a benchmark section, which `make bench` runs anyway
def test_serving_section_at_a_tiny_size(tmp_path):
    settings = dict(latency_calls=(4, 2), batch_size=4, batches=2, runs=2)  # two rounds, interleaved
    results = serving.measure(settings=settings, workdir=str(tmp_path), preset=lib.fixture_dir("gelu"),
                              sequence_lengths={"classifier": 16, "span_extractor": 32}, call=_in_process,
                              breakdown_calls=1)
    assert sorted(results) == ["classifier", "span_extractor"]
    for task, entry in results.items():
        assert "error" not in entry["prepared"], entry["prepared"]
        assert entry["prepared"]["sequence_length"] == {"classifier": 16, "span_extractor": 32}[task]
        for side, calls in (("served", 4), ("predict", 2)):
            result = entry[side]
            assert result["latency"]["calls"] == calls
            assert 0 < result["latency"]["median_ms"] <= result["latency"]["p99_ms"]
            assert result["throughput"]["rate"] > 0 and len(result["throughput"]["times"]) == 2  # one a round
            assert len(result["answers"]) == 8
        # Same weights on both sides: the same answer and score for every row.
        assert entry["served"]["answers"] == entry["predict"]["answers"]
        np.testing.assert_allclose(entry["served"]["scores"], entry["predict"]["scores"], atol=1e-5, rtol=0)
    assert set(results["classifier"]["served"]["answers"]) <= {"rotten", "fresh"}
    assert all(results["span_extractor"]["served"]["answers"])  # answers, not only "" (no answer)
    rows, agreement = serving.table(results)
    assert [a.split(" (")[0] for a in agreement] == ["classifier 8/8", "span_extractor 8/8"]
    assert len(rows) == 4 and all("failed" not in row for row in rows)
    served = results["classifier"]["served"]
    assert f"| {served['latency']['median_ms']:.1f} |" in rows[0] and "SavedModel" in rows[0]
    assert "`task.predict`" in rows[1]
    # Where task.predict's time goes: its pieces, each no longer than the whole call.
    breakdown = results["classifier"]["breakdown"]
    assert breakdown["iterators_per_tf_data_predict"] >= 1
    pieces = ("prepare_ms", "count_truncated_ms", "model_ms", "tf_data_predict_ms", "iterator_ms")
    assert all(0 < breakdown[k] for k in pieces)
    assert breakdown["model_ms"] < breakdown["tf_data_predict_ms"]
    assert f"the call {breakdown['predict_ms']:.0f};" in predict_overhead.breakdown_note(breakdown)
    assert "not measured (boom)" in predict_overhead.breakdown_note({"error": "boom"})


def test_real_rows_are_real_text():
    reviews = serving.real_rows("classifier", 3)
    assert len(reviews) == 3 and all(len(r["text"].split()) > 3 for r in reviews)
    qa = serving.real_rows("span_extractor", 4)
    assert all(len(r["context"].split()) >= 60 and len(r["question"].split()) == 10 for r in qa)
    assert qa[0]["context"] != qa[1]["context"] and qa[0]["question"].endswith("?")


def test_merge_rounds_pools_calls_and_keeps_errors():
    parts = [{"latency_s": [0.1, 0.3], "throughput_s": [2.0], "answers": ["a"], "scores": [0.5]},
             {"latency_s": [0.2], "throughput_s": [1.0], "answers": ["b"], "scores": [0.25]}]
    merged = serving.merge_rounds(parts, rows_per_run=8)
    assert merged["latency"] == {"calls": 3, "median_ms": 200.0, "p99_ms": 300.0}
    assert merged["throughput"]["rates"] == [4.0, 8.0] and merged["throughput"]["rate"] == 6.0
    assert merged["answers"] == ["b"] and merged["scores"] == [0.25]
    assert serving.merge_rounds(parts + [{"error": "exit 1: boom"}], 8) == {"error": "exit 1: boom"}
