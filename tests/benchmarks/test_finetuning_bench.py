"""The fine-tuning sections' arithmetic: goal 4's ratio, the op-by-op lines, and the memory
section's account of the gap (no model is run)."""

from benchmarks import finetuning, finetuning_memory


def test_goal_4_divides_ours_float32_by_hf_trainer_float32():
    def run(rate, **extra):
        return {"rate": rate, "warmup_s": 1.0, "peak_rss_mb": 100, "timed_rows": 16, **extra}

    results = {"ours": [run(9.0, policy="float32"), run(11.0, policy="float32")], "hf": [run(5.0)]}
    assert finetuning.goal4(results, {}) == "ours (float32) 10.00 vs 5.00 examples/s: **2.00×**"
    assert finetuning.goal4({"ours": [{"error": "x"}], "hf": [run(5.0)]}, {}) == "not measured"


def test_goal_4s_floor_is_the_matmuls_at_the_roof_plus_the_adam_update_at_the_bandwidth():
    def run(rate, **extra):
        return {"rate": rate, "warmup_s": 1.0, "peak_rss_mb": 100, "timed_rows": 16, **extra}

    # 25 pieces: 3 · 12 · 2 · 25 · (4·768² + 2·768·3072) = 12.74 GFLOP, 63.7 ms at 200 GFLOP/s;
    # 100M parameters · 28 bytes = 2.8 GB a step at 20 GB/s = 140 ms, 8.75 ms an example of 16.
    results = {"ours": [run(10.0, mean_tokens=25.0, trainable_params=100_000_000)], "hf": [run(6.0)]}
    machine = {"roof": {"gflops": 200.0}, "bandwidth": {"gbs": 20.0}}
    line = finetuning.floor_line(results, 16, machine)
    floor = 1 / (0.0637009 + 0.00875)
    assert "needs 64 ms of dense matmuls at the 200 GFLOP/s float32 roof" in line
    assert "moves at least 2.80 GB through the fused Adam update (100.0M parameters × 28 bytes)" in line
    assert f"(9 ms an example): at most {floor:.2f} examples/s" in line
    assert f"2× HF `Trainer` is 12.00 examples/s, **{100 * 12 / floor:.0f}% of that floor**" in line
    assert f"ours runs at {100 * 10 / floor:.0f}% of it, HF `Trainer` at {100 * 6 / floor:.0f}%" in line
    assert finetuning.floor_line(results, 16, {}) == "Goal 4's floor: not measured."


def test_the_train_step_profile_is_listed_largest_first_with_shares():
    results = {"ours_profile": [{"categories_ms": {"softmax": 100.0, "dense matmuls": 300.0}, "profiled_s": 1.5}]}
    line = finetuning.profile_lines(results)[0]
    assert "1.5 s with the profiler on" in line
    assert line.index("dense matmuls 300 (75%)") < line.index("softmax 100 (25%)")
    assert finetuning.profile_lines({}) == ["Profile of our train step: not measured."]


def test_the_memory_gap_is_split_into_imports_building_and_training():
    results = {"ours": {"phases": {"read": 900, "build": 1200, "fit": 3000}},
               "hf": {"phases": {"read": 380, "build": 400, "fit": 2600}}}
    imports = {"ours": {"rss_mb": 820.0}, "hf": {"rss_mb": 370.0}}
    line = finetuning_memory.limit_line(results, imports)
    assert "keras_bert_zoo holds 820 MB, one that has imported torch and transformers' `Trainer` 370 MB (+450 MB)" in line
    assert "adds 300 MB to ours and 20 MB to HF's (+280 MB)" in line
    assert "1800 MB and 2200 MB (-400 MB)" in line
    assert finetuning_memory.limit_line(results, {"ours": {"error": "x"}, "hf": {}}) == "The parts of the gap: not measured."
