"""SQuAD v1.1 and v2.0: the JSON files as distributed, and `tensorflow-datasets`, offline.

The JSON layout is `{"data": [{"title", "paragraphs": [{"context", "qas": [{"id",
"question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}`; dev files
carry several gold answers per question, v2.0 files `is_impossible` (and
`plausible_answers`, ignored). Every answer is checked: `answer_start` must point at
its text in the context (character offsets, as Python `str` indices).
"""

import dataclasses
import json
import logging

import numpy as np

logger = logging.getLogger("keras_bert_zoo.data")

# The command line's name for `skip_bad_answers` (tools/finetune.py), named with it in every fix.
SKIP_HINT = "pass --skip-malformed (skip_bad_answers=True in Python)"


@dataclasses.dataclass
class SquadData:
    """Questions with their contexts and gold answers.

    Attributes:
        ids: question ids.
        questions: question texts.
        contexts: each question's context paragraph.
        answers: gold answer texts per question ([] when unanswerable).
        answer_starts: the answers' character offsets in the context.
        skipped: answers dropped as misaligned (only with `skip_bad_answers=True`).
        dropped: `(question id or, without one, its place, message)` of each question
            dropped (only with `skip_bad_answers=True`): malformed, a repeated id, or
            left without an answer; `len(dropped)` is what a run reports.
    """

    ids: list
    questions: list
    contexts: list
    answers: list
    answer_starts: list
    skipped: int = 0
    dropped: list = dataclasses.field(default_factory=list)

    def __len__(self):
        return len(self.ids)

    @property
    def x(self):
        """`(questions, contexts)`, what `BertSpanExtractor.fit`/`predict` take."""
        return self.questions, self.contexts

    @property
    def y(self):
        """int32 (questions, 2): the first answer's character span `[start, end)`,
        `(-1, -1)` when unanswerable (the original trains on the first answer)."""
        spans = np.full((len(self.ids), 2), -1, "int32")
        for i, (texts, starts) in enumerate(zip(self.answers, self.answer_starts)):
            if texts:
                spans[i] = (starts[0], starts[0] + len(texts[0]))
        return spans

    @property
    def is_impossible(self):
        """bool (questions,): True where the question has no answer."""
        return np.array([not texts for texts in self.answers], bool)

    def gold_answers(self):
        """`{id: [answer texts]}`, as `keras_bert_zoo.metrics.squad` takes them."""
        return dict(zip(self.ids, self.answers))


def read_squad(path, skip_bad_answers=False):
    """Reads a SQuAD v1.1 or v2.0 JSON file (train or dev).

    Args:
        path: str. The file as distributed (`train-v1.1.json`, `dev-v2.0.json`, ...).
        skip_bad_answers: bool. An answer whose `answer_start` does not point at its
            text, a question without its `id`/`question`/`context` string or with the id
            of an earlier one raises a `ValueError` naming the file, the question's place
            and id; True drops such answers (and questions left without one) and such
            questions, logs how many and lists them in `SquadData.dropped`. The command
            line's `--skip-malformed`. Defaults to False.

    Returns:
        `SquadData`.

    Examples:
    >>> data = keras_bert_zoo.data.read_squad("dev-v1.1.json")
    >>> questions, contexts = data.x
    >>> questions[0], data.gold_answers()
    ('Who wrote the story?', {'q1': ['Ann']})
    """
    with open(path, encoding="utf-8") as f:
        try:
            document = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path!r} is not valid JSON ({e}); expected a SQuAD file.") from e
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise ValueError(f"{path!r} has no top-level 'data' list; expected SQuAD's layout.")
    return _collect(_json_rows(document["data"]), path, skip_bad_answers)


def _json_rows(articles):
    """Yields `(place, context, qa, problem)` per question of SQuAD's `data` list; `problem`
    is None, or what is broken above the question (then `qa` may be None)."""
    for a, article in enumerate(articles):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            yield f"data[{a}]", None, None, "an article without a 'paragraphs' list"
            continue
        for p, paragraph in enumerate(paragraphs):
            qas = paragraph.get("qas") if isinstance(paragraph, dict) else None
            if not isinstance(qas, list):
                yield f"data[{a}].paragraphs[{p}]", None, None, "a paragraph without a 'qas' list"
                continue
            missing = None if "context" in paragraph else f"its paragraph data[{a}].paragraphs[{p}] has no 'context' key"
            for q, qa in enumerate(qas):
                yield f"data[{a}].paragraphs[{p}].qas[{q}]", paragraph.get("context"), qa, missing


def _collect(rows, source, skip):
    """`SquadData` of `(place, context, qa, problem)` rows, each checked (see `read_squad`)."""
    data = SquadData([], [], [], [], [])
    places = {}  # question id -> where it was first seen
    for place, context, qa, problem in rows:
        qid = qa.get("id") if isinstance(qa, dict) else None
        try:
            _check_question(qa, context, problem, place, places, source)
            texts, starts, bad = _answers(qa, context, f"{source}, {place}", skip)
        except ValueError as e:
            if not skip:
                raise
            data.dropped.append((qid if isinstance(qid, str) else place, str(e)))
            continue
        places[qid] = place
        data.skipped += bad
        if bad and not texts:
            data.dropped.append((qid, f"{source}, {place}: question {qid!r}: every answer misaligned, none left."))
            continue
        data.ids.append(qid)
        data.questions.append(qa["question"])
        data.contexts.append(context)
        data.answers.append(texts)
        data.answer_starts.append(starts)
    if data.skipped or data.dropped:
        logger.warning("%s: skipped %d misaligned answer(s); dropped %d question(s) (malformed, repeated or left "
                       "without an answer); first: %s", source, data.skipped, len(data.dropped),
                       "; ".join(message for _, message in data.dropped[:3]))
    return data


def _check_question(qa, context, problem, place, places, source):
    """Raises a `ValueError` naming the place, id and key of a question the model cannot take."""
    fix = f"Fix it, or {SKIP_HINT} to drop such questions."
    if problem is None and not isinstance(qa, dict):
        problem = f"not a question object ({{'id', 'question', 'answers'}}) but {str(qa)[:80]!r}"
    qid = qa.get("id") if isinstance(qa, dict) else None
    where = f"{source}, {place}" + (f" (question {qid!r})" if qid is not None else "")
    if problem is None:
        problem = next((f"no {key!r} key" for key in ("id", "question") if key not in qa), None)
    if problem is None:
        values = (("id", qid), ("question", qa["question"]), ("context", context))
        problem = next((f"{key!r} is {value!r}, where a non-empty string belongs" for key, value in values
                        if not isinstance(value, str) or not value.strip()), None)
    if problem is not None:
        raise ValueError(f"{where}: {problem}. {fix}")
    if qid in places:
        raise ValueError(f"{source}: question id {qid!r} appears twice, at {places[qid]} and at {place}. Give each "
                         f"question its own id, or {SKIP_HINT} to keep the first.")


def _answers(qa, context, where, skip):
    """Checked (texts, starts, number dropped) of one question."""
    qid = qa["id"]
    if qa.get("is_impossible", False):
        return [], [], 0
    answers = qa.get("answers")
    if not answers:
        raise ValueError(f"{where}: question {qid!r} has no answers and is not marked is_impossible. Fix it, or "
                         f"{SKIP_HINT} to drop such questions.")
    texts, starts, bad = [], [], 0
    for answer in answers:
        text, start = (answer.get("text"), answer.get("answer_start")) if isinstance(answer, dict) else (None, None)
        if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
            raise ValueError(f"{where}: question {qid!r} has an answer without a text string and an int "
                             f"answer_start: {answer!r}. Fix it, or {SKIP_HINT} to drop such questions.")
        if start < 0 or context[start : start + len(text)] != text or not text:
            if not skip:
                raise ValueError(
                    f"{where}: question {qid!r}: answer_start={start} does not point at its text {text!r} "
                    f"(the context there reads {context[max(start, 0):max(start, 0) + len(text)]!r}). Fix the "
                    f"offset, or {SKIP_HINT} to drop such answers."
                )
            bad += 1
            continue
        texts.append(text)
        starts.append(start)
    return texts, starts, bad


def load_squad_tfds(name, split, data_dir=None, skip_bad_answers=False):
    """Reads a prepared tfds SQuAD dataset (`squad/v1.1`, `squad/v2.0`) without downloading.

    Args:
        name: str. `"squad/v1.1"` or `"squad/v2.0"` (optionally with `:version`).
        split: str. "train", "validation" or a slice such as "validation[:10%]".
        data_dir: str or None. Where it was prepared; None is tfds's default.
        skip_bad_answers: bool. As `read_squad`. Defaults to False.

    Returns:
        `SquadData`, in tfds's order.
    """
    import tensorflow_datasets as tfds  # lazy: tensorflow_datasets is optional and slow to import

    if name.split(":")[0] not in ("squad/v1.1", "squad/v2.0"):
        raise ValueError(f"Unknown tfds SQuAD config. Received: name={name!r}. Use 'squad/v1.1' or 'squad/v2.0'.")
    builder = tfds.builder(name, data_dir=data_dir, try_gcs=False)
    if not builder.is_prepared():
        raise ValueError(
            f"tfds dataset {name} is not prepared under data_dir={data_dir!r} and this loader does not "
            f"download. Prepare it once where the network is reachable (tfds.builder({name!r}, "
            "data_dir=...).download_and_prepare()) and pass that data_dir."
        )
    rows = builder.as_dataset(split=split, shuffle_files=False).as_numpy_iterator()
    return _collect(((f"example {i}", *_tfds_row(row), None) for i, row in enumerate(rows)), f"{name} {split}",
                    skip_bad_answers)


def _tfds_row(row):
    """A tfds example -> `(context, qa)` in the JSON's layout."""
    qa = {
        "id": row["id"].decode("utf-8"),
        "question": row["question"].decode("utf-8"),
        "is_impossible": bool(row.get("is_impossible", False)),
        "answers": [
            {"text": t.decode("utf-8"), "answer_start": int(s)}
            for t, s in zip(row["answers"]["text"], row["answers"]["answer_start"])
        ],
    }
    return row["context"].decode("utf-8"), qa
