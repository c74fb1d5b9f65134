"""Real extractive questions from BIG-bench, written as SQuAD v1.1 and v2.0 JSON.

Two BIG-bench tasks (the `bigbench==1.0.0` sdist on PyPI; `tools/fetch_bigbench_qa.py`
extracts them, `make test` runs it) hold questions whose answers are spans of a passage:

- Quoref (`natural_instructions/subtask002_quoref_answer_generation`): 6,500 questions
  on 2,942 Wikipedia passages of ~330 words (longer than one 256-token window), the input
  `"Passage: ... \\nQuestion: ..."`. Natural Instructions appended a "." to every answer;
  it is removed. 680 questions have several answers that are *all* needed ("the names of
  the two officers"): a span extractor cannot give them, so they are skipped.
- Disfl-QA (`disfl_qa`): 8,000 disfluent questions ("What do petrologists use rock
  samples or rather electron microprobes ... for?") on 1,204 SQuAD 2.0 paragraphs,
  pre-tokenized with spaces around punctuation, the input `"QUESTION \\ncontext: CONTEXT"`;
  the answer "unknown" (2,107) marks an unanswerable question (`is_impossible`).

Neither file gives `answer_start`: it is the answer's position in the passage. Where the
answer occurs several times the *first occurrence bounded by non-alphanumeric characters*
is taken (so "Ann" is not found inside "Anne"), else the first occurrence; Disfl-QA's
un-tokenized answers ("40,000" for the context's "40 , 000") are matched ignoring
whitespace, and the gold text is then the context's own span. Answers found nowhere are
skipped and counted. Train and dev hold disjoint passages (a crc32 hash of the passage).

These are not SQuAD or Quoref benchmark numbers: never compare them with published ones.
BIG-bench data carries a canary: fine-tune and evaluate on it, never pretrain on it.
"""

import collections
import json
import os
import re
import sys
import zlib

from keras_bert_zoo.utils.files import atomic_write_text

QUOREF = "natural_instructions/subtask002_quoref_answer_generation/task.json"
DISFL_QA = "disfl_qa/task.json"
UNKNOWN = "unknown"  # Disfl-QA's answer to an unanswerable question


def default_data_dir():
    """Where `make test` puts the files: `<sys.prefix>/share/keras_bert_zoo/data/bigbench`."""
    return os.path.join(sys.prefix, "share", "keras_bert_zoo", "data", "bigbench")


def task_path(member, data_dir=None):
    """The path of one task file (`QUOREF` or `DISFL_QA`) under `data_dir`.

    Raises:
        FileNotFoundError: it is not there; the message gives the command that gets it.
    """
    data_dir = data_dir or default_data_dir()
    path = os.path.join(data_dir, member)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"The BIG-bench question-answering data ({member}) is not at {path}. Get it with: "
            f"python tools/fetch_bigbench_qa.py --output {data_dir}  (`make test` runs it; it downloads the "
            "bigbench==1.0.0 sdist from PyPI, 358 MB, and keeps two files)."
        )
    return path


def find_answer(context, answer):
    """The character offset of `answer` in `context`, or None if it is not there.

    The first occurrence that starts and ends at a word boundary (no letter or digit
    just outside it) wins, else the first occurrence; only if there is no exact
    occurrence is whitespace ignored (`"40,000"` found as `"40 , 000"`), with the same
    preference. Returns `(start, end)` so that `context[start:end]` is the gold text.
    """
    for spans in (_exact_spans(context, answer), _spaceless_spans(context, answer)):
        spans = list(spans)
        if spans:
            bounded = [s for s in spans if _at_word_boundaries(context, *s)]
            return (bounded or spans)[0]
    return None


def _exact_spans(context, answer):
    start = context.find(answer)
    while answer and start >= 0:
        yield start, start + len(answer)
        start = context.find(answer, start + 1)


def _spaceless_spans(context, answer):
    """Occurrences of `answer` with every whitespace run in either text ignored."""
    positions = [i for i, c in enumerate(context) if not c.isspace()]
    compact = "".join(context[i] for i in positions)
    target = re.sub(r"\s+", "", answer)
    for start, end in _exact_spans(compact, target):
        yield positions[start], positions[end - 1] + 1


def _at_word_boundaries(context, start, end):
    return (start == 0 or not context[start - 1].isalnum()) and (end == len(context) or not context[end].isalnum())


def read_quoref(data_dir=None):
    """Quoref rows `(id, passage, question, answers)` in the file's order (answers without
    the trailing "." Natural Instructions added)."""
    with open(task_path(QUOREF, data_dir), encoding="utf-8") as f:
        examples = json.load(f)["examples"]
    rows = []
    for i, example in enumerate(examples):
        passage, question = example["input"].removeprefix("Passage: ").rsplit("\nQuestion: ", 1)
        answers = [a[:-1] if a.endswith(".") else a for a in example["target"]]
        rows.append((f"quoref-{i:05d}", passage.strip(), question.strip(), answers))
    return rows


def read_disfl_qa(data_dir=None):
    """Disfl-QA rows `(id, context, question, answers)`; `answers` is [] for "unknown"."""
    with open(task_path(DISFL_QA, data_dir), encoding="utf-8") as f:
        examples = json.load(f)["examples"]
    rows = []
    for i, example in enumerate(examples):
        question, context = example["input"].split("\ncontext:", 1)
        target = example["target"].strip()
        rows.append((f"disfl_qa-{i:05d}", context.strip(), question.strip(), [] if target == UNKNOWN else [target]))
    return rows


def is_dev(passage, dev_fraction):
    """True for the passages whose crc32 falls in the first `dev_fraction` of 1000 buckets."""
    return zlib.crc32(passage.encode("utf-8")) % 1000 < dev_fraction * 1000


def write_quoref_squad(out_dir, data_dir=None, dev_fraction=0.1, prefix="quoref"):
    """Writes Quoref as SQuAD v1.1 files `<prefix>_train.json` and `<prefix>_dev.json`.

    Args:
        out_dir: str. Created if needed; files are written atomically.
        data_dir: str or None. Where the BIG-bench files are; None is `default_data_dir()`.
        dev_fraction: float. Share of passages in dev. Defaults to 0.1.
        prefix: str. File name prefix. Defaults to "quoref".

    Returns:
        dict: `train`/`dev` -> `(path, questions written)`, and `skipped` -> counts of
        questions left out (`multi_span`: several answers all needed; `not_in_context`;
        `empty_question`: no question text).
    """
    return _write(read_quoref(data_dir), out_dir, prefix, "1.1", dev_fraction)


def write_disfl_qa_squad(out_dir, data_dir=None, dev_fraction=0.1, prefix="disfl"):
    """Writes Disfl-QA as SQuAD v2.0 files `<prefix>_train.json` and `<prefix>_dev.json`.

    "unknown" answers become `is_impossible: true` with no answers.

    Args:
        out_dir: str. Created if needed; files are written atomically.
        data_dir: str or None. Where the BIG-bench files are; None is `default_data_dir()`.
        dev_fraction: float. Share of paragraphs in dev. Defaults to 0.1.
        prefix: str. File name prefix. Defaults to "disfl".

    Returns:
        dict: `train`/`dev` -> `(path, questions written)`, and `skipped` -> counts of
        questions left out (`not_in_context`: the answer is no span of the paragraph;
        `empty_question`: no question text).
    """
    return _write(read_disfl_qa(data_dir), out_dir, prefix, "2.0", dev_fraction)


def _write(rows, out_dir, prefix, version, dev_fraction):
    if not 0.0 < dev_fraction < 1.0:
        raise ValueError(f"`dev_fraction` must be in (0, 1). Received: dev_fraction={dev_fraction!r}.")
    skipped = collections.Counter(multi_span=0, not_in_context=0, empty_question=0)
    splits = {"train": collections.OrderedDict(), "dev": collections.OrderedDict()}
    for qid, context, question, answers in rows:
        qa = _qa(qid, question, context, answers, version, skipped)
        if qa is not None:
            split = "dev" if is_dev(context, dev_fraction) else "train"
            splits[split].setdefault(context, []).append(qa)
    os.makedirs(out_dir, exist_ok=True)
    written = {}
    for split, paragraphs in splits.items():
        data = [
            {"title": f"{prefix}-{zlib.crc32(context.encode('utf-8')):08x}", "paragraphs": [{"context": context,
                                                                                               "qas": qas}]}
            for context, qas in paragraphs.items()
        ]
        path = os.path.join(out_dir, f"{prefix}_{split}.json")
        atomic_write_text(path, json.dumps({"version": f"v{version}", "data": data}, ensure_ascii=False) + "\n")
        written[split] = (path, sum(len(qas) for qas in paragraphs.values()))
    written["skipped"] = dict(skipped)
    return written


def _qa(qid, question, context, answers, version, skipped):
    """One SQuAD `qas` entry, or None (counted in `skipped`)."""
    if len(answers) > 1:  # Quoref's multi-span answers: all are needed, one span cannot be right
        skipped["multi_span"] += 1
        return None
    if not question.strip():  # Disfl-QA holds a few: a reader refuses a question with no text
        skipped["empty_question"] += 1
        return None
    qa = {"id": qid, "question": question, "answers": []}
    if version == "2.0":
        qa["is_impossible"] = not answers
    if answers:
        span = find_answer(context, answers[0])
        if span is None:
            skipped["not_in_context"] += 1
            return None
        qa["answers"] = [{"text": context[span[0] : span[1]], "answer_start": span[0]}]
    elif version == "1.1":
        raise ValueError(f"Question {qid!r} has no answer, which SQuAD v1.1 cannot hold.")
    return qa
