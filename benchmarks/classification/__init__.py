"""Classification inference, raw strings -> labels: ours against keras-hub and HF on real text (#16).

The section is this package: this module runs it (`run`); `sides.py` holds the workers, one per side,
`levers.py` the worker that switches `predict`'s levers off one at a time, `profile.py` the op-by-op
profiles of our float32 and bf16 forwards, `notes.py` the Markdown.

Model: BERT-Base shape (L12 H768 A12, intermediate 3072), the uncased 30522-piece
vocabulary of all-MiniLM-L6-v2, random weights (seeded): one HF
`BertForSequenceClassification` saved as safetensors, which every side loads its own
way: ours through `BertClassifier.from_preset` (backbone and head), keras-hub through its
transformers loader (the same backbone weights; its head is freshly initialised, which
does not change speed), HF directly. Speed does not depend on the weights' values.

Text: Rotten Tomatoes critic snippets (`keras_bert_zoo.data.polarity`, all splits), rows
taken evenly over the pool so that the measured rows keep its length distribution.

Sides, each round of each in a process of its own (`_subprocess.run_config`), rounds
interleaved and the order reversed every other round, as the serving section: ours
`BertClassifier.predict(strings)` with defaults (the model built without `dtype`: float32,
`default_policy()`) and built with the `dtype="mixed_bfloat16"` opt-in, a row of its own; our export's
`serving_default` (float32 and mixed_bfloat16) in a process with only tensorflow and
tensorflow_text imported; keras-hub 0.32 `BertTextClassifier.predict(strings)` with its
default preprocessor (sequence_length 512) and with `sequence_length=128`; HF's
`pipeline("text-classification", batch_size=32)` in fp32 and under bf16 autocast (2 torch
threads). Each side returns labels (argmax). Batch-1 latency: one row per call, distinct
rows, 2 warm-up calls; median and p99 over all rounds. Batch-32 throughput: one timed pass
over the throughput rows per round after a warm-up pass; sentences/s at the median pass.
The matmul roof (`peak.py`) is measured in the same run; FLOPs are counted at each row's
real length (../shared/PERFORMANCE.md: dense 2·n·(4H² + 2HI) + attention 4·n²·H per
layer, [CLS]/[SEP] included). The served model's batch-1 latency is compared, in its
process, with the same SavedModel's `ids` signature on the same rows packed beforehand
(the model's own forward and post-processing, no tokenization or packing: goal 5).
"""

import os
import statistics
import tempfile

from benchmarks._subprocess import run_config
from benchmarks.classification import notes
from benchmarks.peak import measure_roof

MODULE = "benchmarks.classification.sides"
LEVERS_MODULE = "benchmarks.classification.levers"
PROFILE_MODULE = "benchmarks.classification.profile"
BATCH = 32
# Per side: (latency calls, throughput rows, warm-up rows) per round. keras-hub at 512 pads
# every row to 512 (~20x the work of a ~27-piece row), so it gets fewer rows.
# The keras-hub sides run in the first round only (at a fraction of our rate, drift does not
# decide their ratios), so that FULL fits its 8 minutes.
FULL = dict(rounds=2, rows=128, latency_rows=60, calls=20, slow_calls=5, slow_rows=32, warmup_rows=64,
            lever_rows=64)
QUICK = dict(rounds=1, rows=64, latency_rows=20, calls=6, slow_calls=3, slow_rows=32, warmup_rows=32,
             lever_rows=64)
SLOW = ("keras-hub (default, 512)", "keras-hub (sequence_length=128)")


def sides(prepared, s):
    """`{name: (worker, kwargs)}` of every measured configuration."""
    common = dict(rows=prepared["rows"], batch_size=BATCH)
    fast = dict(common, latency_calls=s["calls"], throughput_rows=s["rows"])
    return {
        "ours (defaults)": ("measure_ours", dict(fast, preset=prepared["preset"], forward=True)),
        "ours (bf16, opt-in)": ("measure_ours", dict(fast, preset=prepared["preset"], precision="mixed_bfloat16")),
        "ours exported (float32)": ("measure_served", dict(fast, saved_model=prepared["saved_model"])),
        "ours exported (bf16)": ("measure_served", dict(fast, saved_model=prepared["saved_model_bf16"])),
        "keras-hub (default, 512)": ("measure_keras_hub", dict(common, hf=prepared["hf"], latency_calls=s[
            "slow_calls"], throughput_rows=s["slow_rows"], warmup_rows=s["slow_rows"])),
        "keras-hub (sequence_length=128)": ("measure_keras_hub", dict(
            common, hf=prepared["hf"], sequence_length=128, latency_calls=s["calls"] // 2,
            throughput_rows=s["rows"] // 2, warmup_rows=s["warmup_rows"] // 2)),
        "HF pipeline (fp32)": ("measure_hf", dict(fast, hf=prepared["hf"])),
        "HF pipeline (bf16 autocast)": ("measure_hf", dict(fast, hf=prepared["hf"], bf16=True)),
    }


def merge(parts, pieces, rows):
    """One side's rounds -> latency (median, p99 ms), throughput (median sentences/s, spread) and
    the mean word pieces of its throughput rows; the first failed round's error if any."""
    failed = [p for p in parts if "error" in p]
    if failed:
        return {"error": failed[0]["error"]}
    latency = sorted(t for p in parts for t in p["latency_s"])
    rates = [rows / t for p in parts for t in p["throughput_s"]]
    rate = statistics.median(rates)
    out = {"latency_ms": 1e3 * statistics.median(latency),
           "p99_ms": 1e3 * latency[min(len(latency) - 1, int(0.99 * len(latency)))], "calls": len(latency),
           "rate": rate, "spread": (max(rates) - min(rates)) / rate, "rows": rows,
           "mean_pieces": sum(pieces[:rows]) / rows, "labels": parts[-1]["labels"]}
    if "policy" in parts[-1]:
        out["policy"] = parts[-1]["policy"]
    forward = [t for p in parts for t in p.get("forward_s", [])]
    if forward:
        out["forward_ms"] = 1e3 * statistics.median(forward)
    return out


def measure(settings, workdir=None, call=run_config):
    """Prepares the model and text, measures the roof and every side; returns all results."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="kbz_bench_classification_") as scratch:
            return measure(settings, scratch, call)
    prepared = call(MODULE, "prepare", dict(workdir=workdir, rows=settings["rows"],
                                            latency_rows=settings["latency_rows"]))
    print(f"  classification: prepared in {prepared['wall_s']:.0f} s", flush=True)
    if "error" in prepared:
        return {"prepared": prepared}
    configs = sides(prepared, settings)
    parts = {name: [] for name in configs}
    roof = measure_roof(quick=True)
    for r in range(settings["rounds"]):
        for name in (list(configs) if r % 2 == 0 else list(configs)[::-1]):
            if r and name in SLOW:
                continue
            worker, kwargs = configs[name]
            parts[name].append(call(MODULE, worker, kwargs))
            print(f"  classification round {r + 1}: {name}: "
                  + ("error " + parts[name][-1]["error"][:300] if "error" in parts[name][-1]
                     else f"{parts[name][-1]['wall_s']:.0f} s"), flush=True)
    results = {name: merge(parts[name], prepared["measured_pieces"], configs[name][1]["throughput_rows"])
               for name in configs}
    lever_args = dict(preset=prepared["preset"], rows=prepared["rows"], throughput_rows=settings["lever_rows"],
                      batch_size=BATCH, runs=settings["rounds"])
    levers = call(LEVERS_MODULE, "measure_levers", lever_args)
    profiles = {key: call(PROFILE_MODULE, "measure_profile", dict(
        preset=prepared["preset"], rows=prepared["rows"], throughput_rows=settings["rows"], batch_size=BATCH,
        dtype=dtype)) for key, dtype in (("profile", "float32"), ("profile_bf16", "mixed_bfloat16"))}
    return {"prepared": prepared, "roof": roof, "results": results, "levers": levers, **profiles}


def run(args):
    """Runs the section and returns its Markdown."""
    quick = bool(getattr(args, "quick", False))
    settings = QUICK if quick else FULL
    load_before = os.getloadavg()
    measured = measure(settings)
    load_after = os.getloadavg()
    levers = measured.get("levers", {"error": "not prepared"})
    return notes.section(measured, levers, settings, load_before, load_after, BATCH, __doc__)
