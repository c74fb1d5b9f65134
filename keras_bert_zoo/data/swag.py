"""SWAG (Zellers et al., 2018) from its `train.csv` / `val.csv` / `test.csv`: raw text, no tokenizing.

Each row is a context `sent1`, the start of the next sentence `sent2` and four
endings; as in the paper (§4.4) and the reference implementations, choice i is the
pair (sentence A = `sent1`, sentence B = `sent2 + " " + ending_i`).
"""

import csv
import logging

import numpy as np

from keras_bert_zoo.data.glue import FIELD_LIMIT, SKIP_HINT, decoded_lines
from keras_bert_zoo.data.input_checks import label_index

logger = logging.getLogger("keras_bert_zoo.data")

SWAG_COLUMNS = ("sent1", "sent2")
SWAG_CHOICES = 4  # every SWAG row has ending0..ending3; a model is built for this many
SWAG_ENDINGS = tuple(f"ending{i}" for i in range(SWAG_CHOICES))


def read_swag(path, errors="raise", with_ids=False, skipped=None):
    """Reads one SWAG CSV file.

    Args:
        path: str. `train.csv`, `val.csv` or `test.csv` as distributed (a header with
            `sent1`, `sent2`, `ending0`...`ending3` and, except the test file, `label`).
            A header without these columns raises a `ValueError` naming them.
        errors: str. "raise": a malformed row (wrong number of columns, a label that is
            not a choice index, an empty context or ending, bytes that are not UTF-8, a
            field over `FIELD_LIMIT` characters) raises a `ValueError` naming the file,
            line and column. "skip": such rows are dropped and counted in a warning.
            Defaults to "raise".
        with_ids: bool. Also return each row's id: the file's first column when its header
            is unnamed (the distributed files' row index), else the row's position among
            the data rows (0-based, dropped rows counted), so a dropped row never
            renumbers the rows after it. Defaults to False.
        skipped: list or None. With errors="skip", `(line number, message)` of each
            dropped row is appended to it, for callers that report the count.

    Returns:
        `((contexts, endings), y)` (or `((contexts, endings), y, ids)`): `contexts` a
        list of N strings, `endings` N lists of 4 strings, `y` int32 choice indices or
        None for the test file.

    Examples:
    >>> (contexts, endings), y = keras_bert_zoo.data.read_swag("swag/val.csv")
    >>> contexts[0], endings[0], y
    ('A man sits down.', ['He eats.', 'He flies.', 'He rains.', 'He is a car.'], array([0, 0], dtype=int32))
    """
    if errors not in ("raise", "skip"):
        raise ValueError(f"`errors` must be 'raise' or 'skip'. Received: errors={errors!r}.")
    contexts, endings, labels, ids, bad = [], [], [], [], []
    problems = {}  # line number -> why it is not UTF-8

    def lines():
        for number, text, problem in decoded_lines(path, "SWAG"):
            if problem:
                problems[number] = problem
            yield text

    reader = csv.reader(lines())
    header, columns, line, position = None, None, 0, 0
    while True:
        start = line + 1  # a quoted field may span lines: a row is reported at its first
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as e:  # its field size limit (FIELD_LIMIT) above all; the next row reads on
            row, failure = None, f"{path}, line {reader.line_num}: {e} (a lost quote?). Fix the line, or {SKIP_HINT}."
        line = reader.line_num
        problem = next((problems[n] for n in range(start, line + 1) if n in problems), None)
        if header is None:
            if row is None or problem:
                raise ValueError(failure if row is None else f"{problem}.")
            if not row:
                continue
            header, columns = row, _columns(row, f"{path}, line {start}")
            continue
        if row == []:
            continue  # a blank line, as csv reads it
        position += 1
        try:
            if row is None:
                raise ValueError(failure)
            if problem:
                raise ValueError(f"{problem}, or {SKIP_HINT}.")
            context, choices, label = _row(row, header, columns, f"{path}, line {start}")
        except ValueError as e:
            if errors == "raise":
                raise
            bad.append((start, str(e)))
            continue
        contexts.append(context)
        endings.append(choices)
        labels.append(label)
        ids.append(row[0] if header[0] == "" else str(position - 1))
    if header is None:
        raise ValueError(f"SWAG file {path!r} is empty.")
    if bad:
        logger.warning("%s: skipped %d malformed row(s) of %d; first: %s", path, len(bad),
                       len(bad) + len(contexts), "; ".join(message for _, message in bad[:3]))
        if skipped is not None:
            skipped.extend(bad)
    y = None if columns["label"] is None else np.asarray(labels, "int32")
    return ((contexts, endings), y, ids) if with_ids else ((contexts, endings), y)


def _columns(header, where):
    missing = [name for name in SWAG_COLUMNS + SWAG_ENDINGS if name not in header]
    if missing:
        raise ValueError(
            f"{where}: the SWAG header lacks the column(s) {missing}; it has {header}. A SWAG file "
            f"needs {list(SWAG_COLUMNS + SWAG_ENDINGS)} and, except the test file, 'label'."
        )
    return {
        "sent1": header.index("sent1"),
        "sent2": header.index("sent2"),
        "endings": [header.index(name) for name in SWAG_ENDINGS],
        "label": header.index("label") if "label" in header else None,
    }


def _row(row, header, columns, where):
    if len(row) != len(header):
        raise ValueError(f"{where}: {len(row)} columns, the header has {len(header)}.")
    for i, value in enumerate(row):
        if len(value) > FIELD_LIMIT:
            raise ValueError(f"{where}, column {i + 1} ({header[i]!r}): a field of {len(value)} characters, "
                             f"over the {FIELD_LIMIT}-character limit. Fix the row, or {SKIP_HINT}.")
    for i in [columns["sent1"]] + columns["endings"]:
        if not row[i].strip():
            raise ValueError(f"{where}, column {i + 1} ({header[i]!r}): empty text.")
    sent2 = row[columns["sent2"]].strip()
    choices = [f"{sent2} {row[i].strip()}".strip() for i in columns["endings"]]
    label = None
    if columns["label"] is not None:
        label = label_index(row[columns["label"]], [str(i) for i in range(len(choices))],
                            f"{where}, column {columns['label'] + 1} ('label')", "The label is the right ending's index.")
    return row[columns["sent1"]], choices, label
