"""Stage 2 of `tools/quickstart.py`: does our pretraining help? The fair protocol
(`keras_bert_zoo.finetuning.protocol`) on two tasks of real data, four rows each:

- `real`: all-MiniLM-L6-v2's real pretrained weights, frozen (`tools/demo/frozen_features.py`:
  fine-tuning them through the protocol takes ~30 minutes here; that row is in docs/demo.md);
- `ours`: stage 1's preset, fine-tuned;
- `random`: its architecture and vocabulary with random weights, fine-tuned;
- the majority class.

Every start gets the same learning-rate grid on the first seed, the pick on dev, every seed scored
once on test (`tools/demo/recipe.py`'s PROTOCOL and TASK_ROWS). The transfer curve
(benchmarks/transfer/, docs/demo.md) says at what pretraining budget ours overtakes random; the
table's last line names that budget and the command that runs it.
"""

import json
import os
import shutil

import numpy as np

from tools.demo import recipe
from tools.demo.stages import say

STARTS = ("real", "ours", "random")
CURVE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                     "docs", "measurements", "transfer_curve.json")


def margin(ours, random):
    """`(ours − random, two standard deviations of that difference)` over the seeds' test scores."""
    return ours["test_mean"] - random["test_mean"], 2.0 * float(np.hypot(ours["test_std"], random["test_std"]))


def crossing_line(path=CURVE):
    """What the transfer curve measured: the first budget where ours beats random by more than
    two standard deviations on every task, with its command; or the best margins."""
    if not os.path.isfile(path):
        return "no transfer curve measured yet (benchmarks/transfer/curve.py writes it)"
    with open(path, encoding="utf-8") as f:
        curve = json.load(f)
    crossing = curve.get("crossing")
    if crossing:
        return (f"the transfer curve ({curve['cpu']}) has ours above random by more than 2 std on both tasks from "
                f"{crossing['steps']:,} pretraining steps (~{crossing['minutes']:.0f} min on 2 cores): "
                f"python tools/quickstart.py --steps {crossing['steps']}")
    best = curve.get("largest")
    line = (f"the transfer curve ({curve['cpu']}) has no budget up to {best['steps']:,} steps "
            f"(~{best['minutes']:.0f} min) where ours beats random by 2 std on both tasks "
            f"(margins there: {best['margins']})")
    for task, first in (curve.get("first_by_task") or {}).items():
        if first:
            line += (f"; on {task} alone from {first['steps']:,} steps (~{first['minutes']:.0f} min): "
                     f"python benchmarks/transfer/curve.py --output-dir runs/transfer --steps {first['steps']}")
    for lever in curve.get("levers") or ():
        changed = ", ".join(f"{k}={v}" for k, v in lever["levers"].items())
        if lever["crossing"]:
            line += (f"; the {lever['name']} recipe ({changed}) beats random init of its own architecture by 2 std "
                     f"on both tasks from {lever['crossing']['steps']:,} steps (~{lever['crossing']['minutes']:.0f} "
                     f"min): {lever['command']}")
        else:
            line += (f"; the {lever['name']} recipe ({changed}) does not either, up to {lever['largest']['steps']:,} "
                     f"steps (~{lever['largest']['minutes']:.0f} min; margins there: {lever['largest']['margins']})")
    return line + "; docs/demo.md names the next lever"


def table(block):
    """The protocol's table: a row per start, a column per task, mean ± std over the seeds."""
    tasks = block["tasks"]
    width = 22
    lines = [f"  {'start':40s}" + "".join(f"{recipe.TASK_TITLES[t].split(' (')[0]:>{width}s}" for t in tasks)]
    names = {"real": "real all-MiniLM-L6-v2 (frozen features)",
             "ours": f"ours (stage 1, {block['our_steps']:,} steps)", "random": "random init (same architecture)"}
    for start in STARTS:
        cells = [f"{block[t][start]['test_mean']:.3f} ± {block[t][start]['test_std']:.3f}" for t in tasks]
        lines.append(f"  {names[start]:40s}" + "".join(f"{c:>{width}s}" for c in cells))
    lines.append(f"  {'majority class':40s}" + "".join(f"{block[t]['majority']:>{width}.3f}" for t in tasks))
    cells = []
    for t in tasks:
        diff, two_std = margin(block[t]["ours"], block[t]["random"])
        cells.append(f"{diff:+.3f} (2σ {two_std:.3f})")
    lines.append(f"  {'ours − random':40s}" + "".join(f"{c:>{width}s}" for c in cells))
    return "\n".join(lines)


def plot(block, path):
    """A panel per task: each start's mean test accuracy with its std as an error bar, the
    majority class dashed (PNG, atomic)."""
    import matplotlib  # lazy: only the plot needs matplotlib (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: only the plot needs matplotlib (start-up time)

    from keras_bert_zoo.utils.files import atomic_path  # lazy: loads TensorFlow (start-up time)

    tasks = block["tasks"]
    fig, axes = plt.subplots(1, len(tasks), figsize=(5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        means = [block[task][s]["test_mean"] for s in STARTS]
        stds = [block[task][s]["test_std"] for s in STARTS]
        bars = ax.bar(["real\n(frozen)", "ours", "random\ninit"], means, yerr=stds, capsize=6,
                      color=["tab:green", "tab:blue", "tab:gray"])
        ax.bar_label(bars, labels=[f"{m:.3f}±{s:.3f}" for m, s in zip(means, stds)], padding=8, fontsize=8)
        ax.axhline(block[task]["majority"], color="black", linestyle="--", label="majority class")
        ax.set_ylim(0.4, 1.0)
        ax.set_ylabel(f"test accuracy (mean ± std, {len(block['seeds'])} seeds)")
        ax.set_title(recipe.TASK_TITLES[task], fontsize=10)
        ax.legend(loc="upper right")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path


SERVED_TASK = "polarity"  # stage 3 serves a review classifier


def _pretrained_steps(preset):
    """The steps a preset of ours was pretrained for (the record its config holds)."""
    from keras_bert_zoo.presets.loading import read_task_config  # lazy: loads TensorFlow (start-up time)

    return int(read_task_config(preset).get("pretraining", {}).get("steps", 0))


def compare(args, run, our_preset):
    """Runs the protocol for every start on both tasks; returns the summary's `finetuning` block
    (every seed's scores under `<task>/<start>/runs`). Each start's first-seed model at its picked
    rate on polarity is saved as a preset (`<task>/<start>/preset` in the block) for stage 3."""
    from keras_bert_zoo.finetuning.protocol import (  # lazy: loads TensorFlow (start-up time)
        Ledger, ProtocolConfig, deterministic, majority_accuracy, run_protocol)
    from tools.demo.frozen_features import FrozenFeatures  # lazy: loads TensorFlow (start-up time)

    directory = run("compare")
    shutil.rmtree(directory, ignore_errors=True)  # this demo's own folder: each run starts over
    os.makedirs(directory)
    settings = dict(args.protocol, seeds=tuple(args.seed + s for s in args.protocol["seeds"]))
    config = ProtocolConfig(**settings)
    ledger = Ledger(os.path.join(directory, "ledger.jsonl"))
    deterministic()
    data = {task: recipe.task_data(task, rows=args.task_rows) for task in recipe.TASKS}
    real = FrozenFeatures(args.real_preset or recipe.real_preset_path(), args.finetune_seq_length)
    block = {"tasks": list(recipe.TASKS), "protocol": {k: list(v) if isinstance(v, tuple) else v
                                                        for k, v in settings.items()},
             "rows": {t: {s: len(data[t][s][1]) for s in ("train", "dev", "test")} for t in data},
             "seeds": list(config.seeds), "our_preset": our_preset, "our_steps": _pretrained_steps(our_preset)}
    say("compare", f"the fair protocol on {len(data)} tasks: grid {', '.join(f'{r:g}' for r in config.learning_rates)} "
        f"on seed {config.seeds[0]}, the pick on dev, seeds {', '.join(map(str, config.seeds))} on test; "
        + "; ".join(f"{t}: {r['train']:,} training rows, {r['dev']:,} dev, {r['test']:,} test"
                    for t, r in block["rows"].items()))
    for task, rows in data.items():
        block[task] = {"majority": majority_accuracy(rows["train"][1], rows["test"][1])}
        labels = recipe.TASK_LABELS[task]
        builders = recipe.start_builders(ours=our_preset, sequence_length=args.finetune_seq_length, labels=labels)
        starts = {"real": (real.build, real.task_data(rows)), "ours": (builders["ours"], rows),
                  "random": (builders["random"], rows)}
        for start in STARTS:
            build, start_data = starts[start]
            saved = os.path.join(directory, task, start, "preset")
            on_pick = None
            if task == SERVED_TASK:
                on_pick = (lambda model, s=start, path=saved, labels=labels:
                           (real.classifier(model, labels) if s == "real" else model).save_to_preset(path))
            result = run_protocol(start, task, build, start_data, config, ledger=ledger, on_pick=on_pick,
                                  log=lambda line: None if args.no_progress else print(f"  {line}", flush=True))
            block[task][start] = dict(result, preset=saved if on_pick else None)
            rate = result["learning_rate"]
            say("compare", f"{task} · {start}: test {result['test_mean']:.3f} ± {result['test_std']:.3f} "
                f"(lr {rate:g} picked on dev: {result['grid'][format(rate, 'g')]:.3f})")
    block["plot"] = plot(block, run("finetuning_comparison.png"))
    block["crossing"] = crossing_line()
    print(table(block), flush=True)
    margins = ", ".join(f"{t} {margin(block[t]['ours'], block[t]['random'])[0]:+.3f}" for t in data)
    say("compare", f"at this budget ours − random: {margins}; {block['crossing']}")
    return block
