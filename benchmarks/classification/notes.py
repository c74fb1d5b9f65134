"""The classification section's Markdown: table, goals 1 and 3 of #49, the op-by-op profile, levers,
conditions."""

import os

from benchmarks.common import cpu_description

HIDDEN, INTERMEDIATE, LAYERS = 768, 3072, 12
PEERS_DEFAULT = ("keras-hub (default, 512)", "HF pipeline (fp32)")
PEERS_ALL = PEERS_DEFAULT + ("keras-hub (sequence_length=128)", "HF pipeline (bf16 autocast)")
OURS_BEST = ("ours (bf16, opt-in)", "ours exported (float32)", "ours exported (bf16)")


def dense_flops(tokens, hidden=HIDDEN, intermediate=INTERMEDIATE, layers=LAYERS):
    """Forward FLOPs of the encoder's dense layers on `tokens` tokens (Q, K, V, output, FFN)."""
    return layers * 2 * tokens * (4 * hidden * hidden + 2 * hidden * intermediate)


def forward_flops(length, hidden=HIDDEN, intermediate=INTERMEDIATE, layers=LAYERS):
    """Forward FLOPs of one sequence of `length` pieces (dense + attention, ../shared/PERFORMANCE.md)."""
    return dense_flops(length, hidden, intermediate, layers) + layers * 4 * length * length * hidden


def _roof_dtype(name, result=None):
    """The roof a side is held against: its model's policy where it reports one, else its name's."""
    policy = (result or {}).get("policy")
    if policy:
        return "bfloat16" if "bfloat16" in policy else "float32"
    return "bfloat16" if "bf16" in name else "float32"


def _fastest(results, names, key="rate"):
    ok = [(results[n][key], n) for n in names if n in results and "error" not in results[n]]
    return max(ok) if ok else (None, None)


def _ratio(num, den):
    return f"{num / den:.2f}×" if num and den else "n/a"


def table(results, pieces, roof):
    """The table's rows: latency, throughput and share of the roof per side."""
    lines = []
    for name, r in results.items():
        if "error" in r:
            lines.append(f"| {name} | failed: {r['error'][:200]} | | | |")
            continue
        gflop = sum(forward_flops(n) for n in pieces[: r["rows"]]) / r["rows"] / 1e9
        dtype = _roof_dtype(name, r)
        peak = roof.get(dtype, {}).get("gflops")
        share = f"{100 * r['rate'] * gflop / peak:.0f}% of {dtype} roof" if peak else "roof not measured"
        lines.append(f"| {name} | {r['latency_ms']:.1f} | {r['p99_ms']:.1f} ({r['calls']} calls) | "
                     f"{r['rate']:.1f} ± {100 * r['spread']:.0f}% ({r['rows']} rows) | {share} |")
    return lines


def share_of_roof(results, name, pieces, roof):
    """`name`'s useful FLOP rate (real lengths) as a share of its precision's roof, or None."""
    r = results.get(name, {})
    peak = roof.get(_roof_dtype(name, r), {}).get("gflops")
    if "rate" not in r or not peak:
        return None
    gflop = sum(forward_flops(n) for n in pieces[: r["rows"]]) / r["rows"] / 1e9
    return r["rate"] * gflop / peak


def goals(results, pieces, roof):
    """Goal lines 1 and 3 of #49 (ratios measured in this run), and the served overhead."""
    ours, hf = results.get("ours (defaults)", {}), results.get("HF pipeline (fp32)", {})
    bf16, hf_bf16 = results.get("ours (bf16, opt-in)", {}), results.get("HF pipeline (bf16 autocast)", {})
    share = share_of_roof(results, "ours (defaults)", pieces, roof)
    lines = [
        f"- Goal 1 (float32 like for like ≥ 3× HF `pipeline` float32, ≥ 80% of the float32 roof on real tokens): "
        f"ours (defaults: {ours.get('policy', '?')}) {ours.get('rate', 0):.1f} sentences/s vs HF pipeline (fp32) "
        f"{hf.get('rate', 0):.1f}: **{_ratio(ours.get('rate'), hf.get('rate'))}**; "
        + (f"**{100 * share:.0f}%** of the float32 roof." if share else "roof not measured."),
        f"- Goal 3 (bf16 opt-in ≥ 2× HF under `torch.autocast(bfloat16)`): ours (bf16, opt-in) "
        f"{bf16.get('rate', 0):.1f} vs HF pipeline (bf16 autocast) {hf_bf16.get('rate', 0):.1f}: "
        f"**{_ratio(bf16.get('rate'), hf_bf16.get('rate'))}**; ours exported (bf16) "
        f"{results.get('ours exported (bf16)', {}).get('rate', 0):.1f}: "
        f"**{_ratio(results.get('ours exported (bf16)', {}).get('rate'), hf_bf16.get('rate'))}**.",
    ]
    for name in ("ours exported (float32)", "ours exported (bf16)"):
        served = results.get(name, {})
        if "forward_ms" in served:
            lines.append(
                f"- Serving overhead, {name}: strings → labels at batch 1 "
                f"{served['latency_ms']:.1f} ms vs the same SavedModel's `ids` signature on the same rows packed "
                f"beforehand {served['forward_ms']:.1f} ms (same process, medians): "
                f"**{served['latency_ms'] / served['forward_ms']:.2f}×**.")
    shares = [f"{name} {100 * v:.0f}%" for name in ("ours (defaults)",) + OURS_BEST
              if (v := share_of_roof(results, name, pieces, roof))]
    lines.append("- Share of the matmul roof at real lengths: " + (", ".join(shares) or "not measured")
                 + ". Each against the roof of its own precision.")
    return lines


# Per profiled precision: (roof, the goal's multiple of HF, HF's side, the goal's name).
PROFILE_GOALS = {"float32": ("float32", 3, "HF pipeline (fp32)", "Goal 1"),
                 "mixed_bfloat16": ("bfloat16", 2, "HF pipeline (bf16 autocast)", "Goal 3")}


def profile_lines(profile, roof, results, dtype="float32"):
    """Where our forward in `dtype` spends its time, op by op, and the limit it sets on its goal."""
    roof_dtype, multiple, hf_name, goal = PROFILE_GOALS[dtype]
    label = "float32" if dtype == "float32" else "bf16 (`dtype=\"mixed_bfloat16\"`)"
    if not profile or "error" in profile:
        return [f"Profile of the {label} forward: not measured ({(profile or {}).get('error', 'not run')[:300]})."]
    wall, cats = profile["wall_ms"], profile["categories_ms"]
    rows, tokens = profile["rows"], profile["real_tokens"]
    dense_gflop = dense_flops(tokens) / 1e9
    peak = roof.get(roof_dtype, {}).get("gflops")
    hf_rate = results.get(hf_name, {}).get("rate")
    dense_ms = sum(ms for name, ms in cats.items() if name.startswith("dense matmuls"))
    rest_ms = sum(cats.values()) - dense_ms
    lines = [
        f"Where the time goes: our {label} forward (`predict_on_batch` on the packed, length-sorted batches of "
        f"the {rows} throughput rows, {tokens} real tokens in {profile['padded_cells']} padded cells), "
        f"{wall:.0f} ms a pass; TensorFlow's profiler, op by op (ms a pass, share of the ops' sum):",
        "",
        "| ops | ms | share |",
        "|---|---|---|",
    ]
    total = sum(cats.values()) or 1.0
    for name, ms in sorted(cats.items(), key=lambda item: -item[1]):
        lines.append(f"| {name} | {ms:.0f} | {100 * ms / total:.0f}% |")
    lines.append("")
    if profile.get("other_ms"):
        lines.append("The largest op types in \"other\": " + ", ".join(
            f"{kind} {ms:.0f} ms" for kind, ms in profile["other_ms"].items()) + ".")
        lines.append("")
    if dtype != "float32" and "casts_ms" in profile:
        lines.append(f"Of the element-wise ops, casts: {profile['casts_ms']:.0f} ms (the dense layers' float32 "
                     f"kernels read as {roof_dtype}: {profile.get('kernel_casts_ms', 0):.0f} ms).")
        lines.append("")
    if peak and hf_rate:
        need_ms = 1e3 * rows / (multiple * hf_rate)
        at_roof_ms = 1e3 * dense_gflop / peak
        lines.append(
            f"The encoder's dense matmuls ({dense_gflop:.0f} GFLOP at real lengths) run at "
            f"{dense_gflop / (dense_ms / 1e3):.0f} GFLOP/s ({100 * dense_gflop / (dense_ms / 1e3) / peak:.0f}% of the "
            f"{peak:.0f} GFLOP/s {roof_dtype} roof); at the roof they alone would take {at_roof_ms:.0f} ms. {goal} "
            f"({multiple}× HF's {hf_rate:.1f} sentences/s) needs the whole pass, tokenization included, in "
            f"{need_ms:.0f} ms: {100 * at_roof_ms / need_ms:.0f}% of that budget is the dense matmuls at the roof, "
            f"and the other ops take {rest_ms:.0f} ms today.")
    return lines


def lever_lines(levers, results):
    """What each lever of `predict` is worth, measured alone (`levers.py`)."""
    if "error" in levers:
        return [f"Levers: not measured ({levers['error'][:300]})."]
    rates = levers["rates"]
    base = rates["as_is"]
    names = {"no_sort": "no length sort across batches (one call per 32 rows in input order)",
             "pad_to_128": f"batches padded to sequence_length {levers['sequence_length']} instead of their "
                           "longest row",
             "multiple_32": "cut rounded to 32 instead of 8",
             "no_count": "without the truncation count (a second tokenizing pass)",
             "padded_dense": "dense layers on the padded batch (`skip_padding=\"never\"`)",
             "no_sort_padded_dense": "both: one call per 32 rows and dense layers on the padded batch"}
    parts = [f"{text}: {rates[k]:.1f} ({rates[k] / base:.2f}×)" for k, text in names.items() if k in rates]
    lines = [f"Levers of `predict`, each alone (our float32 BERT-Base, {levers['rows']} rows, one process, "
             f"sentences/s): as is {base:.1f}; " + "; ".join(parts) + f". The sorted pass runs "
             f"{len(levers['widths'])} padded widths ({', '.join(map(str, levers['widths']))}); Keras traces "
             "the predict function with `reduce_retracing=True`, so new widths after the second do not retrace."]
    ours, bf16 = results.get("ours (defaults)", {}), results.get("ours (bf16, opt-in)", {})
    if "rate" in ours and "rate" in bf16:
        lines.append(f"Precision alone: the `dtype=\"mixed_bfloat16\"` opt-in {bf16['rate']:.1f} vs the default "
                     f"policy ({ours.get('policy', '?')} here) {ours['rate']:.1f} sentences/s "
                     f"({bf16['rate'] / ours['rate']:.2f}×), batch-1 {bf16['latency_ms']:.1f} vs "
                     f"{ours['latency_ms']:.1f} ms.")
    return lines


def agreement(results):
    base = results.get("ours (defaults)", {}).get("labels")  # float32
    if not base:
        return "Labels not compared."
    same = []
    for name in ("ours exported (float32)", "HF pipeline (fp32)"):
        labels = results.get(name, {}).get("labels")
        if labels:
            same.append(f"{name} {sum(a == b for a, b in zip(base, labels))}/{min(len(base), len(labels))}")
    return ("Same labels as ours (defaults, float32), same weights: " + ", ".join(same) + " (random weights: labels "
            "are a consistency check, not accuracy; keras-hub's head is its own random one, so not compared).")


def section(measured, levers, settings, load_before, load_after, batch, doc):
    prepared = measured["prepared"]
    if "error" in prepared:
        return f"## Classification inference\n\nFailed to prepare: {prepared['error']}"
    results, roof = measured["results"], measured["roof"]
    pieces = prepared["measured_pieces"]
    roofs = ", ".join(f"{d} {r['gflops']:.0f} GFLOP/s" for d, r in roof.items() if "gflops" in r)
    return "\n".join([
        "## Classification inference: raw strings → labels, ours vs keras-hub and HF (BERT-Base shape)",
        "",
        f"| side | batch-1 median ms | batch-1 p99 ms | batch-{batch} sentences/s ± spread | useful FLOP rate |",
        "|---|---|---|---|---|",
        *table(results, pieces, roof),
        "",
        *goals(results, pieces, roof),
        "",
        *profile_lines(measured.get("profile"), roof, results),
        "",
        *profile_lines(measured.get("profile_bf16"), roof, results, "mixed_bfloat16"),
        "",
        *lever_lines(levers, results),
        "",
        agreement(results),
        "",
        f"Text: {prepared['pool_rows']} Rotten Tomatoes snippets, {prepared['mean_pieces']:.1f} word pieces on "
        f"average ([CLS]/[SEP] included), p95 {prepared['p95_pieces']:.0f}, max {prepared['max_pieces']}; the "
        f"throughput rows average {sum(pieces) / len(pieces):.1f}. Matmul roof (2048³, this run): {roofs}.",
        "",
        f"Conditions: {cpu_description()}; load average (1, 5, 15 min) {' '.join(f'{v:.1f}' for v in load_before)} at the "
        f"start, {' '.join(f'{v:.1f}' for v in load_after)} at the end, on {os.cpu_count()} cores shared with "
        f"other jobs. Settings: {settings}.",
        "",
        "Method: " + " ".join(doc.split("\n\n", 1)[1].split()),
    ])
