"""WordPiece vocabularies: load and validate `vocab.txt`, learn one from a corpus.

A vocabulary is a list of tokens; a token's id is its index (line number - 1), as in
Google's `vocab.txt` files.
"""

import os

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _decode_lines(data, source):
    """Splits raw bytes into stripped UTF-8 tokens (LF or CRLF), naming bad lines."""
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

    Args:
        path: str or PathLike. The vocabulary file.

    Returns:
        The list of tokens; a token's id is its index.

    Raises:
        ValueError: missing file, invalid UTF-8 (naming the line), empty or duplicate
            token (naming the lines) or missing special tokens (listing them all).

    Examples:
    >>> tokens = keras_bert_zoo.text.load_vocabulary("vocab.txt")
    >>> tokens[:2]
    ['[PAD]', '[unused0]']
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
