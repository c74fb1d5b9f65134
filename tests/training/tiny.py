"""Tiny pretraining models and synthetic shared-contract batches for the training tests."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

VOCAB, SEQ, PRED = 40, 16, 4
TINY = dict(vocabulary_size=VOCAB, num_layers=2, num_heads=2, hidden_dim=16,
            intermediate_dim=32, max_sequence_length=SEQ, dropout=0.1)


def make_pretrainer(seed=0, dtype=None, dropout=0.1, optimizer=None):
    """A compiled tiny pretrainer, built deterministically from `seed`."""
    keras.utils.set_random_seed(seed)
    backbone = BertBackbone(**dict(TINY, dropout=dropout), dtype=dtype)
    model = BertPretrainer(backbone)
    if optimizer is None:
        from keras_bert_zoo.training.optimizer import BertAdamW

        optimizer = BertAdamW(learning_rate=1e-2)
    model.compile(optimizer=optimizer)
    return model


def synthetic_batch_fn(seed=7):
    """Maps an example index to one shared-contract example, statelessly."""

    def example(index):
        s = tf.stack([tf.constant(seed, tf.int64), tf.cast(index, tf.int64)])
        ids = tf.random.stateless_uniform((SEQ,), s, 5, VOCAB, dtype=tf.int32)
        length = tf.random.stateless_uniform((), s + 1, SEQ // 2, SEQ + 1, dtype=tf.int32)
        mask = tf.cast(tf.range(SEQ) < length, tf.int32)
        positions = tf.random.stateless_uniform((PRED,), s + 2, 1, SEQ // 2, dtype=tf.int32)
        x = {"token_ids": ids * mask, "segment_ids": tf.cast(tf.range(SEQ) >= length // 2, tf.int32) * mask,
             "padding_mask": mask, "mask_positions": positions}
        y = {"mlm_ids": tf.gather(ids, positions),
             "mlm_weights": tf.cast(tf.range(PRED) < PRED - 1, tf.float32),
             "nsp_labels": tf.cast(index % 2, tf.int32)}
        return x, y, tf.cast(index, tf.int64)

    return example


def synthetic_dataset(batch_size, seed=7, with_ids=False, shard=(0, 1)):
    """An endless, seeded, shuffled dataset of shared-contract batches (stateless ops only)."""
    ds = tf.data.Dataset.range(10**9).shard(shard[1], shard[0])
    # A seeded shuffle: its buffer is part of the iterator state a checkpoint saves.
    ds = ds.shuffle(32, seed=seed)
    ds = ds.map(synthetic_batch_fn(seed))
    if not with_ids:
        ds = ds.map(lambda x, y, i: (x, y))
    return ds.batch(batch_size, drop_remainder=True).prefetch(2)


def numpy_weights(model):
    return [np.array(v) for v in model.weights]


WORDS = ["the", "cat", "dog", "sat", "on", "mat", "a", "big", "small", "red", "ran", "home"]
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_text_corpus(directory):
    """30 documents of 2–4 sentences of `WORDS` and their vocab.txt; returns the two paths."""
    rng = np.random.default_rng(0)
    lines = []
    for _ in range(30):  # documents
        for _ in range(int(rng.integers(2, 5))):
            lines.append(" ".join(rng.choice(WORDS, int(rng.integers(3, 8)))) + " .")
        lines.append("")
    text = directory / "corpus.txt"
    text.write_text("\n".join(lines) + "\n")
    vocab = directory / "vocab.txt"
    vocab.write_text("\n".join(SPECIALS + WORDS + ["."]) + "\n")
    return str(text), str(vocab)


def write_placeholder_vocab(path):
    """A vocab.txt of the specials and `VOCAB - 5` placeholder words (for TFRecord input)."""
    path.write_text("\n".join(SPECIALS + [f"w{i}" for i in range(VOCAB - len(SPECIALS))]) + "\n")
    return str(path)


def write_tfrecord(path, features):
    """Writes a dict of (N, ...) arrays in the shared layout as original-format TFRecords."""
    from keras_bert_zoo.data.tfrecords import serialize_examples

    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in serialize_examples(features):
            writer.write(record)
    return str(path)
