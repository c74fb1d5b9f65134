"""In-graph text normalisation matching the original BERT `BasicTokenizer`.

Every function maps a `tf.string` tensor (any shape) to a `tf.string` tensor of the same
shape with plain TensorFlow string ops (RE2 `\\p{..}` classes, ICU lower-casing,
tensorflow-text NFD), so it runs inside `tf.data` and exported graphs.

The steps, in the original's order (../shared/REFERENCE.md, Tokenization):
1. `clean_text`: NUL, U+FFFD and control/format characters (Unicode Cc, Cf except
   tab/newline/carriage return) are dropped; whitespace (tab, LF, CR, Zs) becomes a space.
2. `split_cjk`: spaces around CJK ideographs (the eight blocks below).
3. `lowercase_text`: per-character Unicode lower-casing (ICU full mapping, the same as Python's
   `str.lower`: `İ` -> `i̇`, final sigma) -- *not* NFKC case folding, so `ß`, `…`, `ﬁ` and
   full-width letters stay what the original makes of them.
4. `strip_accent_marks`: NFD, then drop non-spacing marks (Mn).
Splitting on whitespace/punctuation is done by the tokenizer with `WORD_SPLIT_PATTERN`.

Fast path (`prepare_and_normalize`): rows of printable ASCII plus tab/LF/CR (most English
text) are valid UTF-8, hold no control, format, CJK or accented characters and count one
byte per character, so all they need is ASCII lower-casing (tab/LF/CR are whitespace to
the WordPiece op's own splitting, like the space the original turns them into). Only the
other rows go through the full passes above.
"""

import tensorflow as tf
import tensorflow_text as tf_text

# The eight CJK ideograph blocks of the original `_is_chinese_char`.
CJK_CLASS = (
    r"[\x{4E00}-\x{9FFF}\x{3400}-\x{4DBF}\x{20000}-\x{2A6DF}\x{2A700}-\x{2B73F}"
    r"\x{2B740}-\x{2B81F}\x{2B820}-\x{2CEAF}\x{F900}-\x{FAFF}\x{2F800}-\x{2FA1F}]"
)
# Unicode P* plus the ASCII symbol ranges 33-47, 58-64, 91-96, 123-126 (`$`, `+`, `^`, ...).
PUNCTUATION_CLASS = r"[\p{P}\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E]"
# After `clean_text` only spaces and the line/paragraph separators (which Python's
# `str.split()` in the original splits on) remain as whitespace.
WHITESPACE_CLASS = r"[\p{Zs}\p{Zl}\p{Zp}\t\n\r]"
WORD_SPLIT_PATTERN = WHITESPACE_CLASS + "+|" + PUNCTUATION_CLASS
# Rows that need no normalisation but ASCII lower-casing (invalid UTF-8 never matches).
SIMPLE_ASCII_PATTERN = r"[\x20-\x7e\t\n\r]*"


def drop_invalid_utf8(strings):
    """Removes bytes that are not valid UTF-8 (valid strings come back unchanged)."""
    return tf.strings.unicode_transcode(strings, "UTF-8", "UTF-8", errors="ignore")


def invalid_utf8_rows(strings):
    """Returns a bool tensor: True where a string holds invalid UTF-8."""
    return tf.not_equal(drop_invalid_utf8(strings), strings)


def cap_length(strings, max_chars):
    """Keeps the first `max_chars` characters of each string (None: unchanged)."""
    if max_chars is None:
        return strings
    return tf.strings.substr(strings, 0, max_chars, unit="UTF8_CHAR")


def clean_text(strings):
    """Original `_clean_text`: whitespace -> space; drop NUL, U+FFFD, Cc and Cf."""
    # Whitespace first, so tab/LF/CR survive the control-character removal as spaces.
    # (Zs other than the plain space: matching every space would cost a replacement each.)
    strings = tf.strings.regex_replace(strings, r"[\t\n\r]|[^\P{Zs} ]", " ")
    return tf.strings.regex_replace(strings, r"[\x00\x{FFFD}\p{Cc}\p{Cf}]", "")


def split_cjk(strings):
    """Puts a space on both sides of every CJK ideograph."""
    return tf.strings.regex_replace(strings, "(" + CJK_CLASS + ")", r" \1 ")


def lowercase_text(strings):
    """Unicode lower-casing, character by character (no case folding)."""
    return tf.strings.lower(strings, encoding="utf-8")


def strip_accent_marks(strings):
    """NFD, then drop non-spacing combining marks (Unicode Mn)."""
    strings = tf_text.normalize_utf8(strings, "NFD")
    return tf.strings.regex_replace(strings, r"\p{Mn}", "")


def normalize(strings, lowercase=True, strip_accents=None):
    """Runs the original's normalisation (everything but splitting).

    Args:
        strings: `tf.string` tensor of valid UTF-8.
        lowercase: bool. Lower-case (uncased vocabularies). Defaults to True.
        strip_accents: bool or None. NFD + drop Mn. None follows `lowercase`, as the
            original does. Defaults to None.

    Returns:
        A `tf.string` tensor of the same shape.
    """
    strip = lowercase if strip_accents is None else strip_accents
    strings = split_cjk(clean_text(strings))
    if lowercase:
        strings = lowercase_text(strings)
    if strip:
        strings = strip_accent_marks(strings)
    return strings


def simple_ascii_rows(strings):
    """Returns a bool tensor: True where a string is printable ASCII, tab, LF or CR only."""
    return tf.strings.regex_full_match(strings, SIMPLE_ASCII_PATTERN)


def prepare_and_normalize(strings, lowercase=True, strip_accents=None, max_chars=None):
    """Drops invalid UTF-8, caps at `max_chars` characters and normalises, per row.

    The same result as `normalize(cap_length(drop_invalid_utf8(strings), max_chars))`
    except that tab/LF/CR in simple-ASCII rows are kept (the WordPiece op splits on them
    as on a space), but only rows that are not simple ASCII take the expensive passes.

    Args:
        strings: 1-D `tf.string` tensor (may hold invalid UTF-8).
        lowercase, strip_accents: as for `normalize`.
        max_chars: int or None, as for `cap_length`.

    Returns:
        (normalized, simple): the 1-D normalised strings and the bool simple-ASCII mask.
    """
    simple = simple_ascii_rows(strings)
    simple_rows = tf.cast(tf.where(simple)[:, 0], tf.int32)
    other_rows = tf.cast(tf.where(tf.logical_not(simple))[:, 0], tf.int32)
    fast = tf.gather(strings, simple_rows)
    if max_chars is not None:  # one byte per character
        fast = tf.strings.substr(fast, 0, max_chars, unit="BYTE")
    if lowercase:
        fast = tf.strings.lower(fast)  # ASCII lower-casing, the same as ICU's here
    slow = cap_length(drop_invalid_utf8(tf.gather(strings, other_rows)), max_chars)
    slow = normalize(slow, lowercase, strip_accents)
    return tf.dynamic_stitch([simple_rows, other_rows], [fast, slow]), simple
