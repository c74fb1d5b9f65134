"""A generated corpus, vocabulary and tokenizer for the pretraining-data tests."""

import os

import numpy as np
import tensorflow as tf

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
STEMS = [
    "walk", "talk", "jump", "read", "cook", "play", "paint", "sing", "fish", "dream",
    "cat", "dog", "tree", "house", "river", "stone", "cloud", "apple", "book", "road",
    "red", "big", "old", "new", "quiet", "fast", "slow", "warm", "cold", "dark",
    "the", "a", "and", "of", "to", "in", "on", "with", "by", "from",
]
SUFFIXES = ["##s", "##ing", "##ed", "##er"]


def vocabulary():
    return SPECIALS + STEMS + SUFFIXES + [",", "."]


def write_vocab(directory):
    path = os.path.join(str(directory), "vocab.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocabulary()) + "\n")
    return path


def make_sentence(rng):
    words = []
    for _ in range(rng.integers(3, 16)):
        stem = STEMS[rng.integers(len(STEMS))]
        r = rng.random()
        words.append(stem + SUFFIXES[rng.integers(len(SUFFIXES))][2:] if r < 0.3 else ("zzq" if r < 0.32 else stem))
    return " ".join(words) + "."


def write_corpus(directory, num_sentences=3000, shards=2, seed=0, name="corpus"):
    """Writes `shards` files, documents of 1–24 sentences; returns the paths."""
    rng = np.random.default_rng(seed)
    paths, per_shard = [], num_sentences // shards
    for s in range(shards):
        path = os.path.join(str(directory), f"{name}-{s:02d}.txt")
        lines, written = [], 0
        while written < per_shard:
            n = min(int(rng.integers(1, 25)), per_shard - written)
            lines.extend(make_sentence(rng) for _ in range(n))
            lines.append("")
            written += n
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        paths.append(path)
    return paths


class SimpleTokenizer:
    """Stand-in tokenizer (tensorflow_text WordPiece) used when the real one is absent."""

    def __init__(self, vocab_path):
        import tensorflow_text as tf_text

        self._vocab = vocabulary()
        self._tok = tf_text.BertTokenizer(vocab_path, lower_case=True, token_out_type=tf.int32)

    def __call__(self, strings):
        return self._tok.tokenize(strings).merge_dims(-2, -1)

    def get_vocabulary(self):
        return list(self._vocab)


def make_tokenizer(vocab_path):
    try:
        from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

        return BertTokenizer(vocab_path, lowercase=True)
    except Exception:  # the text engineer's tokenizer not importable yet
        return SimpleTokenizer(vocab_path)
