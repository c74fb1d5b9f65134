"""Serving under load: tools/serve.py (KServe, TF Serving's REST API, dynamic batching) driven by
1, 8 and 32 concurrent clients, against the same export called in-process at batch 32, and
against the server with batching off (`--max-batch-size 1`).

Model: a BERT-Base-shape classifier export (L12 H768 A12, intermediate 3072, seeded random
weights, all-MiniLM-L6-v2's uncased 30522-piece vocabulary, 2 classes, sequence length 128,
float32): speed does not depend on the weights' values. `--preset` serves a classifier on that
preset instead (`benchmarks.serving.prepare`), `--export` any export. Text: Rotten Tomatoes critic snippets
(`keras_bert_zoo.data.polarity`, dev split: held out from training), one sentence per request,
each client cycling through them from its own offset.

Measured: each client is a closed loop (send, wait for the answer, send the next) for a fixed
time after a short warm-up; requests/s and sentences/s over that time, p50/p95/p99 of the
request latencies, requests that failed (non-200 or transport error), and the server's peak RSS
(VmHWM of /proc/PID/status at the end). In-process: `serving_default` of the SavedModel loaded in
a fresh process, batches of 32 distinct sentences in a loop for the same time.

Why a small asyncio + httpx client rather than locust: locust's users are gevent greenlets with a
monkey-patched stdlib (a heavy dependency and a second event loop model, for a server that is
itself asyncio); its percentiles are bucketed and its reports a web UI or CSVs to parse; and its
headless mode has no place for the numbers this section needs next to each other (sentences/s,
the server's peak RSS, the in-process baseline). The client here is ~40 lines, exactly N
concurrent closed-loop clients, exact latencies, and runs in seconds for `--quick`. httpx is
already installed with kserve.
"""

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

import httpx
import numpy as np

from benchmarks._subprocess import run_config
from benchmarks.common import conditions_line, method_line
from benchmarks.peak import measure_roof

MODULE = "benchmarks.serving_load"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "load"
# The 32-client point is the acceptance measurement: long enough (5 minutes) that errors or a slow
# leak would show; the others only draw the curve.
FULL = dict(clients=(1, 8, 32), duration_s=30.0, long_s=300.0, warmup_s=5.0, rows=2000, sequence_length=128)
QUICK = dict(clients=(1, 8, 32), duration_s=2.0, long_s=2.0, warmup_s=0.5, rows=256, sequence_length=32)


def free_port():
    """A TCP port free on localhost now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(export_dir, max_batch_size, max_wait_ms=5.0, max_queue=1024, timeout=300):
    """Starts tools/serve.py on a free port; returns (process, url) once the model is ready."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, os.path.join(ROOT, "tools", "serve.py"), "--model", export_dir, "--name", NAME,
         "--port", str(port), "--max-batch-size", str(max_batch_size), "--max-wait-ms", str(max_wait_ms),
         "--max-queue", str(max_queue)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"tools/serve.py exited with {process.returncode}")
        try:
            if httpx.get(f"{url}/v1/models/{NAME}", timeout=2).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    process.kill()
    raise TimeoutError(f"tools/serve.py not ready in {timeout} s")


def peak_rss_mb(pid):
    """Peak resident memory of a process (VmHWM), MB; None where /proc has no such line."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


async def drive(url, texts, clients, duration_s, warmup_s):
    """`clients` closed-loop clients, one sentence per request, for warm-up then `duration_s`."""
    latencies, errors, sentences = [], 0, 0
    loop = asyncio.get_running_loop()
    start = loop.time() + warmup_s
    stop = start + duration_s

    async def client(offset, http):
        nonlocal errors, sentences
        i = offset
        while loop.time() < stop:
            body = {"instances": [texts[i % len(texts)]]}
            i += clients
            began = loop.time()
            try:
                response = await http.post(f"{url}/v1/models/{NAME}:predict", json=body)
                ok = response.status_code == 200 and len(response.json()["predictions"]) == 1
            except (httpx.HTTPError, ValueError, KeyError):
                ok = False
            if began >= start and loop.time() <= stop:
                if ok:
                    latencies.append(loop.time() - began)
                    sentences += 1
                else:
                    errors += 1

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as http:
        await asyncio.gather(*(client(k, http) for k in range(clients)))
    ms = np.asarray(latencies) * 1000 if latencies else np.asarray([np.nan])
    return {"clients": clients, "seconds": duration_s, "requests_per_s": (len(latencies) + errors) / duration_s,
            "sentences_per_s": sentences / duration_s, "p50_ms": float(np.percentile(ms, 50)),
            "p95_ms": float(np.percentile(ms, 95)), "p99_ms": float(np.percentile(ms, 99)), "errors": errors}


def measure_server(export_dir, texts, clients, duration_s, warmup_s, max_batch_size, long_s=None):
    """One server, each client count in turn (the largest for `long_s` when given); returns its
    rows and peak RSS."""
    process, url = start_server(export_dir, max_batch_size)
    try:
        rows = [asyncio.run(drive(url, texts, n, long_s if long_s and n == max(clients) else duration_s, warmup_s))
                for n in clients]
        rss = peak_rss_mb(process.pid)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
    return {"rows": rows, "peak_rss_mb": rss, "exit_code": process.returncode}


def in_process(export_dir, texts, batch_size, duration_s, warmup_s):
    """Worker: `serving_default` called in this process on batches of `batch_size`, for `duration_s`."""
    import tensorflow as tf  # lazy: the worker process only (start-up time of the section)
    import tensorflow_text  # noqa: F401  # lazy: registers the export's tokenizer ops, worker only

    serve = tf.saved_model.load(export_dir).signatures["serving_default"]
    name = sorted(serve.structured_input_signature[1])[0]
    batches = [texts[i : i + batch_size] for i in range(0, len(texts) - batch_size + 1, batch_size)]
    end = time.perf_counter() + warmup_s
    i = 0
    while time.perf_counter() < end:
        serve(**{name: tf.constant(batches[i % len(batches)])})
        i += 1
    count, latencies = 0, []
    start = time.perf_counter()
    while time.perf_counter() - start < duration_s:
        began = time.perf_counter()
        serve(**{name: tf.constant(batches[i % len(batches)])})
        latencies.append(time.perf_counter() - began)
        count += batch_size
        i += 1
    elapsed = time.perf_counter() - start
    ms = np.asarray(latencies) * 1000
    return {"sentences_per_s": count / elapsed, "calls_per_s": len(latencies) / elapsed,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "peak_rss_mb": peak_rss_mb(os.getpid())}


def held_out_texts(count):
    """`count` dev-split critic snippets."""
    from keras_bert_zoo.data.polarity import read_polarity  # lazy: the data module imports TensorFlow

    texts, _ = read_polarity("dev")
    return list(texts[:count])


def measure(export_dir, texts, settings):
    """Everything the section reports, as a dict."""
    batch = run_config(MODULE, "in_process", dict(export_dir=export_dir, texts=texts, batch_size=32,
                                                  duration_s=2 * settings["duration_s"], warmup_s=settings["warmup_s"]))
    on = measure_server(export_dir, texts, settings["clients"], settings["duration_s"], settings["warmup_s"], 32,
                        settings["long_s"])
    off = measure_server(export_dir, texts, settings["clients"], settings["duration_s"], settings["warmup_s"], 1)
    return {"in_process": batch, "batching": on, "no_batching": off}


def piece_counts(texts):
    """Worker: each text's word pieces with [CLS] and [SEP] (the uncased vocabulary of the export)."""
    from benchmarks.classification.sides import minilm_vocabulary
    from keras_bert_zoo import BertTokenizer

    tokenizer = BertTokenizer(minilm_vocabulary(), lowercase=True)
    return {"pieces": [int(n) + 2 for n in tokenizer.tokenize(texts).row_lengths().numpy()]}


def roof_line(results, pieces, roof):
    """What bounds the batching ratio on this CPU: the float32 matmul roof over these sentences' FLOPs."""
    from benchmarks.classification.notes import forward_flops

    peak = roof.get("float32", {}).get("gflops")
    if not peak or not pieces or "pieces" not in pieces:
        return "The roof over these sentences: not measured."
    counts = pieces["pieces"]
    gflop = sum(forward_flops(n) for n in counts) / len(counts) / 1e9
    cap = peak / gflop
    on, off = results["batching"]["rows"][-1], results["no_batching"]["rows"][-1]
    return (f"What bounds the batching ratio here: these sentences average {sum(counts) / len(counts):.1f} word pieces "
            f"([CLS]/[SEP] included), {gflop:.2f} GFLOP each through BERT-Base, so the float32 matmul roof measured in "
            f"this run ({peak:.0f} GFLOP/s, 2048³) allows at most {cap:.1f} sentences/s. 3× the batching-off "
            f"throughput is {3 * off['sentences_per_s']:.1f} sentences/s, {3 * off['sentences_per_s'] / cap:.0%} of "
            f"that roof: batching off already runs at {off['sentences_per_s'] / cap:.0%} of it (one sentence a call is "
            f"a {sum(counts) / len(counts):.0f}-row matmul, which this CPU runs near its best), batching on at "
            f"{on['sentences_per_s'] / cap:.0%}.")


def ratios(results):
    """The acceptance ratios at the most clients: server / in-process batch 32, batching on / off."""
    on, off = results["batching"]["rows"][-1], results["no_batching"]["rows"][-1]
    ceiling = results["in_process"].get("sentences_per_s")
    return {
        "clients": on["clients"], "seconds": on["seconds"], "errors": on["errors"],
        "of_in_process": on["sentences_per_s"] / ceiling if ceiling else None,
        "over_no_batching": on["sentences_per_s"] / off["sentences_per_s"] if off["sentences_per_s"] else None,
    }


def prepare_base(workdir, sequence_length):
    """Worker: the BERT-Base-shape classifier (seeded random weights) exported; returns its path."""
    import keras

    from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor, BertTokenizer, export
    from benchmarks.classification.sides import BASE, minilm_vocabulary

    keras.utils.set_random_seed(0)
    backbone = BertBackbone(30522, BASE["num_hidden_layers"], BASE["num_attention_heads"], BASE["hidden_size"],
                            BASE["intermediate_size"], max_sequence_length=BASE["max_position_embeddings"],
                            dtype="float32")
    preprocessor = BertPreprocessor(BertTokenizer(minilm_vocabulary(), lowercase=True), sequence_length=sequence_length)
    task = BertClassifier(backbone, 2, preprocessor=preprocessor, labels=["rotten", "fresh"])
    path = os.path.join(workdir, "bert_base", "1")
    export(task, path, signatures=("text",))
    return {"saved_model": path}


def table(results):
    """The Markdown table rows of `measure`'s dict."""
    lines = ["| how | clients | requests/s | sentences/s | p50 ms | p95 ms | p99 ms | errors | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for key, how in (("batching", "server, batching (max 32, 5 ms)"), ("no_batching", "server, batching off (max 1)")):
        part = results[key]
        rss = f"{part['peak_rss_mb']:.0f}" if part["peak_rss_mb"] else "?"
        for row in part["rows"]:
            lines.append(f"| {how} | {row['clients']} | {row['requests_per_s']:.1f} | {row['sentences_per_s']:.1f} | "
                         f"{row['p50_ms']:.1f} | {row['p95_ms']:.1f} | {row['p99_ms']:.1f} | {row['errors']} | {rss} |")
    batch = results["in_process"]
    cells = [f"failed: {batch['error'][:80]}"] if "error" in batch else [
        f"{batch['calls_per_s']:.1f} calls", f"{batch['sentences_per_s']:.1f}", f"{batch['p50_ms']:.1f} (per call)",
        "–", f"{batch['p99_ms']:.1f}", "0", f"{batch['peak_rss_mb']:.0f}"]
    lines.append("| in-process, batch 32 | – | " + " | ".join(cells + [""] * (7 - len(cells))) + " |")
    return lines


def run(args):
    """Runs the section and returns its Markdown. `args.export`: an existing export to serve
    (a test's tiny one); else the classifier export of `benchmarks.serving.prepare`."""
    quick = bool(getattr(args, "quick", False))
    settings = dict(QUICK if quick else FULL)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as workdir:
        export_dir = getattr(args, "export", None)
        if not export_dir and not getattr(args, "preset", None):
            prepared = run_config(MODULE, "prepare_base", dict(workdir=workdir,
                                                               sequence_length=settings["sequence_length"]))
            if "error" in prepared:
                raise RuntimeError(f"export failed: {prepared['error']}")
            export_dir = prepared["saved_model"]
        elif not export_dir:
            prepared = run_config("benchmarks.serving", "prepare",
                                  dict(task="classifier", workdir=workdir, rows=8,
                                       preset=getattr(args, "preset", None),
                                       sequence_length=settings["sequence_length"]))
            if "error" in prepared:
                raise RuntimeError(f"export failed: {prepared['error']}")
            export_dir = prepared["saved_model"]
        texts = held_out_texts(settings["rows"])
        results = measure(export_dir, texts, settings)
        base = not getattr(args, "export", None) and not getattr(args, "preset", None)
        roof = measure_roof(quick=True) if base else {}
        pieces = run_config(MODULE, "piece_counts", dict(texts=texts)) if base else None
    load_after = os.getloadavg()
    r = ratios(results)
    model = ("the export given" if getattr(args, "export", None) else
             f"a classifier on {args.preset}" if getattr(args, "preset", None) else
             "BERT-Base-shape classifier (random weights, 30522-piece uncased vocabulary), float32")

    def pct(value):
        return f"{value:.0%}" if value is not None else "n/a"

    times = f"{r['over_no_batching']:.2f}" if r["over_no_batching"] is not None else "n/a"

    return "\n".join([
        "## Serving under load: tools/serve.py (KServe, TF Serving REST) with dynamic batching",
        "",
        *table(results),
        "",
        f"At {r['clients']} clients over {r['seconds']:g} s: the server reaches {pct(r['of_in_process'])} of the "
        f"in-process batch-32 throughput (goal ≥ 70%) and {times}× "
        f"the batching-off throughput (goal ≥ 3×), with {r['errors']} errors.",
        "",
        *([roof_line(results, pieces, roof), ""] if pieces else []),
        f"Model: {model}; {len(texts)} held-out sentences; {settings['duration_s']:g} s per point "
        f"({settings['long_s']:g} s at {r['clients']} clients with batching; in-process "
        f"{2 * settings['duration_s']:g} s) after {settings['warmup_s']:g} s "
        f"warm-up{' (quick run: not a measurement)' if quick else ''}. SIGTERM exit codes: "
        f"{results['batching']['exit_code']}, {results['no_batching']['exit_code']}.",
        "",
        conditions_line(load_before, load_after, "the load generator runs on the same machine. fp32."),
        "",
        method_line(__doc__),
    ])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="seconds per point, sequence length 32")
    parser.add_argument("--export", help="serve this export instead of building one")
    parser.add_argument("--preset", help="the classifier's backbone preset (default all-MiniLM-L6-v2)")
    print(run(parser.parse_args(argv)))


if __name__ == "__main__":  # python -m benchmarks.serving_load --quick
    main()
