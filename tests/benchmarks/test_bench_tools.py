"""Benchmark helpers: subprocess runner, timing statistics, matmul roof, FLOP count, table."""

import pytest

from benchmarks import backbone
from benchmarks._subprocess import run_config, summarize, time_runs


def test_summarize_median_rate_and_spread():
    stats = summarize([2.0, 1.0, 4.0], items_per_call=8)
    assert stats["rates"] == [4.0, 8.0, 2.0]
    assert stats["rate"] == 4.0
    assert stats["median_s"] == 2.0
    assert stats["spread"] == pytest.approx((8.0 - 2.0) / 4.0)


def test_time_runs_excludes_warmup_and_averages_calls():
    calls = []
    times = time_runs(lambda: calls.append(1), warmup=2, runs=3, calls_per_run=4)
    assert len(calls) == 2 + 3 * 4
    assert len(times) == 3 and all(t >= 0 for t in times)
    with pytest.raises(ValueError, match="runs"):
        time_runs(lambda: None, warmup=0, runs=0)


def test_forward_gflop_matches_performance_md():
    assert backbone.forward_gflop() == pytest.approx(22.35, abs=0.005)
    # L2 H16 I32 S8: dense 2*(4*256 + 2*512)*8 = 32768, attention 4*64*16 = 4096, per layer.
    assert backbone.forward_gflop(8, 2, 16, 32) * 1e9 == pytest.approx(2 * (32768 + 4096))


def test_run_config_returns_worker_dict_from_a_child_process():
    result = run_config(
        "benchmarks.peak", "matmul_gflops", {"n": 64, "warmup": 1, "runs": 3, "calls_per_run": 2}, timeout=300
    )
    assert "error" not in result, result
    assert result["dtype"] == "float32" and result["n"] == 64
    assert len(result["runs"]) == 3
    assert result["gflops"] == pytest.approx(sorted(result["runs"])[1])
    assert result["wall_s"] > 0


def test_run_config_reports_errors_instead_of_raising():
    bad_dtype = run_config("benchmarks.peak", "matmul_gflops", {"dtype": "int8"}, timeout=300)
    assert "ValueError" in bad_dtype["error"] and "int8" in bad_dtype["error"]
    missing = run_config("benchmarks.peak", "no_such_worker", {}, timeout=300)
    assert "no_such_worker" in missing["error"]
    with pytest.raises(ValueError, match="module"):
        run_config(None, "f")


def test_measure_rejects_unknown_configuration():
    with pytest.raises(ValueError, match="impl='jax'"):
        backbone.measure("jax", "inference", "float32")


def test_rows_ratios_and_fraction_of_roof():
    results = {
        ("ours", "inference", "float32", False): {"rate": 8.0, "spread": 0.1},
        ("keras_hub", "inference", "float32", False): {"rate": 4.0, "spread": 0.2},
        ("hf", "inference", "float32", False): {"rate": 16.0, "spread": 0.0},
        ("ours", "training", "float32", False): {"error": "boom"},
    }
    rows = backbone._rows(results, {"float32": {"gflops": 22.347251712 * 8 / 0.5}})
    assert rows[0].endswith("| 8.00 | 10% | 2.00× | 0.50× | 50% |")
    assert "| 4.00 | 20% | 1.00× | 0.25× | 25% |" in rows[1]
    assert "failed: boom" in rows[3]
    assert backbone._verdict(results).startswith("inference float32: 2.00× (meets")


def test_memory_bandwidth_counts_a_read_and_a_write_of_each_float(monkeypatch):
    from benchmarks import peak

    calls = []

    def fake_time_runs(step, warmup, runs, calls_per_run):
        calls.append(step())  # the scaled tensor's first element, computed for real
        return [0.5, 0.25, 1.0]

    monkeypatch.setattr(peak, "time_runs", fake_time_runs)
    result = peak.memory_gbs(megabytes=4)
    # 4 MB of float32 = 2**20 elements, 8 bytes each (read and written), median call 0.5 s.
    assert result["gbs"] == pytest.approx(8 * 2**20 / 1e9 / 0.5)
    assert result["megabytes"] == 4 and len(result["runs"]) == 3
    assert 0 <= calls[0] <= 1.0001
