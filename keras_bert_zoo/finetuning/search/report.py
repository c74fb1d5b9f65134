"""What a fine-tuning search found, for a person: a Markdown table and a heatmap per epoch count."""

import os

from keras_bert_zoo.utils.files import atomic_write_text


def results_markdown(rows, objective, title="Fine-tuning search"):
    """Every trial (hyperparameters, restart, dev metrics, time), the best marked."""
    metric_names = sorted({k for r in rows for k in r} - {"learning_rate", "batch_size", "epochs", "restart",
                                                           "seconds", "best"})
    head = ["learning rate", "batch", "epochs", "restart"] + metric_names + ["seconds", "best"]
    lines = [f"# {title}", "", f"Objective: `{objective}` on the whole dev set at the end of each run "
             "(the best restart of a grid point counts, as in the paper).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"{r['learning_rate']:g}", str(r["batch_size"]), str(r["epochs"]), str(r["restart"])]
        cells += [f"{r[m]:.4f}" if m in r else "" for m in metric_names]
        cells += [f"{r['seconds']:.1f}", "**best**" if r["best"] else ""]
        lines.append("| " + " | ".join(cells) + " |")
    best = [r for r in rows if r["best"]]
    if best:
        b = best[0]
        lines += ["", f"Best: learning rate {b['learning_rate']:g}, batch {b['batch_size']}, {b['epochs']} epochs, "
                      f"restart {b['restart']}: {objective} = {b[objective]:.4f}."]
    return "\n".join(lines) + "\n"


def best_restart_grid(rows, objective):
    """`{epochs: (learning_rates, batch_sizes, matrix)}`, each cell the best restart's metric."""
    grids = {}
    for epochs in sorted({r["epochs"] for r in rows}):
        sub = [r for r in rows if r["epochs"] == epochs]
        lrs = sorted({r["learning_rate"] for r in sub}, reverse=True)
        sizes = sorted({r["batch_size"] for r in sub})
        matrix = [[max((r[objective] for r in sub if r["learning_rate"] == lr and r["batch_size"] == bs),
                       default=float("nan")) for bs in sizes] for lr in lrs]
        grids[epochs] = (lrs, sizes, matrix)
    return grids


def write_search_report(rows, objective, directory, title="Fine-tuning search"):
    """Writes `results.md` and `heatmap.png` into `directory`; returns both paths."""
    os.makedirs(directory, exist_ok=True)
    md = os.path.join(directory, "results.md")
    atomic_write_text(md, results_markdown(rows, objective, title))
    png = os.path.join(directory, "heatmap.png")
    _plot_heatmaps(best_restart_grid(rows, objective), objective, png)
    return md, png


def _plot_heatmaps(grids, objective, path):
    import matplotlib  # lazy: only the heatmap needs matplotlib (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: only the heatmap needs matplotlib (start-up time)

    fig, axes = plt.subplots(1, len(grids), figsize=(3.2 * len(grids) + 1, 3.2), squeeze=False)
    values = [v for _, _, m in grids.values() for row in m for v in row if v == v]
    vmin, vmax = (min(values), max(values)) if values else (0, 1)
    for ax, (epochs, (lrs, sizes, matrix)) in zip(axes[0], grids.items()):
        image = ax.imshow(matrix, vmin=vmin, vmax=vmax, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(sizes)), [str(s) for s in sizes])
        ax.set_yticks(range(len(lrs)), [f"{lr:g}" for lr in lrs])
        ax.set_xlabel("batch size")
        ax.set_ylabel("learning rate")
        ax.set_title(f"{epochs} epochs")
        for i, row in enumerate(matrix):
            for j, v in enumerate(row):
                ax.text(j, i, f"{v:.3f}", ha="center", va="center", color="w" if v < (vmin + vmax) / 2 else "k")
    fig.colorbar(image, ax=axes[0].tolist(), label=f"dev {objective} (best restart)")
    tmp = path + ".tmp.png"
    fig.savefig(tmp, dpi=100, bbox_inches="tight")  # the tick and axis labels whole
    plt.close(fig)
    os.replace(tmp, path)
