"""GLUE's nine tasks (and SNLI, in MNLI's layout) from the original files: raw text and labels, no tokenizing.

Each task's `train.tsv`, `dev.tsv` (MNLI: `dev_matched.tsv`, `dev_mismatched.tsv`) and
`test.tsv` (`test_matched.tsv`, ...) exactly as GLUE distributes them (SNLI: the
`snli_1.0_{train,dev,test}.txt` of its 1.0 release, whose rows without a gold label, `-`,
are dropped and counted in the log, as its users do): tab-separated,
no quoting (the original `run_classifier.py` reads them with `quotechar=None`), a header
row except CoLA's labelled files (columns source, label, original label, sentence).
Columns are found by the header's names, so MNLI's 12-column train and 16-column dev
files and every test file (no label column) read with one rule. Label ids follow the
original processors' `get_labels()` order.
"""

import dataclasses
import logging
import math
import os

import numpy as np

from keras_bert_zoo.data.input_checks import label_index
from keras_bert_zoo.utils.files import atomic_write_text

logger = logging.getLogger("keras_bert_zoo.data")


@dataclasses.dataclass(frozen=True)
class GlueFormat:
    """One task's file layout: text and label columns by header name, label tokens."""

    text_columns: tuple  # header names of sentence A (and B)
    label_column: str  # header name of the label (absent from test files)
    file_labels: tuple  # the label tokens in the files, in id order (() for STS-B's float score)
    names: tuple  # human-readable label names in id order (tfds's names)
    submission: str  # GLUE's submission file name (SNLI: ours, in GLUE's layout)
    no_gold: tuple = ()  # label tokens of rows without a gold label (SNLI's "-": no annotator majority): dropped


GLUE_FORMATS = {
    # CoLA's labelled files have no header: these are the names of its four columns.
    "cola": GlueFormat(("sentence",), "label", ("0", "1"), ("unacceptable", "acceptable"), "CoLA.tsv"),
    "sst2": GlueFormat(("sentence",), "label", ("0", "1"), ("negative", "positive"), "SST-2.tsv"),
    "mrpc": GlueFormat(("#1 String", "#2 String"), "Quality", ("0", "1"),
                       ("not_equivalent", "equivalent"), "MRPC.tsv"),
    "qqp": GlueFormat(("question1", "question2"), "is_duplicate", ("0", "1"),
                      ("not_duplicate", "duplicate"), "QQP.tsv"),
    "stsb": GlueFormat(("sentence1", "sentence2"), "score", (), (), "STS-B.tsv"),
    "mnli": GlueFormat(("sentence1", "sentence2"), "gold_label", ("contradiction", "entailment", "neutral"),
                       ("contradiction", "entailment", "neutral"), "MNLI-m.tsv"),
    "qnli": GlueFormat(("question", "sentence"), "label", ("entailment", "not_entailment"),
                       ("entailment", "not_entailment"), "QNLI.tsv"),
    "rte": GlueFormat(("sentence1", "sentence2"), "label", ("entailment", "not_entailment"),
                      ("entailment", "not_entailment"), "RTE.tsv"),
    "wnli": GlueFormat(("sentence1", "sentence2"), "label", ("0", "1"), ("not_entailment", "entailment"),
                       "WNLI.tsv"),
    # MNLI's label order, so an MNLI head lines up.
    "snli": GlueFormat(("sentence1", "sentence2"), "gold_label", ("contradiction", "entailment", "neutral"),
                       ("contradiction", "entailment", "neutral"), "SNLI.tsv", no_gold=("-",)),
}
GLUE_TASKS = tuple(GLUE_FORMATS)
COLA_COLUMNS = ("source", "label", "original_label", "sentence")
STSB_RANGE = (0.0, 5.0)
# The longest field read (characters): Python csv's default `field_size_limit`, so the
# GLUE and SWAG readers share one bound. A real sentence is far shorter; a longer field
# is a lost tab or quote that swallowed the lines after it.
FIELD_LIMIT = 128 * 1024
SKIP_HINT = "pass --skip-malformed (errors='skip' in Python) to drop such rows"


def glue_format(task):
    """The `GlueFormat` of a task name (`"cola"`, `"sst2"`, ..., `"wnli"`)."""
    if task not in GLUE_FORMATS:
        raise ValueError(f"Unknown GLUE task. Received: task={task!r}. Use one of {GLUE_TASKS}.")
    return GLUE_FORMATS[task]


def glue_labels(task):
    """The label names of a task in id order; None for STS-B (a regression score).

    Ids follow the original `run_classifier.py` (MNLI: contradiction, entailment,
    neutral), so Google's fine-tuned heads line up; `load_glue_tfds` maps tfds's ids to these.
    """
    names = glue_format(task).names
    return list(names) if names else None


def read_glue(task, path, errors="raise", with_ids=False, skipped=None):
    """Reads one GLUE file (train, dev or test) of `task`.

    Args:
        task: str. One of `GLUE_TASKS`.
        path: str. The file, as distributed (`train.tsv`, `dev_matched.tsv`, `test.tsv`, ...).
        errors: str. "raise": a malformed row (wrong number of columns, a label outside
            the task's label set, an empty sentence, bytes that are not UTF-8, a field
            over `FIELD_LIMIT` characters) raises a `ValueError` naming the file, line and
            column. "skip": such rows are dropped and counted in a warning with their
            first line numbers. Defaults to "raise".
        with_ids: bool. Also return each row's id: the file's `index`/`id` column, else
            the row's position among the file's data rows (0-based, dropped rows counted),
            so a dropped row never renumbers the rows after it. Defaults to False.
        skipped: list or None. With errors="skip", `(line number, message)` of each
            dropped row is appended to it, for callers that report the count.

    Returns:
        `(x, y)` (or `(x, y, ids)`): `x` a list of strings for single-sentence tasks, a
        tuple `(texts_a, texts_b)` of lists for pairs; `y` int32 label ids (float32
        scores for STS-B), or None for a test file (no label column).

    Examples:
    >>> (texts_a, texts_b), y = keras_bert_zoo.data.read_glue("mrpc", "MRPC/dev.tsv")
    >>> texts_a[0], texts_b[0], y
    ('The man sits down.', 'A man sits down.', array([1, 0, 1], dtype=int32))
    """
    fmt = glue_format(task)
    if errors not in ("raise", "skip"):
        raise ValueError(f"`errors` must be 'raise' or 'skip'. Received: errors={errors!r}.")
    columns, layout, position = None, None, 0
    texts, labels, ids, bad, no_gold = tuple([] for _ in fmt.text_columns), [], [], [], []
    for line_number, row, problem in _rows(path):
        if columns is None:
            if problem:  # no header, no columns to read the rest by: never skipped
                raise ValueError(f"{problem}.")
            columns = _header(task, row)
            layout = _columns(fmt, columns, path, line_number)
            if columns != COLA_COLUMNS:
                continue  # a header row; CoLA's labelled files start with data
        text_cols, label_col, id_col = layout
        position += 1  # the row's own place in the file, kept whether or not it is dropped
        try:
            if problem:
                raise ValueError(f"{problem}, or {SKIP_HINT}.")
            if len(row) != len(columns):
                raise ValueError(f"{path}, line {line_number}: {len(row)} columns where the "
                                 f"{'header' if columns != COLA_COLUMNS else 'CoLA layout'} has {len(columns)}.")
            _check_sizes(row, columns, path, line_number)
            if label_col is not None and row[label_col] in fmt.no_gold:
                no_gold.append(line_number)
                continue
            label = None if label_col is None else _label(fmt, row, label_col, columns, path, line_number)
            values = _texts(row, text_cols, columns, path, line_number)
        except ValueError as e:
            if errors == "raise":
                raise
            bad.append((line_number, str(e)))
            continue
        for column, value in zip(texts, values):
            column.append(value)
        labels.append(label)
        ids.append(row[id_col] if id_col is not None else str(position - 1))
    if columns is None:
        raise ValueError(f"GLUE file {path!r} is empty.")
    if no_gold:
        logger.warning("%s: dropped %d row(s) without a gold label (%s), first at lines %s", path, len(no_gold),
                       "/".join(fmt.no_gold), ", ".join(map(str, no_gold[:5])))
    if bad:
        logger.warning("%s: skipped %d malformed row(s) of %d; first: %s", path, len(bad),
                       len(bad) + len(ids), "; ".join(message for _, message in bad[:3]))
        if skipped is not None:
            skipped.extend(bad)
    x = texts[0] if len(texts) == 1 else texts
    y = None if layout[1] is None else np.asarray(labels, "float32" if not fmt.file_labels else "int32")
    return (x, y, ids) if with_ids else (x, y)


def write_glue_submission(task, path, ids, predictions, mismatched=False):
    """Writes GLUE's submission file for a test set: `index<TAB>prediction` rows.

    Args:
        task: str. One of `GLUE_TASKS`.
        path: str. A directory (the file gets GLUE's name, e.g. `CoLA.tsv`) or a file path.
        ids: list of str. The test rows' ids (`read_glue(..., with_ids=True)`).
        predictions: array. Label ids (or logits, argmax taken), STS-B scores.
        mismatched: bool. MNLI's mismatched test set (`MNLI-mm.tsv`). Defaults to False.

    Returns:
        The path written.
    """
    fmt = glue_format(task)
    predictions = np.asarray(predictions)
    if fmt.file_labels and predictions.ndim == 2:
        predictions = predictions.argmax(-1)
    predictions = predictions.reshape(len(ids), -1)[:, 0] if predictions.size == len(ids) else predictions
    if len(predictions) != len(ids):
        raise ValueError(f"`predictions` has {len(predictions)} rows but `ids` has {len(ids)}.")
    if fmt.file_labels:
        values = [fmt.file_labels[int(p)] for p in predictions]
    else:  # GLUE clips STS-B scores to its 0..5 scale.
        values = [f"{min(max(float(p), STSB_RANGE[0]), STSB_RANGE[1]):.3f}" for p in predictions]
    if os.path.isdir(path):
        name = "MNLI-mm.tsv" if mismatched and task == "mnli" else fmt.submission
        path = os.path.join(path, name)
    atomic_write_text(path, "index\tprediction\n" + "".join(f"{i}\t{v}\n" for i, v in zip(ids, values)))
    return path


def decoded_lines(path, kind, encoding="utf-8"):
    """Yields `(line number, text, problem)` of each line of a text file (a UTF-8 BOM dropped).

    Lines are decoded one at a time, so a byte that is not `encoding` is reported at its own
    line and character (a text-mode file fails at the first buffer, line 1) and the lines
    after it still read. `problem` is None, or the message of such a line (its fix for the
    caller to finish), whose text then holds U+FFFD in place of the bad bytes. Lines end at
    LF, CRLF or a lone CR, as Python's universal newlines split them, and keep their ending
    (what csv expects).
    """
    utf8 = encoding.lower().replace("_", "-") in ("utf-8", "utf8", "utf-8-sig")
    try:
        handle = open(path, "rb")
    except OSError as e:
        raise ValueError(f"Cannot read {kind} file {path!r}: {e.strerror}.") from e
    number = 0
    with handle:
        for chunk in handle:
            for raw in chunk.splitlines(keepends=True):
                number += 1
                if number == 1 and utf8 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    text, problem = raw.decode(encoding), None
                except UnicodeDecodeError as e:
                    character = len(raw[:e.start].decode(encoding, "replace")) + 1
                    text, problem = raw.decode(encoding, "replace"), (
                        f"{path}, line {number}, character {character} (byte {e.start + 1} of the line): not "
                        f"{'UTF-8' if utf8 else encoding} ({e.reason}, byte 0x{raw[e.start]:02x}). Re-save the file as "
                        f"{'UTF-8' if utf8 else encoding}")
                yield number, text, problem


def _rows(path):
    """Yields (line number, fields, problem) of a tab-separated file read without quoting.

    No quoting means a row is a line split at tabs, which is all csv's QUOTE_NONE does;
    splitting here keeps csv's process-wide field size limit out of it (see `FIELD_LIMIT`).
    """
    for number, text, problem in decoded_lines(path, "GLUE"):
        text = text.rstrip("\r\n")
        if text:
            yield number, text.split("\t"), problem


def _check_sizes(row, columns, path, line_number):
    for i, value in enumerate(row):
        if len(value) > FIELD_LIMIT:
            raise ValueError(
                f"{path}, line {line_number}, column {i + 1} ({columns[i]!r}): a field of {len(value)} characters, "
                f"over the {FIELD_LIMIT}-character limit of a GLUE field (a lost tab or line break?). Fix the "
                f"line, or {SKIP_HINT}."
            )


def _header(task, row):
    """The column names: the header row, or CoLA's fixed columns for its headerless files."""
    if task == "cola" and row != ["index", "sentence"]:
        return COLA_COLUMNS
    return tuple(row)


def _columns(fmt, columns, path, line_number):
    missing = [name for name in fmt.text_columns if name not in columns]
    if missing:
        raise ValueError(
            f"{path}, line {line_number}: the header lacks the column(s) {missing} of this task; it has "
            f"{list(columns)}. Is this the file of another task?"
        )
    label_col = columns.index(fmt.label_column) if fmt.label_column in columns else None
    id_name = next((name for name in ("index", "id") if name in columns), None)
    text_cols = [columns.index(name) for name in fmt.text_columns]
    return text_cols, label_col, None if id_name is None else columns.index(id_name)


def _label(fmt, row, label_col, columns, path, line_number):
    token = row[label_col]
    where = f"{path}, line {line_number}, column {label_col + 1} ({columns[label_col]!r})"
    if not fmt.file_labels:
        try:
            score = float(token)
        except ValueError:
            score = math.nan
        if not STSB_RANGE[0] <= score <= STSB_RANGE[1]:
            raise ValueError(f"{where}: {token!r} is not a score in {STSB_RANGE[0]}..{STSB_RANGE[1]}.")
        return score
    return label_index(token, fmt.file_labels, where)


def _texts(row, text_cols, columns, path, line_number):
    values = [row[i] for i in text_cols]
    for i, value in zip(text_cols, values):
        if not value.strip():
            raise ValueError(f"{path}, line {line_number}, column {i + 1} ({columns[i]!r}): empty sentence.")
    return values
