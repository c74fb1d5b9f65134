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
    """

    ids: list
    questions: list
    contexts: list
    answers: list
    answer_starts: list
    skipped: int = 0

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
            text raises a `ValueError` naming the question id; True drops such answers
            (and questions left without one) and logs how many. Defaults to False.

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
    rows = (
        (paragraph["context"], qa)
        for article in document["data"]
        for paragraph in article.get("paragraphs", [])
        for qa in paragraph["qas"]
    )
    return _collect(rows, path, skip_bad_answers)


def _collect(rows, source, skip):
    """`SquadData` of `(context, qa)` rows, answers checked (see `read_squad`)."""
    data = SquadData([], [], [], [], [])
    skipped_questions = 0
    for context, qa in rows:
        texts, starts, bad = _answers(qa, context, source, skip)
        data.skipped += bad
        if bad and not texts:
            skipped_questions += 1
            continue
        data.ids.append(qa["id"])
        data.questions.append(qa["question"])
        data.contexts.append(context)
        data.answers.append(texts)
        data.answer_starts.append(starts)
    if data.skipped:
        logger.warning("%s: skipped %d misaligned answer(s); %d question(s) left without an answer dropped.",
                       source, data.skipped, skipped_questions)
    return data


def _answers(qa, context, path, skip):
    """Checked (texts, starts, number dropped) of one question."""
    qid = qa.get("id", "?")
    if qa.get("is_impossible", False):
        return [], [], 0
    answers = qa.get("answers")
    if not answers:
        raise ValueError(f"{path}: question {qid!r} has no answers and is not marked is_impossible.")
    texts, starts, bad = [], [], 0
    for answer in answers:
        text, start = answer.get("text"), answer.get("answer_start")
        if not isinstance(text, str) or not isinstance(start, int) or isinstance(start, bool):
            raise ValueError(f"{path}: question {qid!r} has an answer without a text string and an int "
                             f"answer_start: {answer!r}.")
        if start < 0 or context[start : start + len(text)] != text or not text:
            if not skip:
                raise ValueError(
                    f"{path}: question {qid!r}: answer_start={start} does not point at its text {text!r} "
                    f"(the context there reads {context[max(start, 0):max(start, 0) + len(text)]!r}). Fix the "
                    "offset, or pass skip_bad_answers=True to drop such answers."
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
    return _collect((_tfds_row(row) for row in builder.as_dataset(split=split, shuffle_files=False)
                     .as_numpy_iterator()), name, skip_bad_answers)


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
