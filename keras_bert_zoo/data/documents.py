"""Raw pretraining documents: one sentence per line, a blank line between documents.

Streams with `tf.data` (a file is read line by line; only the current document is held).
"""

import os

import tensorflow as tf

from keras_bert_zoo.data import sentences

# Wraps a function so that tf.data traces it as written, without AutoGraph converting
# its Python control flow. The pipeline's functions use TF ops and explicit
# `tf.cond`/`tf.while_loop` only, so AutoGraph would only add start-up time (it parses
# and rewrites each function's source, in every process).
without_autograph = tf.autograph.experimental.do_not_convert


def resolve_files(files):
    """Expands file names and globs into a sorted, de-duplicated list of paths.

    Args:
        files: str or list of str. Paths or glob patterns; a str may hold several,
            separated by commas (the original `--input_file` convention).

    Returns:
        list of str.

    Raises:
        ValueError: nothing given, or a path/glob matches no file (the message names it).
    """
    if isinstance(files, (str, os.PathLike)):
        files = [os.fspath(files)]
    if not files:
        raise ValueError(f"`files` must name at least one input file. Received: files={files!r}.")
    patterns = [p.strip() for f in files for p in str(f).split(",") if p.strip()]
    out, missing = [], []
    for pattern in patterns:
        matches = sorted(m for m in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(m))
        if not matches:
            missing.append(pattern)
        out.extend(matches)
    if missing:
        raise ValueError(
            f"These input paths or globs match no file: {missing}. Check the spelling, or remove them "
            f"from `files`. Received: files={files!r}."
        )
    return list(dict.fromkeys(out))


def clean_lines(lines):
    """Drops invalid UTF-8 bytes and strips whitespace from a string tensor of lines.

    Returns:
        (cleaned lines, bool tensor: the line had invalid UTF-8).
    """
    # Transcoding is the costly part: only lines with a byte >= 0x80 need it.
    ascii_lines = tf.strings.regex_full_match(lines, r"[\x00-\x7f]*")
    rest = tf.cast(tf.where(~ascii_lines)[:, 0], tf.int32)
    original = tf.gather(lines, rest)
    fixed = tf.strings.unicode_transcode(original, "UTF-8", "UTF-8", errors="ignore")
    bad = tf.scatter_nd(rest[:, None], tf.not_equal(fixed, original), tf.shape(lines))
    return tf.strings.strip(tf.tensor_scatter_nd_update(lines, rest[:, None], fixed)), bad


def _split_block(carry, block):
    """Complete documents of `carry + block` lines; the unfinished tail is carried on."""
    carry_lines, carry_bad = carry
    cleaned, bad = clean_lines(block)
    lines = tf.concat([carry_lines, cleaned], 0)
    bad = tf.concat([carry_bad, tf.cast(bad, tf.int32)], 0)
    # Blank in the source (a line of only invalid bytes is a segment, not a separator);
    # carried lines come after the last blank one, so none of them is blank.
    block_blank = tf.equal(tf.strings.strip(block), "")
    blank = tf.concat([tf.zeros_like(carry_bad, tf.bool), block_blank], 0)
    positions = tf.range(tf.size(lines))
    end = tf.reduce_max(tf.where(blank, positions, -1)) + 1  # lines up to the last blank one
    doc_index = tf.cumsum(tf.cast(blank[:end], tf.int32), exclusive=True)
    keep = ~blank[:end]
    rowids = tf.boolean_mask(doc_index, keep)
    nrows = tf.reduce_sum(tf.cast(blank[:end], tf.int32))
    docs = tf.RaggedTensor.from_value_rowids(tf.boolean_mask(lines[:end], keep), rowids, nrows)
    bad_docs = tf.math.unsorted_segment_sum(tf.boolean_mask(bad[:end], keep), rowids, nrows)
    return (lines[end:], bad[end:]), (docs, bad_docs)


# Traced once per process: tf.data traces the functions of every new dataset again, but
# a `tf.function` called inside reuses its own trace (a run builds its pipeline several
# times: the corpus check, training, held-out batches).
_split_block_once = tf.function(_split_block, autograph=False)


def _file_documents(path, block_lines=4096):
    """Documents of one file: each element a 1-D string tensor of its non-blank lines."""
    # A trailing blank line flushes the file's last document.
    lines = tf.data.TextLineDataset(path).concatenate(tf.data.Dataset.from_tensors(tf.constant("")))
    init = (tf.zeros([0], tf.string), tf.zeros([0], tf.int32))
    docs = lines.batch(block_lines).scan(init, without_autograph(lambda c, b: _split_block_once(c, b))).unbatch()
    return docs.filter(without_autograph(lambda doc, bad: tf.size(doc) > 0))


def documents_dataset(files):
    """Streams documents from text files in the original pretraining input format.

    Files are read in sorted order, one after another; a document never spans files.
    Lines are stripped and invalid UTF-8 bytes dropped (counted).

    Args:
        files: str or list of str. Paths or globs (see `resolve_files`). Or a scalar
            string tensor naming one file (e.g. inside a `tf.data` function; not globbed).

    Returns:
        `tf.data.Dataset` of `(lines, invalid_utf8_lines)`: a 1-D string tensor of the
        document's non-blank lines and an int32 count of lines that held invalid UTF-8.

    Examples:
    >>> docs = keras_bert_zoo.data.documents_dataset("corpus.txt")
    >>> [lines.tolist() for lines, invalid_utf8_lines in docs.as_numpy_iterator()][1]
    [b'The sky is blue in the day.', b'The sky is dark at night.', b'We see a bright star.']
    """
    if isinstance(files, tf.Tensor):
        return _file_documents(files)
    paths = resolve_files(files)
    return tf.data.Dataset.from_tensor_slices(paths).flat_map(without_autograph(_file_documents))


def split_sentences(text):
    """Splits a paragraph into sentences by punctuation alone (`data.sentences.split_sentences`
    without the abbreviation rule): after `.`, `!` or `?` (and closing quotes/brackets) followed by
    whitespace and an upper-case letter or digit. Use a real sentence splitter (e.g. NLTK punkt)
    when abbreviations matter.
    """
    return sentences.split_sentences(text, skip_abbreviations=False)


def write_documents(documents, path, sentence_splitter=split_sentences):
    """Writes paragraphs/documents in the input format (one sentence per line).

    Args:
        documents: iterable of str (one document each).
        path: str. Output text file (written atomically).
        sentence_splitter: callable str -> list of str. Defaults to `split_sentences`.

    Returns:
        int: number of documents written.
    """
    tmp, count = f"{path}.tmp{os.getpid()}", 0
    with open(tmp, "w", encoding="utf-8") as f:
        for doc in documents:
            sentences = sentence_splitter(doc)
            if sentences:
                f.write("\n".join(sentences) + "\n\n")
                count += 1
    os.replace(tmp, path)
    return count
