"""WordPiece vocabularies: load and validate `vocab.txt`, learn one from a corpus.

A vocabulary is a list of tokens; a token's id is its index (line number - 1), as in
Google's `vocab.txt` files.
"""

import collections
import os
import warnings

import tensorflow as tf
import tensorflow_text as tf_text
from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as learner

from keras_bert_zoo.text import normalize as norm

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _decode_lines(data, source):
    """Splits raw bytes into stripped UTF-8 tokens (LF or CRLF), naming bad lines."""
    # A UTF-8 byte-order mark (Windows editors write one) marks the encoding; it is not
    # part of the first token ("[PAD]" would otherwise be missing).
    data = data.removeprefix(b"\xef\xbb\xbf")
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()  # the final newline ends the last line; it adds no token
    tokens = []
    for number, raw in enumerate(lines, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(
                f"The vocabulary {source} is not valid UTF-8 at line {number} "
                f"(byte {e.start} of that line: {raw[e.start:e.start + 4]!r}). "
                "Re-save the file as UTF-8."
            ) from None
        # The original strips every line (CRLF endings give the same tokens as LF).
        tokens.append(text.strip())
    return tokens


def validate_vocabulary(tokens, source="list"):
    """Checks a token list: no empty or duplicate token, all special tokens present.

    Args:
        tokens: list of str.
        source: str. Where the tokens came from, for error messages.

    Raises:
        ValueError: naming the empty line, the duplicate token and both line numbers,
            or listing every missing special token.
    """
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise ValueError(
            "`vocabulary` must be a path to vocab.txt or a list of str. "
            f"Received: vocabulary of type {type(tokens).__name__}."
        )
    first_line = {}
    for number, token in enumerate(tokens, start=1):
        if not token:
            raise ValueError(
                f"The vocabulary {source} has an empty token at line {number}. "
                "Remove the blank line (ids would shift) or restore the token."
            )
        if token in first_line:
            raise ValueError(
                f"The vocabulary {source} has the duplicate token {token!r} at lines "
                f"{first_line[token]} and {number}. Each token must appear once."
            )
        first_line[token] = number
    missing = [t for t in SPECIAL_TOKENS if t not in first_line]
    if missing:
        raise ValueError(
            f"The vocabulary {source} lacks the special tokens {missing}. BERT needs "
            f"all of {list(SPECIAL_TOKENS)}; add them (Google's files put [PAD] on line 1)."
        )
    return list(tokens)


def load_vocabulary(path):
    """Loads and validates a `vocab.txt` (one token per line, UTF-8, LF or CRLF).

    A leading UTF-8 byte-order mark is ignored.

    Args:
        path: str or PathLike. The vocabulary file.

    Returns:
        The list of tokens; a token's id is its index.

    Raises:
        ValueError: missing file, invalid UTF-8 (naming the line), empty or duplicate
            token (naming the lines) or missing special tokens (listing them all).

    Examples:
    >>> tokens = keras_bert_zoo.load_vocabulary("vocab.txt")
    >>> tokens[:6]
    ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]', '.']
    """
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise ValueError(
            f"`path` must be an existing vocab.txt file. Received: path={path!r}."
        )
    with open(path, "rb") as f:
        data = f.read()
    return validate_vocabulary(_decode_lines(data, repr(os.fspath(path))), repr(os.fspath(path)))


def save_vocabulary(tokens, path):
    """Writes tokens one per line (UTF-8, LF) atomically (temp file, then rename)."""
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(token + "\n" for token in tokens))
    os.replace(tmp, path)
    return path


def warn_on_case_mismatch(tokens, lowercase):
    """Warns like the original `validate_case_matches_checkpoint` on a casing mismatch."""
    words = [t for t in tokens if not (t.startswith("[") and t.endswith("]"))]
    upper = sum(1 for t in words if any(map(str.isupper, t)))
    if lowercase and upper > max(2, 0.005 * len(words)):
        warnings.warn(
            f"The vocabulary looks cased ({upper} tokens hold upper-case letters) but "
            "lowercase=True: those tokens can never be produced. Pass lowercase=False for "
            "a cased vocabulary.",
            stacklevel=4,
        )
    elif not lowercase and upper == 0 and len(words) > 0:
        warnings.warn(
            "The vocabulary looks uncased (no token holds an upper-case letter) but "
            "lowercase=False: capitalised words will split badly or become [UNK]. Pass "
            "lowercase=True for an uncased vocabulary.",
            stacklevel=4,
        )


def google_reserved_tokens(num_unused=99):
    """Specials as in Google's files: [PAD], [unused0..n-1], [UNK], [CLS], [SEP], [MASK].

    With the default 99 unused slots the specials get Google's ids: [PAD]=0, [UNK]=100,
    [CLS]=101, [SEP]=102, [MASK]=103.
    """
    if not isinstance(num_unused, int) or num_unused < 0:
        raise ValueError(f"`num_unused` must be an int >= 0. Received: num_unused={num_unused!r}.")
    return ["[PAD]"] + [f"[unused{i}]" for i in range(num_unused)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _text_batches(dataset_or_files, batch_size):
    """Yields batches of raw lines (bytes) from files, a list of strings or a dataset."""
    if isinstance(dataset_or_files, tf.data.Dataset):
        dataset = dataset_or_files
    elif isinstance(dataset_or_files, (str, os.PathLike)):
        dataset = tf.data.TextLineDataset([os.fspath(dataset_or_files)])
    elif isinstance(dataset_or_files, (list, tuple)) and all(
        isinstance(f, (str, os.PathLike)) and os.path.isfile(f) for f in dataset_or_files
    ) and dataset_or_files:
        dataset = tf.data.TextLineDataset([os.fspath(f) for f in dataset_or_files])
    elif isinstance(dataset_or_files, (list, tuple)):
        dataset = tf.data.Dataset.from_tensor_slices(list(dataset_or_files) or [""])
    else:
        raise ValueError(
            "`dataset_or_files` must be a text file path, a list of paths, a list of strings "
            f"or a tf.data.Dataset of strings. Received: {type(dataset_or_files).__name__}."
        )
    if dataset.element_spec.shape.rank == 0:
        dataset = dataset.batch(batch_size)
    return dataset


def count_words(dataset_or_files, lowercase=True, strip_accents=None, batch_size=1024, progress=None):
    """Counts the original tokenizer's words (normalised, split on whitespace/punctuation).

    Args:
        dataset_or_files: text file path(s), a list of strings or a dataset of strings.
        lowercase: bool. Defaults to True.
        strip_accents: bool or None. Defaults to None (follow `lowercase`).
        batch_size: int. Lines per batch. Defaults to 1024.
        progress: callable(num_lines) or None, called after each batch.

    Returns:
        `collections.Counter` of str words.
    """
    def split(lines):
        lines = norm.drop_invalid_utf8(lines)
        normalized = norm.normalize(lines, lowercase, strip_accents)
        return tf_text.regex_split(normalized, norm.WORD_SPLIT_PATTERN, norm.PUNCTUATION_CLASS).flat_values

    counts = collections.Counter()
    dataset = _text_batches(dataset_or_files, batch_size)
    for lines, words in dataset.map(lambda x: (tf.size(x), split(x))).prefetch(2):
        counts.update(words.numpy().tolist())
        if progress is not None:
            progress(int(lines))
    return collections.Counter({w.decode("utf-8"): c for w, c in counts.items()})


def _learn_with_tokenizers(counts, vocabulary_size, reserved, min_count):
    """HF `tokenizers`' WordPiece trainer (Rust) over pre-normalised word counts."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers  # lazy: HF tokenizers is optional (only this learner needs it)

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocabulary_size,
        min_frequency=min_count,
        special_tokens=reserved,
        continuing_subword_prefix="##",
        limit_alphabet=1000,
        show_progress=False,
    )

    def lines(chunk=1000):
        words = list(counts.items())
        for start in range(0, len(words), chunk):
            # Each word repeated by its count, so the trainer sees the true frequencies.
            yield " ".join(" ".join([w] * c) for w, c in words[start : start + chunk])

    tokenizer.train_from_iterator(lines(), trainer=trainer)
    vocab = tokenizer.get_vocab()
    return sorted(vocab, key=vocab.get)


def _learn_with_tensorflow_text(counts, vocabulary_size, reserved, min_count):
    """tensorflow-text's WordPiece learner (pure Python; minutes for a few MB)."""
    return learner.learn(
        counts.items(),
        vocab_size=vocabulary_size,
        reserved_tokens=reserved,
        lower_thresh=min_count,
        max_token_length=50,
        max_unique_chars=1000,
    )


def learn_vocabulary(
    dataset_or_files,
    vocabulary_size,
    lowercase=True,
    strip_accents=None,
    num_unused=99,
    min_count=2,
    algorithm="auto",
    progress=None,
):
    """Learns a WordPiece vocabulary laid out like Google's `vocab.txt`.

    Words are counted with the original tokenizer's normalisation and splitting (so the
    vocabulary fits `BertTokenizer`); then a WordPiece learner picks the pieces: HF
    `tokenizers`' `WordPieceTrainer` (Rust, seconds for a few MB) when installed, else
    tensorflow-text's learner (the algorithm of `bert_vocab_from_dataset`; pure Python,
    minutes for a few MB).

    Args:
        dataset_or_files: text file path(s), a list of strings or a `tf.data.Dataset`
            of strings.
        vocabulary_size: int. Target size, specials included (at most this many with
            "tokenizers"; within 5% below with "tensorflow_text").
        lowercase: bool. Learn an uncased vocabulary. Defaults to True.
        strip_accents: bool or None. Defaults to None (follow `lowercase`).
        num_unused: int. `[unusedN]` slots before [UNK]. Defaults to 99 (Google's ids).
        min_count: int. Rarest word/piece count considered. Defaults to 2.
        algorithm: "auto", "tokenizers" or "tensorflow_text". Defaults to "auto".
        progress: callable(num_lines) or None, called while counting.

    Returns:
        list of str: the vocabulary (id = index), specials first as in Google's files.

    Examples:
    >>> tokens = keras_bert_zoo.learn_vocabulary(["corpus.txt"], 60, num_unused=0, min_count=1)
    >>> keras_bert_zoo.save_vocabulary(tokens, "learned_vocab.txt")
    'learned_vocab.txt'
    >>> len(tokens), tokens[:5]
    (60, ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'])
    """
    reserved = google_reserved_tokens(num_unused)
    if not isinstance(vocabulary_size, int) or vocabulary_size <= len(reserved):
        raise ValueError(
            f"`vocabulary_size` must be an int > {len(reserved)} (the special tokens). "
            f"Received: vocabulary_size={vocabulary_size!r}."
        )
    if algorithm not in ("auto", "tokenizers", "tensorflow_text"):
        raise ValueError(
            "`algorithm` must be 'auto', 'tokenizers' or 'tensorflow_text'. "
            f"Received: algorithm={algorithm!r}."
        )
    if algorithm == "auto":
        try:
            import tokenizers  # noqa: F401, lazy: only probes whether the optional package is installed

            algorithm = "tokenizers"
        except ImportError:
            algorithm = "tensorflow_text"
    counts = count_words(dataset_or_files, lowercase, strip_accents, progress=progress)
    if not counts:
        raise ValueError("`dataset_or_files` holds no words: nothing to learn a vocabulary from.")
    learn = _learn_with_tokenizers if algorithm == "tokenizers" else _learn_with_tensorflow_text
    learned = learn(counts, vocabulary_size, reserved, min_count)
    tokens = reserved + [t for t in learned if t and t not in set(reserved)]
    return validate_vocabulary(tokens)
