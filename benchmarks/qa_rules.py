"""Why ours and HF's QA pipeline answer differently: the two rules that differ, one at a time.

`run_squad.py` (ours) and HF's `pipeline("question-answering")` differ in two rules:
- Windows: our `doc_stride` is the step between windows (the original's); HF passes its
  `doc_stride` to the tokenizer as the *overlap* of consecutive windows, so with 384 and
  128 HF's windows start ~233 tokens apart, ours 128.
- Decoding: ours scores a span by start + end *logit* over all windows of a question and
  lets a token start an answer only in its "max context" window; HF's softmax-normalises
  start and end within each window (over its context tokens) and takes the best span by
  the *product of probabilities*, windows compared on those per-window probabilities,
  with no max-context rule.

`hf_matched_windows` runs HF's pipeline with, per question, the overlap that makes its
windows ours (step 128); `ours_with_hf_rule` decodes our windows' logits with HF's rule
(`SpanDecoder(rules="hf_pipeline")`, which also adds the scores of equal answers found in
several windows, as HF's `postprocess` does). Agreement of the two (same windows, same rule) checks that the logits agree;
against ours it measures what the decoding rule alone changes.
"""

import json
import os
import sys
import tempfile

import numpy as np

from benchmarks._subprocess import ROOT, run_config

# The section's module (benchmarks/qa.py), whose workers `diagnose` runs by name in a subprocess.
QA_MODULE = "benchmarks.qa"
# The QA section's settings, shared by its speed runs (qa.py) and the diagnostics here.
SETTINGS = dict(sequence_length=384, doc_stride=128, max_query_length=64, max_answer_length=30, batch_size=32)
# The HF peer (transformers + torch) install, put first on a HF worker's path.
PEER_DIR = os.environ.get("HF_QA_PEER", str(ROOT / "build" / "hf_qa_peer"))


def hf_env():
    """The environment of a worker that runs HF's side: the HF peer first on the path, no TensorFlow in HF."""
    path = os.pathsep.join(p for p in (PEER_DIR, str(ROOT)) if p)
    return {"PYTHONPATH": path, "USE_TF": "0", "TRANSFORMERS_NO_TF": "1", "TOKENIZERS_PARALLELISM": "false"}


def agreement(a, b):
    """Share of questions with the same answer after SQuAD normalisation."""
    from keras_bert_zoo.metrics.squad import normalize_answer

    same = sum(normalize_answer(x) == normalize_answer(y) for x, y in zip(a, b))
    return same, len(a)


def hf_matched_windows(hf, rows):
    """Worker (HF peer on the path): HF's pipeline, one question per call, windows 128 apart."""
    import torch
    import transformers

    pipe = transformers.pipeline("question-answering", model=hf, tokenizer=hf, device=-1)
    rows = json.load(open(rows, encoding="utf-8"))
    s, answers = SETTINGS, []
    for r in rows:
        q_len = len(pipe.tokenizer(r["question"], add_special_tokens=False)["input_ids"])
        overlap = s["sequence_length"] - min(q_len, s["max_query_length"]) - 3 - s["doc_stride"]
        with torch.inference_mode():
            out = pipe(question=r["question"], context=r["context"], doc_stride=overlap,
                       max_seq_len=s["sequence_length"], max_question_len=s["max_query_length"],
                       max_answer_len=s["max_answer_length"], top_k=1, align_to_words=False)
        answers.append(out["answer"])
    return {"answers": answers}


def hf_rule(start, end, token_starts, token_ends, example_index, contexts, max_answer_length):
    """HF's decoding rule on our windows: `SpanDecoder(rules="hf_pipeline")` (per-window
    probabilities, equal answers' scores added across windows; see its docstring)."""
    from keras_bert_zoo.text.span_decoder import SpanDecoder

    windows = {"token_starts": np.asarray(token_starts, "int32"), "token_ends": np.asarray(token_ends, "int32"),
               "max_context": np.zeros(np.shape(token_starts), "int32"),
               "example_index": np.asarray(example_index, "int32")}
    decoder = SpanDecoder(max_answer_length=max_answer_length, rules="hf_pipeline")
    answers = decoder(np.asarray(start, "float32"), np.asarray(end, "float32"), windows, list(contexts))
    return [t.decode("utf-8") for t in answers["answer_text"].numpy()]


def ours_with_hf_rule(preset, rows):
    """Worker: our windows and logits (float32), decoded by our rule and by HF's."""
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    model = BertSpanExtractor.from_preset(preset)
    rows = json.load(open(rows, encoding="utf-8"))
    questions, contexts = [r["question"] for r in rows], [r["context"] for r in rows]
    windows = {k: np.asarray(v) for k, v in model.preprocessor.windows(questions, contexts).items()}
    start, end = model._window_logits(windows)
    ours = [str(a) for a in model.predict((questions, contexts), batch_size=SETTINGS["batch_size"])["answer_text"]]
    theirs = hf_rule(start, end, windows["token_starts"], windows["token_ends"], windows["example_index"], contexts,
                     SETTINGS["max_answer_length"])
    return {"ours": ours, "hf_rule": theirs}


def compare(ours_rule, hf_matched, hf_default):
    """Agreement counts of the diagnostic answers (lists of strings)."""
    return {
        "our windows, HF rule vs HF matched windows": agreement(ours_rule["hf_rule"], hf_matched["answers"]),
        "our rule vs HF rule, same windows and logits": agreement(ours_rule["ours"], ours_rule["hf_rule"]),
        "HF matched windows vs HF default windows": agreement(hf_matched["answers"], hf_default),
        "ours vs HF default": agreement(ours_rule["ours"], hf_default),
    }


def causes(ours, ours_hf_rule, hf_matched, hf_default):
    """Per disagreement of ours with HF's default pipeline, the rule that causes it.

    The chain is ours -(HF's decoding rule)-> ours_hf_rule -(should equal)-> hf_matched
    -(HF's windows)-> hf_default: `decoding` where only the rule step changes the answer,
    `windows` where only the window step does, `both`, or `unexplained` where HF's rule on
    our logits differs from HF's pipeline on the same windows.
    """
    from keras_bert_zoo.metrics.squad import normalize_answer as n

    counts = {"windows": 0, "decoding": 0, "both": 0, "unexplained": 0}
    for a, r, m, d in zip(ours, ours_hf_rule, hf_matched, hf_default):
        if n(a) == n(d):
            continue
        if n(r) != n(m):
            counts["unexplained"] += 1
        else:
            rule, windows = n(a) != n(r), n(m) != n(d)
            counts["both" if rule and windows else "decoding" if rule else "windows"] += 1
    return counts


def diagnose(prepared, hf_default):
    """Runs the diagnostics on prepared MiniLM rows; returns counts and Markdown lines."""
    ours = run_config("benchmarks.qa_rules", "ours_with_hf_rule", dict(preset=prepared["preset"], rows=prepared["rows"]))
    matched = run_config("benchmarks.qa_rules", "hf_matched_windows", dict(hf=prepared["hf"], rows=prepared["rows"]),
                         env=hf_env())
    if hf_default is None:
        got = run_config(QA_MODULE, "measure_hf_pipeline", dict(hf=prepared["hf"], rows=prepared["rows"],
                                                            precision="float32"), env=hf_env())
        hf_default = got.get("answers")
    if any("error" in r for r in (ours, matched)) or hf_default is None:
        return {"error": str([r.get("error") for r in (ours, matched)])}
    out = {k: list(v) for k, v in compare(ours, matched, hf_default).items()}
    out["ours vs HF matched windows"] = list(agreement(ours["ours"], matched["answers"]))
    out["causes"] = causes(ours["ours"], ours["hf_rule"], matched["answers"], hf_default)
    return out


def lines(result):
    """Markdown lines of `diagnose`'s result."""
    if "error" in result:
        return [f"- agreement diagnostics failed: {result['error'][:300]}"]
    out = [f"- {name}: {s}/{t} ({100 * s / t:.1f}%)" for name, value in result.items() if name != "causes"
           for s, t in [value]]
    return out + ["- disagreements with HF default, by cause: "
                  + ", ".join(f"{k} {v}" for k, v in result["causes"].items())]


if __name__ == "__main__":  # python -m benchmarks.qa_rules PRESET QUESTIONS: the agreement only, no speed
    with tempfile.TemporaryDirectory(prefix="kbz_qa_rules_") as work:
        prep = run_config(QA_MODULE, "prepare", dict(workdir=work, model="minilm", questions=int(sys.argv[2]),
                                             qa_preset=sys.argv[1], exports=False), env=hf_env())
        if "error" in prep:
            sys.exit(f"prepare failed: {prep['error']}")
        print(f"{prep['questions']} questions, {prep['windows']['mean']:.2f} windows each, dropped {prep.get('dropped')}")
        print("\n".join(lines(diagnose(prep, None))))
