"""The classification section's arithmetic: FLOPs at real lengths, the row sample, merging rounds,
and the goal ratios against the faster peer (no model is run)."""

import pytest

from benchmarks import classification
from benchmarks.classification import notes
from benchmarks.classification.sides import sample_rows


def test_forward_flops_match_the_documented_bert_base_count():
    # ../shared/PERFORMANCE.md: length 128, dense 21.74 + attention 0.60 = 22.35 GFLOP.
    assert notes.forward_flops(128) / 1e9 == pytest.approx(22.35, abs=0.005)
    dense = 12 * 2 * 27 * (4 * 768**2 + 2 * 768 * 3072)
    assert notes.forward_flops(27) == dense + 12 * 4 * 27 * 27 * 768


def test_sample_rows_spread_over_the_pool():
    assert sample_rows(list(range(100)), 4) == [0, 25, 50, 75]
    assert sample_rows(list(range(3)), 10) == [0, 1, 2]


def test_merge_pools_rounds_and_keeps_a_failure():
    parts = [{"latency_s": [0.01, 0.03], "throughput_s": [2.0], "labels": [0, 1]},
             {"latency_s": [0.02, 0.5], "throughput_s": [4.0], "labels": [1, 1], "forward_s": [0.005]}]
    merged = classification.merge(parts, pieces=[10, 20, 30, 40], rows=2)
    assert merged["calls"] == 4 and merged["latency_ms"] == pytest.approx(25.0)
    assert merged["p99_ms"] == pytest.approx(500.0)
    assert merged["rate"] == pytest.approx(0.75)  # median of 2/2 and 2/4 rows/s
    assert merged["spread"] == pytest.approx(0.5 / 0.75)
    assert merged["mean_pieces"] == 15 and merged["labels"] == [1, 1] and merged["forward_ms"] == 5.0
    assert classification.merge(parts + [{"error": "boom"}], [1], 1) == {"error": "boom"}


def test_goals_divide_by_the_like_for_like_peer():
    def side(rate, latency):
        return {"rate": rate, "latency_ms": latency, "rows": 2, "p99_ms": latency, "calls": 1, "spread": 0.0}

    # The default model computes in float32 (its reported policy), the bf16 opt-in at twice its rate.
    results = {"ours (defaults)": dict(side(30.0, 15.0), forward_ms=10.0, policy="float32"),
               "ours (bf16, opt-in)": dict(side(60.0, 20.0), policy="mixed_bfloat16"),
               "ours exported (float32)": dict(side(40.0, 12.0), forward_ms=10.0),
               "keras-hub (default, 512)": side(1.0, 900.0), "HF pipeline (fp32)": side(10.0, 100.0),
               "keras-hub (sequence_length=128)": side(12.0, 300.0),
               "HF pipeline (bf16 autocast)": side(20.0, 80.0)}
    roof = {"float32": {"gflops": 100.0}, "bfloat16": {"gflops": 200.0}}
    text = "\n".join(notes.goals(results, [128, 128], roof))
    assert "ours (defaults: float32) 30.0 sentences/s vs HF pipeline (fp32) 10.0: **3.00×**" in text
    assert "ours (bf16, opt-in) 60.0 vs HF pipeline (bf16 autocast) 20.0: **3.00×**" in text
    assert f"**{30 * notes.forward_flops(128) / 1e9:.0f}%** of the float32 roof" in text
    assert "**1.20×**" in text  # served 12 ms over its own forward 10 ms
    # Each against the roof of its own policy: 60 rows/s × 22.35 GFLOP over the bf16 roof of 200
    # GFLOP/s, 30 over the float32 roof of 100.
    assert f"ours (bf16, opt-in) {60 * notes.forward_flops(128) / 1e9 / 2:.0f}%" in text
    assert f"ours (defaults) {30 * notes.forward_flops(128) / 1e9:.0f}%" in text
    lever = "\n".join(notes.lever_lines({"rates": {"as_is": 1.0}, "rows": 2, "widths": [8], "sequence_length": 128},
                                         results))
    assert ('the `dtype="mixed_bfloat16"` opt-in 60.0 vs the default policy (float32 here) 30.0 sentences/s '
            '(2.00×)') in lever


def test_the_profile_names_the_time_of_each_kind_of_op_and_the_budget_goal_1_leaves():
    tokens = 1000
    dense_gflop = 12 * 2 * tokens * (4 * 768**2 + 2 * 768 * 3072) / 1e9  # 169.9
    profile = {"wall_ms": 1200.0, "rows": 32, "real_tokens": tokens, "padded_cells": 1100,
               "categories_ms": {"dense matmuls (Q, K, V, output, FFN, pooler, head)": 1000 * dense_gflop / 170,
                                 "softmax": 100.0, "layer norms": 100.0}}
    results = {"HF pipeline (fp32)": {"rate": 10.0}, "HF pipeline (bf16 autocast)": {"rate": 20.0}}
    text = "\n".join(notes.profile_lines(profile, {"float32": {"gflops": 200.0}}, results))
    assert "our float32 forward" in text
    assert "| softmax | 100 |" in text and "| layer norms | 100 |" in text
    # 170 GFLOP/s = 85% of the roof; at the roof 849 ms; 3× HF's 10/s = 32 rows in 1067 ms.
    assert "run at 170 GFLOP/s (85% of the 200 GFLOP/s float32 roof)" in text
    assert f"at the roof they alone would take {1000 * dense_gflop / 200:.0f} ms. Goal 1 (3× HF's 10.0" in text
    assert "in 1067 ms" in text and "the other ops take 200 ms today" in text
    assert "casts" not in "\n".join(notes.profile_lines(dict(profile, casts_ms=0.0, kernel_casts_ms=0.0),
                                                         {"float32": {"gflops": 200.0}}, results))
    assert "not measured (boom)" in notes.profile_lines({"error": "boom"}, {}, results)[0]

    # bf16: goal 3 is 2× HF under autocast (20/s: 32 rows in 800 ms), against the bfloat16 roof.
    bf16 = dict(profile, casts_ms=60.0, kernel_casts_ms=45.0)
    text = "\n".join(notes.profile_lines(bf16, {"bfloat16": {"gflops": 400.0}}, results, "mixed_bfloat16"))
    assert 'our bf16 (`dtype="mixed_bfloat16"`) forward' in text
    assert "(42% of the 400 GFLOP/s bfloat16 roof)" in text and "Goal 3 (2× HF's 20.0" in text
    assert "in 800 ms" in text and "casts: 60 ms (the dense layers' float32 kernels read as bfloat16: 45 ms)" in text


def test_the_profile_groups_ops_by_what_they_compute():
    from benchmarks.classification import profile

    assert profile.categorize("model/encoder_0/attention_layer_norm/moments/mean", "Mean") == "layer norms"
    assert profile.categorize("model/encoder_0/intermediate_dense/MatMul", "_MklNativeFusedMatMul").startswith("dense")
    assert profile.categorize("model/encoder_0/attention/MatMul", "_MklBatchMatMulV2").startswith("attention")
    assert profile.categorize("model/encoder_0/mul_2", "Mul").startswith("element-wise")
    assert profile.categorize("model/encoder_0/Erf", "Erf") == "GELU's erf"
    assert profile.categorize("x/transpose", "_MklTranspose").startswith("transposes")
    assert profile.categorize("x/GatherV2", "GatherV2").startswith("gathers")
    # Grappler's rewritten nodes are named after it, not after an optimizer update.
    assert profile.categorize("m/layer_0/cond/ArithmeticOptimizer/FoldTransposeIntoMatMul_MatMul",
                              "_MklBatchMatMulV2").startswith("attention")
    assert profile.categorize("m/layer_0/attention_layer_norm/ArithmeticOptimizer/AddOpsRewrite_add_2",
                              "AddV2") == "layer norms"
    assert profile.categorize("bert_adamw/ResourceApplyAdam", "ResourceApplyAdam").startswith("optimizer")


def test_the_profile_tells_the_dense_kernels_casts_from_the_activations():
    from benchmarks.classification import profile

    kernel = "bert_classifier_1/bert_backbone_1/transformer_layer_3_1/intermediate_1/Cast/Cast"
    assert profile.KERNEL_CAST.search(kernel)
    assert profile.KERNEL_CAST.search("m/transformer_layer_0/attention/query/Cast/Cast")
    assert not profile.KERNEL_CAST.search("m/transformer_layer_3_1/output_layer_norm_1/Cast")
    assert not profile.KERNEL_CAST.search("m/transformer_layer_3_1/Cast_2")
