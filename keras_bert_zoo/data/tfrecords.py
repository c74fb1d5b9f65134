"""Pretraining TFRecords: the original feature layout, written fast and read back.

Written features (exactly `create_pretraining_data.py`'s): int64 `input_ids`,
`input_mask`, `segment_ids` (padded to `max_seq_length`), `masked_lm_positions`,
`masked_lm_ids` (padded to `max_predictions_per_seq`), float `masked_lm_weights`
(1.0 real, 0.0 padding), int64 `next_sentence_labels` (1 = random next).
"""

import numpy as np
import tensorflow as tf

from keras_bert_zoo.data.pretraining import to_batch_layout

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
# Our feature → original feature name, in the original's write order.
ORIGINAL_NAMES = (
    ("token_ids", "input_ids"), ("padding_mask", "input_mask"), ("segment_ids", "segment_ids"),
    ("mask_positions", "masked_lm_positions"), ("mlm_ids", "masked_lm_ids"),
    ("mlm_weights", "masked_lm_weights"), ("nsp_labels", "next_sentence_labels"),
)


def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


_SMALL_VARINTS = [_varint(i) for i in range(1 << 14)]


def _len_prefix(n):
    return _SMALL_VARINTS[n] if n < (1 << 14) else _varint(n)


_VARINT_TABLES = {}


def _varint_table(width):
    """All varints of width <= `width` (< 2**21): (bytes (n, width), mask (n, width), sizes (n,))."""
    if width not in _VARINT_TABLES:
        data, valid, sizes = _varint_arith(np.arange(1 << (7 * width), dtype=np.int64)[:, None], width)
        _VARINT_TABLES[width] = (data, valid, sizes.astype(np.uint8))
    return _VARINT_TABLES[width]


def _varint_columns(values, width):
    """Varints of a non-negative int array (rows, k) → (rows, k * width) bytes and validity mask."""
    v = np.asarray(values).reshape(len(values), -1)
    if width > 3:
        return _varint_arith(v.astype(np.int64), width)
    data, valid, sizes = _varint_table(width)
    rows = len(v)
    return (data[v].reshape(rows, -1), valid[v].reshape(rows, -1),
            sizes[v].sum(axis=1, dtype=np.int64))


def _varint_arith(values, width):
    v = np.asarray(values, np.int64).reshape(len(values), -1)
    shifts = np.arange(width, dtype=np.int64) * 7
    nbytes = 1 + (v[..., None] >= (np.int64(1) << shifts[1:])).sum(-1) if width > 1 else np.ones_like(v)
    k = np.arange(width)
    data = ((v[..., None] >> shifts) & 0x7F) | ((k < nbytes[..., None] - 1) * 0x80)
    valid = k < nbytes[..., None]
    return data.astype(np.uint8).reshape(len(v), -1), valid.reshape(len(v), -1), nbytes.sum(axis=1)


def _width(top):
    width = 1
    while top >> (7 * width):
        width += 1
    return width


def _length_prefix(lengths):
    """Per-row varint length prefixes: (bytes, mask, size)."""
    return _varint_columns(lengths[:, None], _width(int(lengths.max())) if len(lengths) else 1)


def serialize_examples(features):
    """Serializes a batch of instances to `tf.train.Example` bytes (original names).

    A hand-written, batch-vectorised protobuf encoder: every record is laid out as a
    padded (rows, bytes) matrix of fields plus a validity mask, and the records are the
    masked bytes in row-major order (no per-record Python work but the final split).
    Tests check it parses with the original spec and matches `tf.train.Example`.

    Args:
        features: dict of NumPy arrays with a leading batch axis: `token_ids`,
            `padding_mask`, `segment_ids`, `mask_positions`, `mlm_ids`, `mlm_weights`,
            `nsp_labels`.

    Returns:
        list of bytes, one serialized Example per row.
    """
    rows = len(np.asarray(features["nsp_labels"]))
    if rows == 0:
        return []
    parts, masks, body = [], [], np.zeros(rows, np.int64)

    def add(data, mask, size):
        parts.append(data)
        masks.append(mask)
        return size

    def const(raw):
        data = np.broadcast_to(np.frombuffer(raw, np.uint8), (rows, len(raw)))
        return add(data, np.ones((rows, len(raw)), bool), np.full(rows, len(raw), np.int64))

    for ours, original in ORIGINAL_NAMES:
        values = np.asarray(features[ours])
        if ours == "mlm_weights":
            data = values.astype("<f4").reshape(rows, -1).view(np.uint8).reshape(rows, -1)
            payload = (data, np.ones(data.shape, bool), np.full(rows, data.shape[1], np.int64))
            tag = b"\x12"
        else:
            v = values.astype(np.int64).reshape(rows, -1)
            if v.size and v.min() < 0:
                raise ValueError(f"Only non-negative ids can be written. Received a minimum of {v.min()}.")
            payload = _varint_columns(v, _width(int(v.max()) if v.size else 0))
            tag = b"\x1a"
        # entry = 0a len(inner) inner; inner = key 12 len(feature) feature;
        # feature = tag len(packed) packed; packed = 0a len(payload) payload.
        key = b"\x0a" + _len_prefix(len(original)) + original.encode()
        n_payload = payload[2]
        p_payload = _length_prefix(n_payload)
        n_packed = 1 + p_payload[2] + n_payload
        p_packed = _length_prefix(n_packed)
        n_feature = 1 + p_packed[2] + n_packed
        p_feature = _length_prefix(n_feature)
        n_inner = len(key) + 1 + p_feature[2] + n_feature
        p_inner = _length_prefix(n_inner)
        const(b"\x0a")
        add(*p_inner)
        const(key + b"\x12")
        add(*p_feature)
        const(tag)
        add(*p_packed)
        const(b"\x0a")
        add(*p_payload)
        add(*payload)
        body += 1 + p_inner[2] + n_inner
    head = _length_prefix(body)
    parts = [np.broadcast_to(np.uint8(0x0a), (rows, 1)), head[0]] + parts
    masks = [np.ones((rows, 1), bool), head[1]] + masks
    flat = np.concatenate(parts, axis=1)[np.concatenate(masks, axis=1)].tobytes()
    ends = np.cumsum(1 + head[2] + body).tolist()
    return [flat[s:e] for s, e in zip([0] + ends[:-1], ends)]


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


def _inspect_first_record(path):
    """Returns {feature name: (kind, length)} of the first record of `path`."""
    for raw in tf.data.TFRecordDataset(path).take(1):
        example = tf.train.Example.FromString(raw.numpy())
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
    >>> ds = keras_bert_zoo.data.tfrecords.read_pretraining_tfrecords("out/*.tfrecord", 32)
    """
    from keras_bert_zoo.data.documents import resolve_files

    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"`batch_size` must be a positive int. Received: batch_size={batch_size!r}.")
    # The writer's reports sit next to the shards; a glob like "out-*" matches them too.
    paths = [p for p in resolve_files(pattern) if not p.endswith((".report.json", ".report.txt"))]
    if not paths:
        raise ValueError(f"`pattern` matches only report files, no TFRecord. Received: pattern={pattern!r}.")
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
