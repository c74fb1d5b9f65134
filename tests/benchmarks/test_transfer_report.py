"""benchmarks/transfer/report.py: the margins, the 2-std rule, the crossing per task and on both, the table and
the PNG, on a curve written by hand (the numbers are checked against arithmetic done here)."""

import importlib.util
import math
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location("transfer_report", os.path.join(ROOT, "benchmarks", "transfer",
                                                                               "report.py"))
report = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(report)


def _result(mean, std):
    return {"test_mean": mean, "test_std": std}


def _budget(steps, polarity, definitions):
    held_out = [{"step": steps, "mlm_accuracy": 0.1}]
    return {"pretraining": {"steps": steps, "seconds": steps * 0.3, "load_average": [2.0, 2.0], "held_out": held_out},
            "polarity": _result(*polarity), "definitions": _result(*definitions)}


CURVE = {"cpu": "test kind", "majority": {"polarity": 0.55, "definitions": 0.5},
         "random": {"polarity": _result(0.67, 0.008), "definitions": _result(0.61, 0.003)},
         "ours": {"recipe-1000": _budget(1000, (0.64, 0.009), (0.60, 0.005)),
                  "recipe-4000": _budget(4000, (0.64, 0.007), (0.647, 0.010)),  # definitions beats, polarity not
                  "recipe-16000": _budget(16000, (0.70, 0.006), (0.66, 0.004)),  # both beat
                  "lever": dict(_budget(2000, (0.9, 0.0), (0.9, 0.0)), levers={"nsp": True})}}


def test_margins_follow_the_two_std_rule_and_levers_stay_off_the_curve():
    rows = report.points(CURVE, step_seconds=0.15)
    assert [r["steps"] for r in rows] == [1000, 4000, 16000]
    definitions = rows[1]["tasks"]["definitions"]
    assert math.isclose(definitions["margin"], 0.647 - 0.61)
    assert math.isclose(definitions["two_std"], 2 * math.hypot(0.010, 0.003))
    assert [r["beats"] for r in rows] == [False, False, True]
    assert math.isclose(rows[2]["minutes"], 16000 * 0.15 / 60)


def test_the_summary_names_the_first_budget_on_both_tasks_and_on_each():
    summary = report.summary(CURVE, report.points(CURVE, step_seconds=0.15))
    assert summary["crossing"]["steps"] == 16000 and summary["largest"]["steps"] == 16000
    assert summary["first_by_task"]["definitions"]["steps"] == 4000
    assert summary["first_by_task"]["polarity"]["steps"] == 16000
    assert summary["random"] == {"polarity": 0.67, "definitions": 0.61}


def test_the_table_bolds_only_the_margins_beyond_two_std_and_the_png_is_drawn(tmp_path):
    rows = report.points(CURVE, step_seconds=0.15)
    table = report.curve_table(CURVE, rows)
    lines = table.splitlines()
    assert lines[2].count("**") == 0 and lines[3].count("**") == 2 and lines[4].count("**") == 4
    assert "| 4,000 steps (~10 min; ran 20 min at load 2.0) | 0.100 | 0.640 ± 0.007 | -0.030 (0.021) |" in table
    resumed = dict(CURVE, ours={"recipe-4000": dict(CURVE["ours"]["recipe-4000"], pretraining=dict(
        CURVE["ours"]["recipe-4000"]["pretraining"], resumed_from=3000))})
    assert "| 4,000 steps (~10 min; resumed at step 3,000, the rest ran 20 min at load 2.0) |" in report.curve_table(
        resumed, report.points(resumed, step_seconds=0.15))
    path = report.plot(CURVE, rows, str(tmp_path / "curve.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_lever_is_compared_with_the_recipe_at_its_own_steps():
    curve = dict(CURVE, ours=dict(CURVE["ours"], lever=dict(_budget(4000, (0.65, 0.01), (0.64, 0.01)),
                                                             name="lever", levers={"nsp": True})))
    for o in curve["ours"].values():
        o.setdefault("name", "recipe")
    rows = report.levers_table(curve).splitlines()
    lever = next(r for r in rows if r.startswith("| lever: nsp=True | 4,000 |"))
    assert lever.endswith("| +0.010 (0.024), -0.007 (0.028) | no: within 2σ |")
    assert all(r.endswith("| – | recipe |") for r in rows if r.startswith("| recipe:"))


def test_a_lever_of_its_own_compute_gets_its_own_minutes_and_a_dashed_line(tmp_path):
    size = {"random": "random-size",
            "random-size": {"polarity": _result(0.65, 0.01), "definitions": _result(0.60, 0.01)}}
    ours = dict(CURVE["ours"], **{f"size-{n}": dict(_budget(n, (0.70, 0.01), (0.66, 0.01)), name="size",
                                                    levers={"num_layers": 4}, random="random-size")
                                  for n in (3000, 1000)})
    curve = dict(CURVE, ours=ours, **{k: v for k, v in size.items() if k != "random"})
    lever = report.points(curve, step_seconds=0.6, name="size")
    assert [r["steps"] for r in lever] == [1000, 3000]  # its own runs only, in order
    assert math.isclose(lever[1]["minutes"], 3000 * 0.6 / 60)
    assert math.isclose(lever[1]["tasks"]["polarity"]["margin"], 0.70 - 0.65)  # against its own random init
    assert [r["steps"] for r in report.points(curve, step_seconds=0.15)] == [1000, 4000, 16000]
    table = report.levers_table(curve, {"size": 0.6, "recipe": 0.15}).splitlines()
    assert any(r.startswith("| size: num_layers=4 | 3,000 (~30 min) | 0.100 |") for r in table)
    assert any(r.startswith("| recipe: none (the recipe) | 16,000 (~40 min) |") for r in table)
    assert any(r.startswith("| lever: nsp=True | 2,000 | ") for r in table)  # no step time given: no minutes
    entry, = report.summary(curve, report.points(curve, 0.15), others={"size": lever})["levers"]
    assert entry["crossing"]["steps"] == 1000 and entry["largest"]["steps"] == 3000  # 0.05 > 2·√2·0.01 on both
    assert entry["command"] == ("python benchmarks/transfer/curve.py --output-dir runs/transfer --steps 1000 "
                                "--name size --lever num_layers=4")
    path = report.plot(curve, report.points(curve, 0.15), str(tmp_path / "curve.png"), others={"size": lever})
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _demo_run(seed, ours_polarity):
    tasks = {"polarity": {"real": _result(0.75, 0.002), "ours": _result(*ours_polarity), "random": _result(0.67, 0.009),
                          "majority": 0.558},
             "definitions": {"real": _result(0.67, 0.004), "ours": _result(0.59, 0.013), "random": _result(0.63, 0.022),
                             "majority": 0.499}}
    return {"args": {"seed": seed, "precision": None}, "cpu": "test kind", "cores": 2, "total_seconds": 522.0,
            "seconds": {"serve": 12.0, "finetune": 290.0, "pretrain": 220.0}, "load_average_start": 0.5,
            "load_average_end": 1.5,
            "finetuning": dict(tasks, tasks=["polarity", "definitions"], seeds=[seed, seed + 1, seed + 2],
                               our_steps=1500)}


def test_the_demo_table_has_a_column_per_task_and_run_and_each_runs_conditions():
    lines = report.demo_table([_demo_run(0, (0.62, 0.013)), _demo_run(1, (0.70, 0.004))]).splitlines()
    assert lines[0] == ("- `make demo` (seeds 0–2): 8.7 minutes after the install (pretrain 3.7, finetune 4.8, "
                        "serve 0.2), test kind, 2 cores, float32, load average 0.5 at the start, 1.5 at the end")
    assert lines[1].startswith("- `python tools/quickstart.py --seed 1` (seeds 1–3):")
    assert lines[3] == ("| start | polarity, seeds 0–2 | definitions, seeds 0–2 | polarity, seeds 1–3 | "
                        "definitions, seeds 1–3 |")
    assert lines[6] == "| ours (1,500 steps) | 0.620 ± 0.013 | 0.590 ± 0.013 | 0.700 ± 0.004 | 0.590 ± 0.013 |"
    assert lines[8] == "| majority class | 0.558 | 0.499 | 0.558 | 0.499 |"
    two_std = 2 * math.hypot(0.013, 0.009)
    assert lines[9].startswith(f"| ours − random (2σ) | -0.050 ({two_std:.3f}) | -0.040 (")
    assert f"| +0.030 ({2 * math.hypot(0.004, 0.009):.3f}) |" in lines[9]
