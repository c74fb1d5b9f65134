"""The serving load section: the report's ratios read the measurements; a quick run end to end
(`heavy`: two servers and an in-process worker, a minute)."""

import types

import pytest

from benchmarks import serving_load


def _results(on32, off32, ceiling):
    row = dict(requests_per_s=1.0, p50_ms=1.0, p95_ms=2.0, p99_ms=3.0, errors=0, seconds=300.0)
    return {
        "batching": {"rows": [dict(row, clients=1, sentences_per_s=5.0), dict(row, clients=32, sentences_per_s=on32)],
                     "peak_rss_mb": 900.0, "exit_code": 0},
        "no_batching": {"rows": [dict(row, clients=1, sentences_per_s=5.0),
                                 dict(row, clients=32, sentences_per_s=off32)], "peak_rss_mb": 800.0, "exit_code": 0},
        "in_process": {"sentences_per_s": ceiling, "calls_per_s": ceiling / 32, "p50_ms": 1.0, "p99_ms": 2.0,
                       "peak_rss_mb": 700.0},
    }


def test_ratios_compare_the_most_clients_with_the_ceiling_and_batching_off():
    r = serving_load.ratios(_results(on32=24.0, off32=6.0, ceiling=30.0))
    assert r["clients"] == 32 and r["seconds"] == 300.0 and r["errors"] == 0
    assert r["of_in_process"] == pytest.approx(0.8) and r["over_no_batching"] == pytest.approx(4.0)
    lines = serving_load.table(_results(on32=24.0, off32=6.0, ceiling=30.0))
    assert any(line.startswith("| server, batching (max 32, 5 ms) | 32 | 1.0 | 24.0 |") for line in lines)
    assert lines[-1].startswith("| in-process, batch 32 | – | 0.9 calls | 30.0 |")


@pytest.mark.heavy
def test_quick_run_end_to_end(tmp_path):
    from tests.models.test_bert_classifier import tiny_classifier
    from keras_bert_zoo.serving.export import export

    path = export(tiny_classifier(num_classes=2), str(tmp_path / "tiny" / "1"), signatures=("text",))
    report = serving_load.run(types.SimpleNamespace(quick=True, export=path, preset=None))
    assert "with 0 errors" in report and "goal ≥ 70%" in report


def test_the_roof_line_sets_the_batching_goal_against_the_float32_roof():
    from benchmarks.classification.notes import forward_flops

    gflop = forward_flops(27) / 1e9  # 4.61
    line = serving_load.roof_line(_results(on32=28.0, off32=16.0, ceiling=30.0), {"pieces": [27, 27]},
                                  {"float32": {"gflops": 200.0}})
    cap = 200.0 / gflop  # 43.4 sentences/s
    assert f"{gflop:.2f} GFLOP each" in line and f"allows at most {cap:.1f} sentences/s" in line
    assert f"is 48.0 sentences/s, {48.0 / cap:.0%} of that roof" in line
    assert f"batching off already runs at {16.0 / cap:.0%}" in line and f"batching on at {28.0 / cap:.0%}" in line
    assert serving_load.roof_line({}, None, {}) == "The roof over these sentences: not measured."
