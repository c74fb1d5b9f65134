"""Tagging schemes (IOB2/BIO, IOB1, IOBES): chunks as conlleval reads them, checks, conversion.

A tag is `O` or `<prefix>-<type>` with prefix `B`, `I`, `E` or `S`. `tag_chunks` reads any
of the schemes the way the CoNLL `conlleval` script (and `seqeval`'s default mode) does,
so IOB1 (`I-` opens a chunk after `O` or another type), IOB2 and IOBES tags all give their
entities; `to_iob2` writes those chunks back as IOB2 (`B-` opens every chunk), the scheme
the token classifier is trained and decoded in. `scheme_errors` lists the tags a strict
reading of one scheme forbids (an `I-` after `O` in IOB2, say).
"""

SCHEMES = ("iob2", "iob1", "iobes")
_ALIASES = {"bio": "iob2", "iob2": "iob2", "iob1": "iob1", "iobes": "iobes", "bioes": "iobes"}


def normalize_scheme(scheme):
    """"BIO"/"IOB2"/"IOB1"/"IOBES"/"BIOES" (any case) -> "iob2", "iob1" or "iobes"."""
    key = str(scheme).lower()
    if key not in _ALIASES:
        raise ValueError(
            f"`scheme` must be one of BIO/IOB2, IOB1, IOBES (or 'auto' where allowed). "
            f"Received: scheme={scheme!r}."
        )
    return _ALIASES[key]


def split_tag(tag):
    """`"B-PER"` -> `("B", "PER")`; `"O"` -> `("O", "")`; other forms raise ValueError."""
    if tag == "O":
        return "O", ""
    prefix, dash, kind = tag.partition("-")
    if not dash or prefix not in ("B", "I", "E", "S") or not kind:
        raise ValueError(
            f"A tag must be 'O' or B-/I-/E-/S- followed by a type (e.g. 'B-PER'). Received: {tag!r}."
        )
    return prefix, kind


def chunk_starts(prev, cur):
    """True if a chunk starts at `cur` after `prev` (conlleval's rule).

    Args:
        prev, cur: `(prefix, type)` pairs from `split_tag` (`("O", "")` for O).
    """
    (pp, pt), (cp, ct) = prev, cur
    if cp == "O":
        return False
    if cp in ("B", "S") or pp in ("O", "E", "S"):
        return True
    return pt != ct


def chunk_ends(prev, cur):
    """True if a chunk ends at `prev`, before `cur` (conlleval's rule; see `chunk_starts`)."""
    (pp, pt), (cp, ct) = prev, cur
    if pp == "O":
        return False
    if pp in ("E", "S") or cp in ("B", "S", "O"):
        return True
    return pt != ct



def tag_chunks(tags):
    """Chunks of a tag sequence as conlleval counts them.

    Args:
        tags: list of str, one sentence (any of IOB1, IOB2, IOBES).

    Returns:
        list of `(type, start, end)` with `end` exclusive, in order.
    """
    chunks = []
    prev = ("O", "")
    start = None
    for i, tag in enumerate(list(tags) + ["O"]):
        cur = split_tag(tag)
        if start is not None and chunk_ends(prev, cur):
            chunks.append((prev[1], start, i))
            start = None
        if chunk_starts(prev, cur):
            start = i
        prev = cur
    return chunks


def to_iob2(tags):
    """Any scheme's tags -> IOB2 tags with the same chunks (as conlleval reads them)."""
    out = ["O"] * len(tags)
    for kind, start, end in tag_chunks(tags):
        out[start] = f"B-{kind}"
        for i in range(start + 1, end):
            out[i] = f"I-{kind}"
    return out


def scheme_errors(tags, scheme):
    """Positions whose tag a strict reading of `scheme` forbids, with the reason.

    IOB2: an `I-X` must follow `B-X` or `I-X`. IOBES: `B-X`/`I-X` must be followed by
    `I-X`/`E-X`, and `I-X`/`E-X` must follow `B-X`/`I-X`. `E-`/`S-` tags are errors in
    IOB1/IOB2. IOB1 proper uses `B-X` only right after a chunk of type X, but a `B-`
    elsewhere opens a chunk all the same, so IOB1 accepts it.

    Returns:
        list of `(index, message)`.
    """
    scheme = normalize_scheme(scheme)
    parts = [split_tag(t) for t in tags]
    errors = []
    for i, (prefix, kind) in enumerate(parts):
        prev = parts[i - 1] if i else ("O", "")
        nxt = parts[i + 1] if i + 1 < len(parts) else ("O", "")
        continues = prev[0] in ("B", "I") and prev[1] == kind
        if scheme != "iobes" and prefix in ("E", "S"):
            errors.append((i, f"{tags[i]!r} is an IOBES tag, not {scheme.upper()}"))
        elif scheme == "iob2" and prefix == "I" and not continues:
            errors.append((i, f"{tags[i]!r} after {(tags[i - 1] if i else 'the sentence start')!r} (IOB2 opens chunks with B-)"))
        elif scheme == "iobes" and prefix in ("I", "E") and not continues:
            errors.append((i, f"{tags[i]!r} does not continue a chunk (IOBES)"))
        elif scheme == "iobes" and prefix in ("B", "I") and not (nxt[0] in ("I", "E") and nxt[1] == kind):
            errors.append((i, f"{tags[i]!r} is not followed by I-/E-{kind} (IOBES)"))
    return errors


def detect_scheme(sentences_tags):
    """Guesses the scheme of a corpus: IOBES if any E-/S- tag, IOB1 if any chunk opens with I-, else IOB2."""
    prefixes = set()
    iob1 = False
    for tags in sentences_tags:
        prev = ("O", "")
        for tag in tags:
            cur = split_tag(tag)
            prefixes.add(cur[0])
            if cur[0] == "I" and not (prev[0] in ("B", "I") and prev[1] == cur[1]):
                iob1 = True
            prev = cur
    if prefixes & {"E", "S"}:
        return "iobes"
    return "iob1" if iob1 else "iob2"
