"""What a pretraining-data run generated: counts, rates and a length histogram."""

import json
import os

import numpy as np
import tensorflow as tf

from keras_bert_zoo.data.documents import resolve_files
from keras_bert_zoo.data.nsp_instances import STAT_KEYS
from keras_bert_zoo.data.pretraining import instance_windows, make_masker, validate_options

EXTRA_KEYS = ("empty_documents", "invalid_utf8_lines", "masked", "mask_cap_hits", "mask_replaced", "mask_kept")

# Past these rates a report warns (its "warnings"; `create_pretraining_data --strict` fails).
# Each is far from a usable corpus: English Wikipedia with a fitting vocabulary has [UNK]
# well under 0.1%, no invalid UTF-8, almost no same-document pairs (a window holds 256
# documents), a few % single-sentence documents. A run that gives no instance always warns.
WARNING_THRESHOLDS = {
    "unknown_tokens": 0.01,  # of tokens
    "invalid_utf8_lines": 0.01,  # of lines with text
    "same_document_fallback": 0.10,  # of "random next" pairs
    "single_segment_documents": 0.50,  # of documents
}


def empty_totals(sequence_length):
    totals = {k: 0 for k in STAT_KEYS + EXTRA_KEYS}
    totals["length_histogram"] = np.zeros(sequence_length + 1, np.int64)
    return totals


def accumulate(totals, stats):
    """Adds one window's stats (tensors or arrays) into `totals` in place."""
    for key, value in stats.items():
        value = np.asarray(value)
        totals[key] = totals[key] + (value if key == "length_histogram" else int(value))
    return totals


def _rate(num, den):
    return float(num) / float(den) if den else 0.0


def summarize(totals, options, files=(), empty_files=(), epochs=1):
    """Turns raw counts into the report dict (JSON-serialisable).

    Args:
        totals: dict of summed window stats (see `accumulate`).
        options: dict of the generation options (recorded as is).
        files: list of str. Input files read.
        empty_files: list of str. Input files that held no document.
        epochs: int. Passes over the corpus (`dupe_factor`).

    Returns:
        dict with `counts`, `rates`, `length_histogram`, `options`, `files`, `empty_files`.
    """
    t = {k: (v.tolist() if k == "length_histogram" else int(v)) for k, v in totals.items()}
    hist = t.pop("length_histogram")
    real_tokens = sum(length * n for length, n in enumerate(hist))
    per_epoch_docs = max(1, epochs)
    rates = {
        "nsp_random_next": _rate(t["random_next"], t["instances"]),
        "same_document_fallback": _rate(t["same_document_fallbacks"], t["random_next"]),
        # The coin is drawn only for chunks of >= 2 segments (single-segment chunks are
        # always random next, as in the original): this rate should be 50%.
        "nsp_random_next_coin": _rate(t["random_next"] - t["single_segment_chunks"],
                                      t["instances"] - t["single_segment_chunks"]),
        "mask_rate": _rate(t["masked"], real_tokens),
        "mask_rule_rate": options.get("masked_lm_prob", 0.15),
        "mask_cap_hit": _rate(t["mask_cap_hits"], t["instances"]),
        "mask_token_replaced": _rate(t["mask_replaced"], t["masked"]),
        "mask_token_kept": _rate(t["mask_kept"], t["masked"]),
        "truncated": _rate(t["truncated"], t["instances"]),
        "short_target_documents": _rate(t["short_target_documents"], t["documents"]),
        "unknown_tokens": _rate(t["unknown_tokens"], t["tokens"]),
        "single_segment_documents": _rate(t["single_segment_documents"], t["documents"]),
        "mean_length": _rate(real_tokens, t["instances"]),
    }
    counts = dict(t)
    counts["documents_per_epoch"] = t["documents"] // per_epoch_docs
    counts["tokens_per_epoch"] = t["tokens"] // per_epoch_docs
    report = {
        "counts": counts,
        "rates": rates,
        "length_histogram": hist,
        "options": dict(options),
        "files": list(files),
        "empty_files": list(empty_files),
        "epochs": epochs,
    }
    report["warnings"] = report_warnings(report)
    return report


def report_warnings(report):
    """What a user should know before training on this data: a list of str (empty if none).

    One message per crossed `WARNING_THRESHOLDS` rate, for a run without any instance,
    and for empty input files; each says what it usually means.
    """
    c, r, limit = report["counts"], report["rates"], WARNING_THRESHOLDS
    found = []
    if c["instances"] == 0:
        found.append("no training instance was generated: the input has no text the vocabulary can "
                     "tokenize (empty files or documents?).")
    if r["unknown_tokens"] > limit["unknown_tokens"]:
        found.append(f"[UNK] is {r['unknown_tokens']:.1%} of the tokens (warning above "
                     f"{limit['unknown_tokens']:.0%}): the vocabulary or the lower-casing does not fit the "
                     "text, or an input is not text.")
    invalid = _rate(c["invalid_utf8_lines"], c["segments"]) if c["segments"] else float(c["invalid_utf8_lines"])
    if invalid > limit["invalid_utf8_lines"]:
        found.append(f"{c['invalid_utf8_lines']} lines held invalid UTF-8 (bad bytes dropped), "
                     f"{invalid:.1%} of the lines with text (warning above {limit['invalid_utf8_lines']:.0%}): "
                     "is an input binary or in another encoding?")
    if r["same_document_fallback"] > limit["same_document_fallback"]:
        found.append(f"{r['same_document_fallback']:.1%} of the 'random next' segments came from the same "
                     f"document (warning above {limit['same_document_fallback']:.0%}): too few documents "
                     f"({c['documents_per_epoch']}) for next-sentence prediction; separate documents by a "
                     "blank line.")
    if r["single_segment_documents"] > limit["single_segment_documents"]:
        found.append(f"{r['single_segment_documents']:.1%} of the documents have a single sentence (warning "
                     f"above {limit['single_segment_documents']:.0%}): the input format is one sentence per "
                     "line, a blank line between documents.")
    if report["empty_files"]:
        found.append(f"{len(report['empty_files'])} input file(s) are empty: {', '.join(report['empty_files'])}.")
    return found


def _histogram_lines(hist, bins=8, width=40):
    hist = np.asarray(hist)
    edges = np.linspace(0, len(hist), bins + 1).astype(int)
    sums = [int(hist[a:b].sum()) for a, b in zip(edges[:-1], edges[1:])]
    top = max(sums) or 1
    return [f"  {a:4d}-{b - 1:<4d} {n:9d} {'#' * round(width * n / top)}" for a, b, n in zip(edges[:-1], edges[1:], sums)]


def format_report(report):
    """Human-readable text of a report dict."""
    c, r = report["counts"], report["rates"]
    lines = [
        "Pretraining data report",
        f"  files: {len(report['files'])} ({len(report['empty_files'])} empty), epochs (dupe_factor): {report['epochs']}",
        f"  documents: {c['documents_per_epoch']} per epoch ({c['single_segment_documents']} single-sentence, "
        f"{c['empty_documents']} empty after tokenization), segments: {c['segments']}, tokens: {c['tokens_per_epoch']} per epoch",
        f"  instances: {c['instances']}, mean length {r['mean_length']:.1f}",
        f"  NSP random next: {r['nsp_random_next']:.2%} ({r['nsp_random_next_coin']:.2%} where a coin was drawn; "
        f"{c['single_segment_chunks']} single-segment chunks are always random); "
        f"same-document fallback: {r['same_document_fallback']:.2%}",
        f"  mask rate: {r['mask_rate']:.2%} (rule {r['mask_rule_rate']:.0%}); cap hit: {r['mask_cap_hit']:.2%}; "
        f"[MASK] {r['mask_token_replaced']:.1%}, kept {r['mask_token_kept']:.1%}",
        f"  truncated: {r['truncated']:.2%}; short-target documents: {r['short_target_documents']:.2%}; "
        f"segments longer than the sequence: {c['long_segments']}",
        f"  [UNK] rate: {r['unknown_tokens']:.3%}; lines with invalid UTF-8 (bad bytes dropped): {c['invalid_utf8_lines']}",
        "  length histogram (real tokens per instance):",
    ]
    warnings = [f"  WARNING: {w}" for w in report.get("warnings", [])]
    return "\n".join(lines + _histogram_lines(report["length_histogram"]) + warnings) + "\n"


def write_report(report, output_prefix):
    """Writes `<prefix>.report.json` and `<prefix>.report.txt` atomically; returns both paths.

    Through `tf.io.gfile`, so a Beam worker can write the report next to gs:// outputs.
    """
    paths = []
    for suffix, text in ((".report.json", json.dumps(report, indent=1)), (".report.txt", format_report(report))):
        path = f"{output_prefix}{suffix}"
        tmp = f"{path}.tmp{os.getpid()}"
        with tf.io.gfile.GFile(tmp, "w") as f:
            f.write(text)
        tf.io.gfile.rename(tmp, path, overwrite=True)
        paths.append(path)
    return paths


def pretraining_report(files, tokenizer, sequence_length=128, max_predictions=20, seed=12345, masked_lm_prob=0.15,
                       short_seq_prob=0.1, whole_word_masking=False, epochs=1, window_size=256):
    """Generates `epochs` passes of on-the-fly instances and returns their report dict.

    Args: as `keras_bert_zoo.data.pretraining.pretraining_dataset`.

    Returns:
        dict (see `summarize`); `format_report(report)` prints it.
    """
    validate_options(sequence_length, max_predictions, masked_lm_prob, short_seq_prob, window_size)
    masker = make_masker(tokenizer, max_predictions, masked_lm_prob, whole_word_masking)
    paths = resolve_files(files)
    totals = empty_totals(sequence_length)
    for _, stats in instance_windows(paths, tokenizer, masker, sequence_length, short_seq_prob, seed, epochs,
                                     window_size):
        accumulate(totals, stats)
    options = dict(max_seq_length=sequence_length, max_predictions_per_seq=max_predictions, random_seed=seed,
                   masked_lm_prob=masked_lm_prob, short_seq_prob=short_seq_prob,
                   do_whole_word_mask=whole_word_masking, window_size=window_size)
    empty = [p for p in paths if os.path.getsize(p) == 0]
    return summarize(totals, options, paths, empty, epochs)
