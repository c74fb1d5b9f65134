"""Training-curve plots (matplotlib, Agg backend: no display needed)."""

import os

from keras_bert_zoo.utils.files import atomic_path


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
    if not history:
        raise ValueError("`history` is empty: nothing to plot. Train for at least one interval.")
    import matplotlib  # lazy: only the plot needs matplotlib (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: only the plot needs matplotlib (start-up time)

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
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    return os.fspath(path)
