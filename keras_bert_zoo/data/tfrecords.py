"""Pretraining TFRecords: the original feature layout, encoded in graph and read back.

Written features (exactly `create_pretraining_data.py`'s): int64 `input_ids`,
`input_mask`, `segment_ids` (padded to `max_seq_length`), `masked_lm_positions`,
`masked_lm_ids` (padded to `max_predictions_per_seq`), float `masked_lm_weights`
(1.0 real, 0.0 padding), int64 `next_sentence_labels` (1 = random next).
"""

import mmap
import os
import struct

import numpy as np
import tensorflow as tf

from keras_bert_zoo.data.documents import resolve_files
from keras_bert_zoo.data.example_encoder import encode_examples
from keras_bert_zoo.data.pretraining import to_batch_layout

_LENGTH = struct.Struct("<Q")  # a TFRecord's little-endian uint64 record length

# Shared-layout name → accepted names (ours, the original's, Model Garden's).
FEATURE_ALIASES = {
    "token_ids": ("token_ids", "input_ids", "input_word_ids"),
    "segment_ids": ("segment_ids", "input_type_ids"),
    "padding_mask": ("padding_mask", "input_mask"),
    "mask_positions": ("mask_positions", "masked_lm_positions"),
    "mlm_ids": ("mlm_ids", "masked_lm_ids"),
    "mlm_weights": ("mlm_weights", "masked_lm_weights"),
    "nsp_labels": ("nsp_labels", "next_sentence_labels"),
}


def serialize_examples(features):
    """`encode_examples` of NumPy arrays or tensors (eager): a list of bytes, one per row."""
    tensors = {k: tf.convert_to_tensor(np.asarray(v)) for k, v in features.items()}
    return encode_examples(tensors).numpy().tolist()


def original_feature_spec(max_seq_length, max_predictions_per_seq):
    """The feature spec of the original `run_pretraining.py` input_fn."""
    s, p = max_seq_length, max_predictions_per_seq
    return {
        "input_ids": tf.io.FixedLenFeature([s], tf.int64),
        "input_mask": tf.io.FixedLenFeature([s], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([s], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([p], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([p], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([p], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def check_tfrecord_complete(path):
    """Raises ValueError naming `path` if its last record is cut short.

    A TFRecord is a chain of `length (8 bytes) | crc (4) | data | crc (4)`; walking the
    lengths (~2 µs a record; the records are not parsed) finds a copy or a writer that was cut short,
    which TensorFlow would report mid-training as "truncated record at N" without a file name.
    """
    size = os.path.getsize(path)
    offset = 0
    if size:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            while offset + 8 <= size:
                offset += 16 + _LENGTH.unpack_from(mm, offset)[0]
    if offset != size:
        raise ValueError(
            f"The TFRecord file {path} is truncated or not a TFRecord file: its records end at byte "
            f"{offset:,} but the file has {size:,} bytes. Re-create or copy it again, or leave it "
            "out of `pattern`."
        )


def _inspect_first_record(path):
    """Returns {feature name: (kind, length)} of the first record of `path`."""
    try:
        records = [raw.numpy() for raw in tf.data.TFRecordDataset(path).take(1)]
    except tf.errors.OpError as e:
        raise ValueError(f"The TFRecord file {path} cannot be read: {e.message}") from e
    for raw in records:
        try:
            example = tf.train.Example.FromString(raw)
        except Exception as e:  # protobuf's DecodeError, whose module differs by backend
            raise ValueError(f"The first record of {path} is not a tf.train.Example ({e}).") from e
        out = {}
        for name, feature in example.features.feature.items():
            kind = feature.WhichOneof("kind")
            out[name] = (kind, len(getattr(feature, kind).value))
        return out
    return None


def _spec_from_names(found, path):
    spec, names = {}, {}
    for ours, aliases in FEATURE_ALIASES.items():
        name = next((a for a in aliases if a in found), None)
        if name is None:
            raise ValueError(
                f"The TFRecord {path} has no feature for `{ours}` (accepted names: {list(aliases)}). "
                f"Its features are: {sorted(found)}."
            )
        kind, length = found[name]
        dtype = tf.float32 if kind == "float_list" else tf.int64
        spec[name] = tf.io.FixedLenFeature([length], dtype)
        names[ours] = name
    return spec, names


def read_pretraining_tfrecords(pattern, batch_size, shuffle=False, seed=12345, num_epochs=1, drop_remainder=True):
    """Reads pretraining TFRecords into the shared `(x, y)` batch layout.

    Accepts the original names (`input_ids`, `input_mask`, `masked_lm_*`,
    `next_sentence_labels`), Model Garden's (`input_word_ids`, `input_type_ids`) and ours
    (`token_ids`, `padding_mask`, …); lengths are read from the first record.

    Args:
        pattern: str or list of str. TFRecord files or globs.
        batch_size: int.
        shuffle: bool. Shuffle files and records (seeded). Defaults to False.
        seed: int. Defaults to 12345.
        num_epochs: int or None (forever). Defaults to 1.
        drop_remainder: bool. Defaults to True.

    Returns:
        `tf.data.Dataset` of `(x, y)` as `pretraining_dataset` yields.

    Examples:
    >>> tokenizer = keras_bert_zoo.BertTokenizer("vocab.txt")
    >>> report = keras_bert_zoo.data.write_pretraining_tfrecords(
    ...     "corpus.txt", "out/train.tfrecord", tokenizer, max_seq_length=16, max_predictions_per_seq=3)
    >>> ds = keras_bert_zoo.data.read_pretraining_tfrecords("out/*.tfrecord", 2)
    >>> x, y = next(iter(ds))
    >>> tuple(x["token_ids"].shape), tuple(y["mlm_ids"].shape)
    ((2, 16), (2, 3))
    """
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int. Received: batch_size={batch_size!r}.")
    # The writer's reports sit next to the shards; a glob like "out-*" matches them too.
    paths = [p for p in resolve_files(pattern) if not p.endswith((".report.json", ".report.txt"))]
    if not paths:
        raise ValueError(f"`pattern` matches only report files, no TFRecord. Received: pattern={pattern!r}.")
    for path in paths:
        if os.path.isfile(path):  # local files; remote ones (gs://) are read by TensorFlow only
            check_tfrecord_complete(path)
    found = None
    for path in paths:
        found = _inspect_first_record(path)
        if found is not None:
            break
    if found is None:
        raise ValueError(f"The TFRecord files {paths} hold no record.")
    spec, names = _spec_from_names(found, path)
    ds = tf.data.Dataset.from_tensor_slices(paths)
    if shuffle:
        ds = ds.shuffle(len(paths), seed=seed)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(4, len(paths)), num_parallel_calls=1,
                       deterministic=True)
    if shuffle:
        ds = ds.shuffle(10000, seed=seed)
    ds = ds.repeat(num_epochs) if num_epochs != 1 else ds

    def parse(records):
        parsed = tf.io.parse_example(records, spec)
        out = {}
        for ours, name in names.items():
            value = parsed[name]
            out[ours] = value if ours == "mlm_weights" else tf.cast(value, tf.int32)
        out["nsp_labels"] = tf.reshape(out["nsp_labels"], [-1])
        return to_batch_layout(out)

    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    return ds.map(parse, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True).prefetch(2)
