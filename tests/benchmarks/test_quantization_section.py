"""benchmarks/quantization.py: the configurations it runs, and its table and goal ratios."""

import numpy as np

from benchmarks import quantization


def test_collect_runs_every_configuration_and_table_computes_the_goals(tmp_path):
    calls = []
    gold = quantization._texts("dev")[1]
    rates = {"float32": 10.0, "mixed_bfloat16": 20.0, "int8": 36.0, "ort_fp32": 12.0, "ort_int8": 30.0}

    def fake(module, func, kwargs):
        calls.append((func, kwargs.get("config"), kwargs.get("model_dir"), kwargs.get("count")))
        if func == "prepare":
            return {"base": "B", "tuned_preset": "P", "tuned_hf": "H"}
        labels = list(gold) if kwargs["count"] is None else [0] * kwargs["count"]
        if kwargs["count"] is None and kwargs["config"] == "int8":
            labels[0] = 1 - labels[0]  # one dev row wrong: 100 / len(gold) points lost
        return {"labels": labels, "rate": rates[kwargs["config"]], "spread": 0.1}

    results = quantization.collect(dict(quantization.QUICK), str(tmp_path), call=fake)
    assert calls[0][0] == "prepare" and len(calls) == 1 + 2 * 5
    assert {c[1:3] for c in calls[1:6]} == {(c, "B") for c in quantization.OURS + quantization.ORT}
    assert {c[1:3] for c in calls[6:]} == {(c, "P") for c in quantization.OURS} | {(c, "H") for c in quantization.ORT}
    rows, goals = quantization.table(results)
    assert len(rows) == 5 and rows[2] == f"| ours int8 (VNNI) | 36.0 ± 10% | 100.0% | {1 - 1 / len(gold):.4f} | 99.9% |"
    assert goals["int8_vs_ort_int8"] == 36.0 / 30.0 and goals["int8_vs_bf16"] == 36.0 / 20.0
    assert goals["int8_vs_fp32"] == 36.0 / 10.0
    np.testing.assert_allclose(goals["int8_accuracy_loss_points"], 100 / len(gold))
