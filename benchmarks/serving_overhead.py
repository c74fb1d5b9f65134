"""Server overhead: CPU-seconds per sentence of tools/serve.py at 32 clients against the same export
called in-process at batch 32.

Model: a MiniLM-shape classifier export (6 layers, hidden 384, 12 heads, intermediate 1536, seeded
random weights, all-MiniLM-L6-v2's uncased 30522-piece vocabulary, sequence length 128, float32).
Text: Rotten Tomatoes critic snippets (the dev split, held out), one sentence per request.

Measured: the server (its defaults: batches of up to 32 rows, 5 ms wait) driven by 32 closed-loop
clients (`serving_load.drive`) for a fixed time after a warm-up; the CPU-seconds the server process
spent in that time (user + system, from /proc/PID/stat, so the load generator on the same cores
does not count) over the sentences it answered. In-process: `serving_default` of the same
SavedModel in a fresh process, batches of 32 distinct sentences in a loop for the same time, its
own CPU-seconds (`time.process_time`) over the sentences. The ratio of the two is the server's
overhead (goal ≤ 1.35×): HTTP, JSON, the queue and the batches it forms, as run. The server's
batch sizes come from its `/metrics` (`kbz_batch_size`).
"""

import argparse
import asyncio
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.request

from benchmarks._subprocess import run_config
from benchmarks.common import conditions_line, method_line
from benchmarks.serving_load import NAME, drive, held_out_texts, start_server

MODULE = "benchmarks.serving_overhead"
FULL = dict(clients=32, duration_s=60.0, warmup_s=10.0, rows=2000, sequence_length=128)
QUICK = dict(clients=32, duration_s=5.0, warmup_s=2.0, rows=256, sequence_length=32)
MINILM = dict(num_layers=6, hidden_dim=384, num_heads=12, intermediate_dim=1536)


def cpu_seconds(pid):
    """User + system CPU-seconds of process `pid` so far (/proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def prepare(workdir, sequence_length):
    """Worker: the MiniLM-shape classifier (seeded random weights) exported; returns its path."""
    import keras  # lazy: the worker process only

    from benchmarks.classification.sides import minilm_vocabulary  # lazy: as above
    from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor, BertTokenizer, export  # lazy: as above

    keras.utils.set_random_seed(0)
    backbone = BertBackbone(30522, MINILM["num_layers"], MINILM["num_heads"], MINILM["hidden_dim"],
                            MINILM["intermediate_dim"], max_sequence_length=512, dtype="float32")
    preprocessor = BertPreprocessor(BertTokenizer(minilm_vocabulary(), lowercase=True), sequence_length=sequence_length)
    path = os.path.join(workdir, "minilm", "1")
    export(BertClassifier(backbone, 2, preprocessor=preprocessor, labels=["rotten", "fresh"]), path, signatures=("text",))
    return {"saved_model": path}


def in_process(export_dir, texts, batch_size, duration_s, warmup_s):
    """Worker: `serving_default` in this process on batches of `batch_size`; its CPU-seconds per sentence."""
    import tensorflow as tf  # lazy: the worker process only
    import tensorflow_text  # noqa: F401  # lazy: registers the export's tokenizer ops, worker only

    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    batches = [texts[i : i + batch_size] for i in range(0, len(texts) - batch_size + 1, batch_size)]
    i, end = 0, time.perf_counter() + warmup_s
    while time.perf_counter() < end:
        serve(text=tf.constant(batches[i % len(batches)]))
        i += 1
    count, cpu, start = 0, time.process_time(), time.perf_counter()
    while time.perf_counter() - start < duration_s:
        serve(text=tf.constant(batches[i % len(batches)]))
        count += batch_size
        i += 1
    wall = time.perf_counter() - start
    return {"sentences": count, "cpu_s": time.process_time() - cpu, "wall_s": wall}


def batch_sizes(url):
    """Mean rows per call of the signature so far, from the server's `/metrics`."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    total = re.search(rf'^kbz_batch_size_sum{{model="{NAME}"}} (\S+)$', text, re.M)
    calls = re.search(rf'^kbz_batch_size_count{{model="{NAME}"}} (\S+)$', text, re.M)
    return (float(total.group(1)), float(calls.group(1))) if total and calls else (0.0, 0.0)


def measure_server(export_dir, texts, settings):
    """The server under `clients` closed-loop clients: its CPU-seconds and sentences in the measured time."""
    process, url = start_server(export_dir, 32)
    try:
        asyncio.run(drive(url, texts, settings["clients"], settings["warmup_s"], 0.0))  # warm-up, not counted
        rows_before, calls_before = batch_sizes(url)
        cpu_before = cpu_seconds(process.pid)
        row = asyncio.run(drive(url, texts, settings["clients"], settings["duration_s"], 0.0))
        cpu = cpu_seconds(process.pid) - cpu_before
        rows, calls = batch_sizes(url)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
    sentences = row["sentences_per_s"] * settings["duration_s"]
    return {"sentences": sentences, "cpu_s": cpu, "errors": row["errors"], "p50_ms": row["p50_ms"],
            "p99_ms": row["p99_ms"], "mean_batch": (rows - rows_before) / max(calls - calls_before, 1)}


def run(args):
    """Runs the section and returns its Markdown."""
    quick = bool(getattr(args, "quick", False))
    settings = dict(QUICK if quick else FULL)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as workdir:
        prepared = run_config(MODULE, "prepare", dict(workdir=workdir, sequence_length=settings["sequence_length"]))
        if "error" in prepared:
            raise RuntimeError(f"export failed: {prepared['error']}")
        texts = held_out_texts(settings["rows"])
        batch = run_config(MODULE, "in_process", dict(export_dir=prepared["saved_model"], texts=texts, batch_size=32,
                                                      duration_s=settings["duration_s"], warmup_s=settings["warmup_s"]))
        if "error" in batch:
            raise RuntimeError(f"in-process run failed: {batch['error']}")
        served = measure_server(prepared["saved_model"], texts, settings)
    load_after = os.getloadavg()
    own = batch["cpu_s"] / batch["sentences"]
    server = served["cpu_s"] / max(served["sentences"], 1)
    ratio = server / own
    return "\n".join([
        "## Server overhead: CPU-seconds per sentence, tools/serve.py at 32 clients vs in-process batch 32",
        "",
        "| how | sentences | CPU-seconds | CPU-ms per sentence | notes |",
        "|---|---|---|---|---|",
        f"| in-process `serving_default`, batch 32 | {batch['sentences']} | {batch['cpu_s']:.1f} | {own * 1000:.2f} | "
        f"{batch['sentences'] / batch['wall_s']:.1f} sentences/s |",
        f"| tools/serve.py, {settings['clients']} clients (server process only) | {served['sentences']:.0f} | "
        f"{served['cpu_s']:.1f} | {server * 1000:.2f} | mean batch {served['mean_batch']:.1f} rows; p50 "
        f"{served['p50_ms']:.0f} ms, p99 {served['p99_ms']:.0f} ms; {served['errors']} errors |",
        "",
        f"The server spends {ratio:.2f}× the CPU-seconds per sentence of the in-process batch-32 calls (goal ≤ 1.35×: "
        f"{'met' if ratio <= 1.35 else 'not met'}{' in this run' if not quick else '; quick run: not a measurement'}).",
        "",
        f"Model: MiniLM shape (L{MINILM['num_layers']} H{MINILM['hidden_dim']} A{MINILM['num_heads']}, intermediate "
        f"{MINILM['intermediate_dim']}, random weights, 30522-piece uncased vocabulary), float32, sequence length "
        f"{settings['sequence_length']}; {len(texts)} held-out sentences; {settings['duration_s']:g} s measured after "
        f"{settings['warmup_s']:g} s of warm-up, each side.",
        "",
        conditions_line(load_before, load_after, "the load generator runs on the same cores (its CPU is not counted)."),
        "",
        method_line(__doc__),
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds per side, sequence length 32")
    print(run(parser.parse_args(argv)))


if __name__ == "__main__":  # python -m benchmarks.serving_overhead --quick
    main()
