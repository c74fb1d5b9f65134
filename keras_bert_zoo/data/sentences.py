"""A rule-based English sentence splitter, for corpora whose documents are texts.

The original input format is one sentence per line; `split_sentences` turns a text
into those lines (used by `data.documents.write_documents` and `data.wikipedia`).
"""

import re

# Sentence boundary candidates: terminal punctuation, optional closing quotes or
# brackets, whitespace, then something that can start a sentence.
_BOUNDARY = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9])")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al approx ca c no nos vol "
    "fig figs gen col lt sgt capt maj rev hon gov pres inc ltd co corp dept est jan "
    "feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n op ed eds pp p".split()
)


def split_sentences(text, skip_abbreviations=True):
    """Splits a paragraph of English prose into sentences.

    A rule-based splitter: a boundary is `.`, `!` or `?` (plus closing quotes or
    brackets) followed by whitespace and an upper-case letter, digit or opening
    quote, unless the word before the period is a known abbreviation or an initial.

    Args:
        text: str. One paragraph of plain text.
        skip_abbreviations: bool. Don't break after a known abbreviation (`Dr.`) or an
            initial (`J.`). Defaults to True.

    Returns:
        list of str. The sentences, stripped, in order; empty ones are dropped.

    Examples:
    >>> split_sentences("Dr. Smith came home. He slept.")
    ['Dr. Smith came home.', 'He slept.']
    """
    if not isinstance(text, str):
        raise ValueError(
            f"`text` must be a str (one paragraph of prose). Received: text={text!r} of type {type(text).__name__}."
        )
    sentences, start = [], 0
    for match in _BOUNDARY.finditer(text):
        if skip_abbreviations and text[match.start()] == "." and _is_abbreviation(text, match.start()):
            continue
        sentence = text[start : match.end()].strip()
        if sentence:
            sentences.append(sentence)
        start = match.end()
    tail = text[start:].strip()
    if tail:
        sentences.append(tail)
    return sentences


def _is_abbreviation(text, period_index):
    word = text[:period_index].rsplit(None, 1)[-1] if text[:period_index].strip() else ""
    word = word.lstrip("(\"'[").lower()
    # A single letter is an initial ("J. R. R. Tolkien"), a dotted word an acronym.
    return len(word) == 1 and word.isalpha() or word in _ABBREVIATIONS
