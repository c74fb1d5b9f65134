"""docs/demo.md's transfer curve and levers from `curve.py`'s runs: a table, a PNG (the margin ours −
random with its two-standard-deviation band against pretraining compute) and the JSON the demo
reads (`docs/measurements/transfer_curve.json`: the first budget where ours beats random by more
than two standard deviations on every task, or the largest budget's margins).

    python benchmarks/transfer/report.py --curve runs/transfer/curve.json \\
        --levers runs/transfer_levers/curve.json --step-seconds 0.17

`--demo runs/demo/summary.json runs/demo-seed1/summary.json` also writes the tables `make demo` printed
(a column pair per run). `--step-seconds`: one pretraining step of the recipe on an otherwise idle
machine (the runs' own seconds include whatever else ran beside them; both are printed).
`--lever-step-seconds NAME=SECONDS`: the same for a lever whose architecture changes the compute
per step (a larger model): its budgets get minutes, a dashed line on the PNG and an entry in the JSON.
"""

import argparse
import json
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
DOC = os.path.join(ROOT, "docs", "demo.md")
PNG = os.path.join(ROOT, "docs", "transfer_curve.png")
JSON = os.path.join(ROOT, "docs", "measurements", "transfer_curve.json")
BEGIN, END = "<!-- transfer-curve:begin -->", "<!-- transfer-curve:end -->"
LEVERS_BEGIN, LEVERS_END = "<!-- transfer-levers:begin -->", "<!-- transfer-levers:end -->"
DEMO_BEGIN, DEMO_END = "<!-- demo-table:begin -->", "<!-- demo-table:end -->"


def margin(ours, random):
    """`(ours − random, two standard deviations of that difference)` (the demo's rule)."""
    return ours["test_mean"] - random["test_mean"], 2.0 * float(np.hypot(ours["test_std"], random["test_std"]))


def cell(result):
    return f"{result['test_mean']:.3f} ± {result['test_std']:.3f}"


def series_name(key, ours):
    """A run's recipe: its name (curve.py's `--name`), "recipe" for runs without levers."""
    return ours.get("name") or ("recipe" if not ours.get("levers") else key)


def points(curve, step_seconds, name="recipe"):
    """One recipe's budgets in order (the recipe's, or a lever's by its name): steps, minutes at
    `step_seconds` a step, held-out MLM, and per task the result and margin."""
    tasks = list(curve["majority"])
    rows = []
    for key, ours in curve.get("ours", {}).items():
        if series_name(key, ours) != name:
            continue
        random = curve[ours.get("random", "random")]
        record = ours["pretraining"]
        row = {"steps": record["steps"], "minutes": record["steps"] * step_seconds / 60,
               "measured_minutes": record["seconds"] / 60, "load": record["load_average"],
               "resumed_from": record.get("resumed_from", 0),
               "mlm": record["held_out"][-1]["mlm_accuracy"], "tasks": {}}
        for task in tasks:
            diff, two_std = margin(ours[task], random[task])
            row["tasks"][task] = {"ours": ours[task], "margin": diff, "two_std": two_std}
        row["beats"] = all(t["margin"] > t["two_std"] for t in row["tasks"].values())
        rows.append(row)
    return sorted(rows, key=lambda r: r["steps"])


def lever_command(name, levers, steps):
    """The curve.py command that reproduces a lever recipe's budget."""
    flags = "".join(f" --lever {k}={v}" for k, v in levers.items())
    return f"python benchmarks/transfer/curve.py --output-dir runs/transfer --steps {steps} --name {name}{flags}"


def summary(curve, rows, others=None):
    """The demo's JSON: the crossing (first budget that beats random by 2 std on every task) or the largest;
    for each other recipe in `others` ({name: rows}, the levers with a step time) its crossing or largest
    budget against random init of its own architecture, with the command that reproduces it."""
    crossing = next((r for r in rows if r["beats"]), None)
    pick = lambda r: {"steps": r["steps"], "minutes": round(r["minutes"], 1),  # noqa: E731
                      "margins": ", ".join(f"{t} {v['margin']:+.3f} (2σ {v['two_std']:.3f})"
                                           for t, v in r["tasks"].items())}
    first = {}  # per task: the first budget above random by 2 std on that task alone
    for task in curve["majority"]:
        row = next((r for r in rows if r["tasks"][task]["margin"] > r["tasks"][task]["two_std"]), None)
        first[task] = pick(row) if row else None
    levers = []
    for name, series in (others or {}).items():
        first_both = next((r for r in series if r["beats"]), None)
        changed = next(o["levers"] for k, o in curve["ours"].items() if series_name(k, o) == name)
        levers.append({"name": name, "levers": changed, "crossing": pick(first_both) if first_both else None,
                       "largest": pick(series[-1]),
                       "command": lever_command(name, changed, (first_both or series[-1])["steps"])})
    return {"cpu": curve["cpu"], "crossing": pick(crossing) if crossing else None, "levers": levers,
            "largest": pick(rows[-1]) if rows else None, "first_by_task": first,
            "random": {t: curve["random"][t]["test_mean"] for t in curve["majority"]},
            "real": {t: curve["real"][t]["test_mean"] for t in curve["majority"]} if "real" in curve else None}


def curve_table(curve, rows):
    tasks = list(curve["majority"])
    head = "| pretraining | held-out MLM | " + " | ".join(f"{t}: ours | ours − random (2σ)" for t in tasks) + " |"
    lines = [head, "|" + "---|" * (2 + 2 * len(tasks))]
    for r in rows:
        cells = []
        for t in tasks:
            v = r["tasks"][t]
            mark = "**" if v["margin"] > v["two_std"] else ""
            cells += [cell(v["ours"]), f"{mark}{v['margin']:+.3f}{mark} ({v['two_std']:.3f})"]
        ran = f"ran {r['measured_minutes']:.0f} min at load {r['load'][0]:.1f}"
        if r["resumed_from"]:  # the seconds are the last process's: the steps after its checkpoint
            ran = f"resumed at step {r['resumed_from']:,}, the rest ran {r['measured_minutes']:.0f} min at load {r['load'][0]:.1f}"
        lines.append(f"| {r['steps']:,} steps (~{r['minutes']:.0f} min; {ran}) | {r['mlm']:.3f} | "
                     + " | ".join(cells) + " |")
    for name in ("random", "real"):
        if name in curve:
            label = "random init (same architecture)" if name == "random" else "real all-MiniLM-L6-v2, fine-tuned"
            lines.append(f"| {label} | – | " + " | ".join(f"{cell(curve[name][t])} | –" for t in tasks) + " |")
    lines.append("| majority class | – | " + " | ".join(f"{curve['majority'][t]:.3f} | –" for t in tasks) + " |")
    return "\n".join(lines)


def levers_table(levers, step_seconds=None):
    """A row per lever run: what changed, its budget (and its minutes, for the recipes whose idle
    step time `step_seconds` names), each task's result and margin against the random init of its
    own architecture, and the change against the recipe at the same steps (kept into the recipe only
    if better by more than 2σ on every task)."""
    step_seconds = step_seconds or {}
    tasks = list(levers["majority"])
    recipe = {o["pretraining"]["steps"]: o for o in levers.get("ours", {}).values() if not o.get("levers")}
    lines = ["| lever (changed from the recipe) | steps | held-out MLM | "
             + " | ".join(f"{t}: ours − random (2σ) [ours]" for t in tasks) + " | against the recipe at its steps (2σ) | kept |",
             "|" + "---|" * (5 + len(tasks))]
    for key, ours in sorted(levers.get("ours", {}).items(), key=lambda kv: (series_name(*kv), kv[1]["pretraining"]["steps"])):
        random = levers[ours.get("random", "random")]
        record = ours["pretraining"]
        cells = []
        for t in tasks:
            diff, two_std = margin(ours[t], random[t])
            cells.append(f"{diff:+.3f} ({two_std:.3f}) [{ours[t]['test_mean']:.3f}]")
        base = recipe.get(record["steps"])
        if not ours.get("levers"):
            cells += ["–", "recipe"]
        elif base is None:
            cells += ["no recipe run at these steps", "–"]
        else:
            against = [margin(ours[t], base[t]) for t in tasks]
            worse = [t for t, (d, band) in zip(tasks, against) if d < -band]
            verdict = ("yes: better beyond 2σ on every task" if all(d > band for d, band in against)
                       else f"no: worse beyond 2σ on {', '.join(worse)}" if worse else "no: within 2σ")
            cells += [", ".join(f"{d:+.3f} ({band:.3f})" for d, band in against), verdict]
        changed = ", ".join(f"{k}={v}" for k, v in ours.get("levers", {}).items()) or "none (the recipe)"
        name = series_name(key, ours)
        budget = f"{record['steps']:,}"
        if name in step_seconds:
            budget += f" (~{record['steps'] * step_seconds[name] / 60:.0f} min)"
        lines.append(f"| {name}: {changed} | {budget} | {record['held_out'][-1]['mlm_accuracy']:.3f} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def demo_table(summaries):
    """The table each `make demo` run printed (its `summary.json`): a row per start, a column per task and
    run, mean ± std over the run's seeds on test; above it, each run's command, time, CPU and load."""
    tasks = summaries[0]["finetuning"]["tasks"]
    lines, head = [], []
    for s in summaries:
        f, seed = s["finetuning"], s["args"]["seed"]
        seeds = f"seeds {f['seeds'][0]}–{f['seeds'][-1]}"
        command = "make demo" if seed == 0 else f"python tools/quickstart.py --seed {seed}"
        stages = ", ".join(f"{name} {s['seconds'][name] / 60:.1f}" for name in ("pretrain", "finetune", "serve")
                           if name in s["seconds"])
        lines.append(f"- `{command}` ({seeds}): {s['total_seconds'] / 60:.1f} minutes after the install ({stages}), "
                     f"{s.get('cpu', 'CPU kind not recorded')}, {s.get('cores', '?')} cores, {s['args'].get('precision') or 'float32'}, load average "
                     f"{s['load_average_start']:.1f} at the start, {s['load_average_end']:.1f} at the end")
        head += [f"{t}, {seeds}" for t in tasks]
    lines += ["", "| start | " + " | ".join(head) + " |", "|" + "---|" * (1 + len(head))]
    names = {"real": "real all-MiniLM-L6-v2 (frozen features)", "ours": "ours ({steps:,} steps)",
             "random": "random init (same architecture)"}
    for start in ("real", "ours", "random"):
        label = names[start].format(steps=summaries[0]["finetuning"]["our_steps"])
        lines.append(f"| {label} | " + " | ".join(cell(s["finetuning"][t][start]) for s in summaries for t in tasks)
                     + " |")
    lines.append("| majority class | " + " | ".join(f"{s['finetuning'][t]['majority']:.3f}" for s in summaries
                                                   for t in tasks) + " |")
    margins = [margin(s["finetuning"][t]["ours"], s["finetuning"][t]["random"]) for s in summaries for t in tasks]
    lines.append("| ours − random (2σ) | " + " | ".join(f"{d:+.3f} ({band:.3f})" for d, band in margins) + " |")
    return "\n".join(lines)


def plot(curve, rows, path, others=None):
    """The recipe's margins against compute, one line per task; `others` ({name: rows}) adds a
    dashed line per task for each other recipe with a known step time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(curve["majority"])
    fig, ax = plt.subplots(figsize=(7, 4.2))
    series = [("recipe", rows, "-", "o")] + [(name, other, "--", "s") for name, other in (others or {}).items()]
    for name, series_rows, style, marker in series:
        minutes = [r["minutes"] for r in series_rows]
        for task, color in zip(tasks, ("tab:blue", "tab:orange")):
            margins = [r["tasks"][task]["margin"] for r in series_rows]
            band = [r["tasks"][task]["two_std"] for r in series_rows]
            label = f"{task}: ours − random (bars: 2 std)" if name == "recipe" else f"{task}, {name}"
            ax.errorbar(minutes, margins, yerr=band, marker=marker, linestyle=style, capsize=4, color=color,
                        mfc="white" if name != "recipe" else color, label=label)
    ax.axhline(0.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ticks = []
    for m in sorted({round(r["minutes"], 1) for _, series_rows, _, _ in series for r in series_rows}):
        if not ticks or m > 1.25 * ticks[-1]:  # closer labels would print over each other
            ticks.append(m)
    ax.set_xticks(ticks, [f"{m:.3g}" for m in ticks])  # the budgets themselves, not powers of ten
    ax.minorticks_off()
    ax.set_xlabel(f"pretraining compute: minutes of 2 cores ({curve['cpu']})")
    ax.set_ylabel("test accuracy margin over random init")
    ax.set_title("Our pretraining against random init, the fair protocol, 3 seeds")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, format="png")
    plt.close(fig)
    return path


def replace_section(text, begin, end, body):
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise ValueError(f"{DOC} has no {begin} ... {end} section.")
    return pattern.sub(lambda _: f"{begin}\n{body}\n{end}", text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--curve", required=True)
    p.add_argument("--levers", default=None)
    p.add_argument("--step-seconds", type=float, required=True)
    p.add_argument("--lever-step-seconds", action="append", default=[], metavar="NAME=SECONDS",
                   help="A lever recipe's idle step time (one whose architecture changes the compute per step): "
                        "its budgets get minutes in the levers table and a dashed line on the PNG. Repeatable.")
    p.add_argument("--demo", nargs="+", default=None, metavar="SUMMARY",
                   help="`make demo` runs' summary.json files, for the table of what the demo printed.")
    args = p.parse_args(argv)
    with open(args.curve, encoding="utf-8") as f:
        curve = json.load(f)
    rows = points(curve, args.step_seconds)
    lever_seconds = {}
    for item in args.lever_step_seconds:
        name, _, seconds = item.partition("=")
        try:
            lever_seconds[name] = float(seconds)
        except ValueError:
            p.error(f"--lever-step-seconds takes NAME=SECONDS (the lever's --name, seconds a step); got {item!r}.")
    others = {name: points(curve, seconds, name=name) for name, seconds in lever_seconds.items()}
    for name, other in others.items():
        if not other:
            p.error(f"--lever-step-seconds {name}=...: {args.curve} has no runs named {name!r}.")
    from keras_bert_zoo.utils.files import atomic_write_text

    atomic_write_text(JSON, json.dumps(summary(curve, rows, others), indent=1) + "\n")
    plot(curve, rows, PNG, others)
    text = open(DOC, encoding="utf-8").read()
    text = replace_section(text, BEGIN, END, curve_table(curve, rows))
    if args.levers:
        with open(args.levers, encoding="utf-8") as f:
            text = replace_section(text, LEVERS_BEGIN, LEVERS_END, levers_table(json.load(f), dict(lever_seconds, recipe=args.step_seconds)))
    if args.demo:
        summaries = []
        for path in args.demo:
            with open(path, encoding="utf-8") as f:
                summaries.append(json.load(f))
        text = replace_section(text, DEMO_BEGIN, DEMO_END, demo_table(summaries))
    atomic_write_text(DOC, text)
    print(curve_table(curve, rows))
    return rows


if __name__ == "__main__":
    main()
