"""SWAG (Zellers et al., 2018) from its `train.csv` / `val.csv` / `test.csv`: raw text, no tokenizing.

Each row is a context `sent1`, the start of the next sentence `sent2` and four
endings; as in the paper (§4.4) and the reference implementations, choice i is the
pair (sentence A = `sent1`, sentence B = `sent2 + " " + ending_i`).
"""

import csv
import logging

import numpy as np

logger = logging.getLogger("keras_bert_zoo.data")

SWAG_COLUMNS = ("sent1", "sent2")


def read_swag(path, errors="raise"):
    """Reads one SWAG CSV file.

    Args:
        path: str. `train.csv`, `val.csv` or `test.csv` as distributed (a header with
            `sent1`, `sent2`, `ending0`...`ending3` and, except the test file, `label`).
        errors: str. "raise": a malformed row (wrong number of columns, a label that is
            not a choice index, an empty context or ending) raises a `ValueError` naming
            the file, line and column. "skip": such rows are dropped and counted in a
            warning. Defaults to "raise".

    Returns:
        `((contexts, endings), y)`: `contexts` a list of N strings, `endings` N lists of
        `num_choices` strings, `y` int32 choice indices or None for the test file.

    Examples:
    >>> (contexts, endings), y = keras_bert_zoo.data.read_swag("swag/val.csv")
    >>> contexts[0], endings[0], y
    ('A man sits down.', ['He eats.', 'He flies.', 'He rains.', 'He is a car.'], array([0, 0], dtype=int32))
    """
    if errors not in ("raise", "skip"):
        raise ValueError(f"`errors` must be 'raise' or 'skip'. Received: errors={errors!r}.")
    contexts, endings, labels, bad = [], [], [], []
    try:
        handle = open(path, encoding="utf-8-sig", newline="")
    except OSError as e:
        raise ValueError(f"Cannot read SWAG file {path!r}: {e.strerror}.") from e
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"SWAG file {path!r} is empty.")
        columns = _columns(header, path)
        line = reader.line_num
        for row in reader:
            line, start = reader.line_num, line + 1  # a quoted field may span lines
            try:
                context, choices, label = _row(row, header, columns, f"{path}, line {start}")
            except ValueError as e:
                if errors == "raise":
                    raise
                bad.append(str(e))
                continue
            contexts.append(context)
            endings.append(choices)
            labels.append(label)
    if bad:
        logger.warning("%s: skipped %d malformed row(s) of %d; first: %s", path, len(bad),
                       len(bad) + len(contexts), "; ".join(bad[:3]))
    y = None if columns["label"] is None else np.asarray(labels, "int32")
    return (contexts, endings), y


def _columns(header, path):
    endings = []
    while f"ending{len(endings)}" in header:
        endings.append(header.index(f"ending{len(endings)}"))
    missing = [name for name in SWAG_COLUMNS if name not in header]
    if missing or len(endings) < 2:
        raise ValueError(
            f"{path}, line 1: a SWAG header needs {list(SWAG_COLUMNS)} and ending0, ending1, ...; "
            f"it has {header}."
        )
    return {
        "sent1": header.index("sent1"),
        "sent2": header.index("sent2"),
        "endings": endings,
        "label": header.index("label") if "label" in header else None,
    }


def _row(row, header, columns, where):
    if len(row) != len(header):
        raise ValueError(f"{where}: {len(row)} columns, the header has {len(header)}.")
    for i in [columns["sent1"]] + columns["endings"]:
        if not row[i].strip():
            raise ValueError(f"{where}, column {i + 1} ({header[i]!r}): empty text.")
    sent2 = row[columns["sent2"]].strip()
    choices = [f"{sent2} {row[i].strip()}".strip() for i in columns["endings"]]
    label = None
    if columns["label"] is not None:
        token = row[columns["label"]]
        if token not in [str(i) for i in range(len(choices))]:
            raise ValueError(
                f"{where}, column {columns['label'] + 1} ('label'): {token!r} is not a choice index "
                f"0..{len(choices) - 1}."
            )
        label = int(token)
    return row[columns["sent1"]], choices, label
