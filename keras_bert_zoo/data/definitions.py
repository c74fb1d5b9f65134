"""Word-definition pairs from WordNet: a sentence-pair task on real, human-written data.

Each row pairs a word with a gloss (`("bark", "the sound made by a dog")`); the label
is 1 when the gloss is one of the word's own WordNet senses, 0 when it is the gloss of
another word of the same part of speech. Like QNLI it asks whether the second segment
answers the first, and like it a bag of words does not solve it: the word is never
inside its gloss (such senses are left out), so the pair has to be read for meaning,
which is what pretraining on unlabelled text can teach and labels alone hardly can.

The data is WordNet 3.0 as Debian ships it (`wordnet-base`, the Princeton WordNet
license: free use with its copyright notice). The `.deb` is downloaded once, never
installed and never fetched at run time: `make install` runs

    apt-get download wordnet-base   (into <venv>/share/keras_bert_zoo/data)

Splits are disjoint by word (a hash of the word), so no word of the dev or test rows is
seen in training. Words are the common ones (tagged at least `min_tag_count` times in
WordNet's sense-tagged corpus), single lower-case words of letters; each kept sense gives
one positive and one negative row, so a word's label is 50/50 and its identity says
nothing.
"""

import functools
import glob
import io
import lzma
import os
import re
import sys
import tarfile
import zlib

import numpy as np

LABELS = ("other", "defines")  # ids 0 and 1
POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}
SS_TYPE = {"n": 1, "v": 2, "a": 3, "r": 4, "s": 5}
DATA_DIR = os.path.join(sys.prefix, "share", "keras_bert_zoo", "data")
INSTALL = f"cd {DATA_DIR} && apt-get download wordnet-base"
SPLITS = ("train", "dev", "test")


def wordnet_deb(path=None):
    """The `wordnet-base` package file: `path` if given, else the one `make install` downloaded.

    Raises:
        FileNotFoundError: it is not there; the message gives the command that gets it.
    """
    if path is None:
        found = sorted(glob.glob(os.path.join(DATA_DIR, "wordnet-base_*_all.deb")))
        path = found[-1] if found else os.path.join(DATA_DIR, "wordnet-base_<version>_all.deb")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"WordNet (Debian's wordnet-base .deb) is not at {path}. Get it with: {INSTALL}")
    return path


def _ar_members(blob):
    """The members of a Unix `ar` archive (a `.deb` is one): name -> bytes."""
    if not blob.startswith(b"!<arch>\n"):
        raise ValueError("Not a Debian package (no ar header). Download it again with: " + INSTALL)
    members, offset = {}, 8
    while offset + 60 <= len(blob):
        header = blob[offset:offset + 60]
        name, size = header[:16].decode().strip().rstrip("/"), int(header[48:58].decode().strip())
        members[name] = blob[offset + 60:offset + 60 + size]
        offset += 60 + size + (size % 2)
    return members


@functools.lru_cache(maxsize=2)
def read_wordnet(path=None):
    """WordNet's synsets and sense counts from the Debian package.

    Returns:
        `(synsets, counts)`: synsets a tuple of `(pos, offset, lemmas, gloss)` (the gloss
        without its quoted examples), counts a dict `(lemma, ss_type, lex_filenum,
        lex_id) -> tag count` from `cntlist.rev`.
    """
    with open(wordnet_deb(path), "rb") as f:
        members = _ar_members(f.read())
    data = members.get("data.tar.xz")
    if data is None:
        raise ValueError(f"The package holds no data.tar.xz (members {sorted(members)}). Get it again with: {INSTALL}")
    files = {}
    with tarfile.open(fileobj=io.BytesIO(lzma.decompress(data))) as tar:
        for member in tar.getmembers():
            name = os.path.basename(member.name)
            if name in ("data.noun", "data.verb", "data.adj", "data.adv", "cntlist.rev"):
                files[name] = tar.extractfile(member).read().decode("utf-8", errors="replace")
    synsets = []
    for kind in ("noun", "verb", "adj", "adv"):
        for line in files[f"data.{kind}"].splitlines():
            if line.startswith("  ") or "|" not in line:
                continue  # the license header
            head, gloss = line.split("|", 1)
            fields = head.split()
            offset, lex_filenum, pos, count = fields[0], int(fields[1]), fields[2], int(fields[3], 16)
            lemmas = tuple((fields[4 + 2 * i], int(fields[5 + 2 * i], 16)) for i in range(count))
            definition = gloss.split('; "')[0].split(' "')[0].strip().rstrip(";").strip()
            synsets.append((pos, offset, lex_filenum, lemmas, definition))
    counts = {}
    for line in files["cntlist.rev"].splitlines():
        key, _, tag_count = line.split()
        lemma, rest = key.split("%", 1)
        ss_type, lex_filenum, lex_id = rest.split(":")[:3]
        counts[(lemma, int(ss_type), int(lex_filenum), int(lex_id))] = int(tag_count)
    return tuple(synsets), counts


def _names(word, gloss_words):
    """Whether a gloss names the word or a form of it: a gloss word shares a prefix with it as
    long as the shorter of the two less two letters (at least four; all of a shorter word), so
    "walker" is not paired with "a person who walks" nor "contemptuous" with "extreme contempt"."""
    for other in gloss_words:
        shared = len(os.path.commonprefix([word, other]))
        if shared >= min(len(word), max(4, min(len(word), len(other)) - 2)):
            return True
    return False


def _split_of(word, dev_fraction, test_fraction):
    bucket = zlib.crc32(word.encode("utf-8")) % 1000
    if bucket < test_fraction * 1000:
        return "test"
    return "dev" if bucket < (test_fraction + dev_fraction) * 1000 else "train"


def definition_pairs(split, path=None, min_tag_count=2, dev_fraction=0.15, test_fraction=0.15, seed=0):
    """Reads the (word, gloss) pairs of one split.

    Args:
        split: str. "train", "dev" or "test" (disjoint by word).
        path: str or None. The `wordnet-base` `.deb`; None finds the downloaded one.
        min_tag_count: int. Keep senses tagged at least this often in WordNet's
            sense-tagged corpus (common words). Defaults to 2.
        dev_fraction, test_fraction: float. Shares of words in dev and test.
            Defaults to 0.15 each.
        seed: int. Draws the negatives' glosses. Defaults to 0.

    Returns:
        `((words, glosses), labels)`: two lists of strings and int32 labels (1: the gloss
        defines the word), one positive and one negative row per kept sense, in a fixed
        shuffled order.
    """
    if split not in SPLITS:
        raise ValueError(f"`split` must be one of {SPLITS}. Received: split={split!r}.")
    synsets, counts = read_wordnet(path)
    by_pos, rows = {}, []
    for pos, _, lex_filenum, lemmas, gloss in synsets:
        gloss_words = set(re.findall(r"[a-z]+", gloss.lower()))
        names = {lemma.lower() for lemma, _ in lemmas}
        by_pos.setdefault(SS_TYPE[pos], []).append((gloss, gloss_words, names))
        for lemma, lex_id in lemmas:
            word = lemma.lower()
            if not re.fullmatch(r"[a-z]{2,}", word) or _split_of(word, dev_fraction, test_fraction) != split:
                continue
            if counts.get((word, SS_TYPE[pos], lex_filenum, lex_id), 0) < min_tag_count:
                continue
            if _names(word, gloss_words):
                continue  # the word (or its stem) in its own gloss: string matching would do
            rows.append((word, gloss, SS_TYPE[pos]))
    rng = np.random.default_rng(seed)
    words, glosses, labels = [], [], []
    for word, gloss, ss_type in rows:
        pool = by_pos[ss_type]
        while True:  # another word's gloss (same part of speech) that does not name this word
            other, other_words, other_names = pool[rng.integers(len(pool))]
            if word not in other_names and not _names(word, other_words):
                break
        words += [word, word]
        glosses += [gloss, other]
        labels += [1, 0]
    order = rng.permutation(len(words))
    return ([words[i] for i in order], [glosses[i] for i in order]), np.asarray(labels, "int32")[order]
