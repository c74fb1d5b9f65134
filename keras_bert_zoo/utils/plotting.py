"""Training-curve plots (matplotlib, Agg backend: no display needed)."""

import os

from keras_bert_zoo.utils.files import atomic_path


def _pyplot(history, unit):
    """matplotlib's pyplot on the Agg backend (no display needed), for a non-empty `history`."""
    if not history:
        raise ValueError(f"`history` is empty: nothing to plot. Train for at least one {unit}.")
    import matplotlib  # lazy: only the plot needs matplotlib (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: only the plot needs matplotlib (start-up time)

    return plt


def _save(plt, fig, path, title):
    """Titles `fig`, writes it to `path` as a PNG (atomically) and closes it; returns `path`."""
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return os.fspath(path)


def plot_pretraining_curves(history, path, baselines=None, title="BERT pretraining"):
    """Writes a PNG with training loss and held-out MLM/NSP accuracy over steps.

    Args:
        history: list of dicts with `step`, `loss`, `mlm_accuracy`, `nsp_accuracy`
            (None without an NSP head), e.g. `HeldOutEvaluation.history` or
            `run_pretraining(...)["held_out"]`.
        path: str. The PNG to write (atomically).
        baselines: dict or None. `unigram_accuracy` and `nsp_majority_accuracy`, drawn
            as dashed lines (e.g. `HeldOutEvaluation.baselines`, `run_pretraining(...)["baselines"]`).
        title: str. Figure title.

    Returns:
        str. `path`.
    """
    plt = _pyplot(history, "interval")
    steps = [r["step"] for r in history]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    ax_loss.plot(steps, [r["loss"] for r in history], marker="o", label="training loss (MLM + NSP)")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss")
    ax_loss.legend()
    ax_acc.plot(steps, [r["mlm_accuracy"] for r in history], marker="o", label="held-out MLM accuracy")
    if all(r.get("nsp_accuracy") is not None for r in history):
        ax_acc.plot(steps, [r["nsp_accuracy"] for r in history], marker="s", label="held-out NSP accuracy")
    baselines = baselines or {}
    if "unigram_accuracy" in baselines:
        ax_acc.axhline(baselines["unigram_accuracy"], color="C0", ls="--", label="MLM unigram baseline")
    if "nsp_majority_accuracy" in baselines:
        ax_acc.axhline(baselines["nsp_majority_accuracy"], color="C1", ls="--", label="NSP majority baseline")
    ax_acc.set_xlabel("step")
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_ylim(0, 1)
    ax_acc.legend()
    return _save(plt, fig, path, title)


def plot_finetuning_curves(history, path, baseline=None, title="fine-tuning"):
    """Writes a PNG of a fine-tuning run per epoch: training loss, the learning rate at each
    epoch's end, and the dev metrics (`dev_*`) with the baseline's as dashed lines.

    Args:
        history: list of dicts `{"epoch", "loss", "learning_rate", "dev_<metric>", ...}`
            (`training.epoch_log.EpochLog.history`).
        path: str. The PNG to write (atomically).
        baseline: dict or None. `{metric: value}` of a model that learned nothing (the
            run's `results["baseline"]["dev"]`).
        title: str. Figure title.

    Returns:
        str. `path`.
    """
    plt = _pyplot(history, "epoch")
    epochs = [row["epoch"] for row in history]
    fig, (ax_loss, ax_rate, ax_dev) = plt.subplots(1, 3, figsize=(14, 4))
    ax_loss.plot(epochs, [row.get("loss") for row in history], marker="o", label="training loss")
    ax_rate.plot(epochs, [row.get("learning_rate") for row in history], marker="o", color="C2",
                 label="learning rate at the epoch's end")
    names = sorted({key[len("dev_"):] for row in history for key in row if key.startswith("dev_")})
    for i, name in enumerate(names):
        ax_dev.plot(epochs, [row.get("dev_" + name) for row in history], marker="o", color=f"C{i}", label=f"dev {name}")
        if baseline and baseline.get(name) is not None:
            ax_dev.axhline(baseline[name], color=f"C{i}", ls="--", label=f"baseline {name}")
    if not names:
        ax_dev.text(0.5, 0.5, "dev scored once, after training\n(results.json)", ha="center", va="center",
                    transform=ax_dev.transAxes)
    for ax, label in ((ax_loss, "loss"), (ax_rate, "learning rate"), (ax_dev, "dev metric")):
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.set_xticks(epochs)
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    return _save(plt, fig, path, title)
