"""The classification section's Markdown: table, goals of #16 (1, 5, 6), levers, conditions."""

import os

from benchmarks.common import cpu_description

HIDDEN, INTERMEDIATE, LAYERS = 768, 3072, 12
PEERS_DEFAULT = ("keras-hub (default, 512)", "HF pipeline (fp32)")
PEERS_ALL = PEERS_DEFAULT + ("keras-hub (sequence_length=128)", "HF pipeline (bf16 autocast)")
OURS_BEST = ("ours (bf16, opt-in)", "ours exported (float32)", "ours exported (bf16)")


def forward_flops(length, hidden=HIDDEN, intermediate=INTERMEDIATE, layers=LAYERS):
    """Forward FLOPs of one sequence of `length` pieces (dense + attention, ../shared/PERFORMANCE.md)."""
    dense = 2 * length * (4 * hidden * hidden + 2 * hidden * intermediate)
    return layers * (dense + 4 * length * length * hidden)


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


def goals(results, pieces, roof):
    """Goal lines 1, 5 and 6 of #16 (ratios measured in this run)."""
    ours = results.get("ours (defaults)", {})
    peer_rate, peer = _fastest(results, PEERS_DEFAULT)
    best_peer_rate, best_peer = _fastest(results, PEERS_ALL)
    best_rate, best = _fastest(results, OURS_BEST + ("ours (defaults)",))
    lat_peer, lat_peer_name = min(((results[n]["latency_ms"], n) for n in PEERS_ALL
                                   if n in results and "error" not in results[n]), default=(None, None))
    lines = [
        f"- Goal 1 (defaults ≥ 3× the faster peer's defaults): ours {ours.get('rate', 0):.1f} sentences/s vs "
        f"{peer} {peer_rate or 0:.1f}: **{_ratio(ours.get('rate'), peer_rate)}**. Best vs best (≥ 1.5×): {best} "
        f"{best_rate or 0:.1f} vs {best_peer} {best_peer_rate or 0:.1f}: **{_ratio(best_rate, best_peer_rate)}**. "
        f"Batch-1 median latency, ours defaults vs the fastest peer ({lat_peer_name}): "
        f"{_ratio(lat_peer, ours.get('latency_ms'))} faster.",
    ]
    for name in ("ours exported (float32)", "ours exported (bf16)"):
        served = results.get(name, {})
        if "forward_ms" in served:
            lines.append(
                f"- Goal 5 (exported batch-1 latency ≤ 1.2× the model's forward time), {name}: strings → labels "
                f"{served['latency_ms']:.1f} ms vs the same SavedModel's `ids` signature on the same rows packed "
                f"beforehand {served['forward_ms']:.1f} ms (same process, medians): "
                f"**{served['latency_ms'] / served['forward_ms']:.2f}×**.")
    if "forward_ms" in ours:
        lines.append(f"  For reference, our default model's ({ours.get('policy', '?')}) `predict_on_batch` on "
                     "those packed rows: "
                     f"{ours['forward_ms']:.1f} ms; `predict(strings)` at batch 1: {ours['latency_ms']:.1f} ms "
                     f"({ours['latency_ms'] / ours['forward_ms']:.2f}×).")
    shares = []
    for name in ("ours (defaults)",) + OURS_BEST:
        r = results.get(name, {})
        peak = roof.get(_roof_dtype(name, r), {}).get("gflops")
        if "rate" in r and peak:
            gflop = sum(forward_flops(n) for n in pieces[: r["rows"]]) / r["rows"] / 1e9
            shares.append(f"{name} {100 * r['rate'] * gflop / peak:.0f}%")
    lines.append("- Goal 6 (≥ 70% of the matmul roof at real lengths): " + (", ".join(shares) or "not measured")
                 + ". Each against the roof of its own precision.")
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
             "padded_dense": "dense layers on the padded batch (`skip_padding` off)",
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
