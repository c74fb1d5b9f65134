"""The fine-tuning sections' arithmetic: goal 4's ratio, the op-by-op lines, and the memory
section's account of the gap (no model is run)."""

from benchmarks import finetuning, finetuning_memory


def test_goal_4_divides_ours_float32_by_hf_trainer_float32():
    def run(rate, **extra):
        return {"rate": rate, "warmup_s": 1.0, "peak_rss_mb": 100, "timed_rows": 16, **extra}

    results = {"ours": [run(9.0, policy="float32"), run(11.0, policy="float32")], "hf": [run(5.0)]}
    assert finetuning.goal4(results, {}) == "ours (float32) 10.00 vs 5.00 examples/s: **2.00×**"
    assert finetuning.goal4({"ours": [{"error": "x"}], "hf": [run(5.0)]}, {}) == "not measured"


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
