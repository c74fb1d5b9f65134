"""`tf.train.Example` bytes of pretraining instances, encoded in graph.

Two encoders give the same bytes (what protobuf writes for an `Example` built in the
original's feature order):

- `_encode_nested`: general. Nested `tf.io.encode_proto` calls (`Int64List`/`FloatList`
  → `Feature` → `FeatureEntry` → `Features` → `Example`): 23 string-producing ops per row.
- `_encode_flat`: one `encode_proto` call per batch. Every byte of an Example is a tag,
  a length, a key character (< 128), a packed varint or a float byte. Read as a stream of
  varints, an Example body is therefore an `Int64List`'s packed values, once the lengths
  (computed here with integer ops) are spliced in, and the encoder writes
  `0A <length> <varints>`, which is the Example itself. Float bytes only form canonical
  varints for some values, so this path needs `mlm_weights` in the writer's form: 1.0 for
  the first real predictions, then 0.0 (`00 00 80 3F` reads as varints 0, 0, 8064;
  `00 00 00 00` as four 0s).

`encode_examples` takes the flat path when the weights allow it, else the nested one.
"""

import tensorflow as tf

# Our feature → original feature name, in the original's write order.
ORIGINAL_NAMES = (
    ("token_ids", "input_ids"), ("padding_mask", "input_mask"), ("segment_ids", "segment_ids"),
    ("mask_positions", "masked_lm_positions"), ("mlm_ids", "masked_lm_ids"),
    ("mlm_weights", "masked_lm_weights"), ("nsp_labels", "next_sentence_labels"),
)
_FLOAT_ONE_VARINTS = (0, 0, 8064)  # little-endian 1.0f = 00 00 80 3F


def _encode_proto(message, fields, values):
    """`tf.io.encode_proto` of one message per row; every field is a (rows, k) tensor."""
    rows = tf.shape(values[0])[0]
    sizes = tf.stack([tf.fill([rows], tf.shape(v)[1]) for v in values], axis=1)
    return tf.io.encode_proto(sizes, values, fields, f"tensorflow.{message}")


def _encode_nested(rows, features):
    entries = []
    for ours, original in ORIGINAL_NAMES:
        values = tf.reshape(features[ours], [rows, -1])
        if ours == "mlm_weights":
            kind, listed = "float_list", _encode_proto("FloatList", ["value"], [tf.cast(values, tf.float32)])
        else:
            kind, listed = "int64_list", _encode_proto("Int64List", ["value"], [tf.cast(values, tf.int64)])
        feature = _encode_proto("Feature", [kind], [listed[:, None]])
        entries.append(_encode_proto("Features.FeatureEntry", ["key", "value"],
                                     [tf.fill([rows, 1], original), feature[:, None]]))
    example_features = _encode_proto("Features", ["feature"], [tf.stack(entries, axis=1)])
    return _encode_proto("Example", ["features"], [example_features[:, None]])


# Not a module-level tensor: creating one would start TensorFlow's eager context at import,
# before a MultiWorkerMirroredStrategy can configure collective ops.
_VARINT_LIMITS = [[1 << bits for bits in range(7, 63, 7)]]


def _varint_size(n):
    """Bytes of each int64 of `n` as a protobuf varint (negative: 10)."""
    n = tf.cast(n, tf.int64)
    limits = tf.constant(_VARINT_LIMITS, tf.int64)
    size = 1 + tf.searchsorted(limits, tf.reshape(n, [1, -1]), side="right", out_type=tf.int64)
    return tf.where(n < 0, tf.constant(10, tf.int64), tf.reshape(size, tf.shape(n)))


def _packed_bytes(values):
    """Bytes of each row of (rows, k) int64 `values` as packed varints."""
    k = tf.cast(tf.shape(values)[1], tf.int64)
    small = tf.reduce_all((values >= 0) & (values < 128))  # e.g. masks: one byte each
    return tf.cond(small, lambda: tf.fill(tf.shape(values)[:1], k),
                   lambda: tf.reduce_sum(_varint_size(values), axis=1))


def encode_instances(features):
    """`encode_examples` for the writer's instances (weights 1.0 … 1.0 then 0.0 … 0.0):
    the flat path only, without the check (fewer ops to trace)."""
    return _encode_flat(tf.shape(features["nsp_labels"])[0], features)


def _encode_flat(rows, features):
    ints = [tf.reshape(tf.cast(features[ours], tf.int64), [rows, -1]) for ours, _ in ORIGINAL_NAMES[:5]]
    weights = tf.reshape(tf.cast(features["mlm_weights"], tf.float32), [rows, -1])
    p = tf.shape(weights)[1]
    real = tf.reduce_sum(tf.cast(weights > 0, tf.int32), axis=1)[:, None]
    label = tf.reshape(tf.cast(features["nsp_labels"], tf.int64), [rows, 1])
    # Byte lengths of every feature's payload, list (0A len payload), Feature
    # (<field> len list) and FeatureEntry (0A len key, 12 len Feature): (rows, 7) each.
    payload = tf.stack([_packed_bytes(v) for v in ints] + [tf.fill([rows], tf.cast(4 * p, tf.int64)),
                                                          _varint_size(label)[:, 0]], axis=1)
    list_bytes = 1 + _varint_size(payload) + payload
    feature_bytes = 1 + _varint_size(list_bytes) + list_bytes
    keys = [[10, len(name)] + list(name.encode()) + [18] for _, name in ORIGINAL_NAMES]
    entry_bytes = tf.constant([len(k) for k in keys], tf.int64) + _varint_size(feature_bytes) + feature_bytes
    ten = tf.fill([rows], tf.constant(10, tf.int64))
    heads = []  # per feature: 0A len(E) key 12 len(F) <field> len(L) 0A len(payload)
    for k, (ours, _) in enumerate(ORIGINAL_NAMES):
        field = tf.fill([rows], tf.constant(18 if ours == "mlm_weights" else 26, tf.int64))  # float/int64 list
        heads.append(tf.concat([
            tf.stack([ten, entry_bytes[:, k]], axis=1), tf.tile(tf.constant([keys[k]], tf.int64), [rows, 1]),
            tf.stack([feature_bytes[:, k], field, list_bytes[:, k], ten, payload[:, k]], axis=1)], axis=1))
    # The weights' 4p bytes read as 4p - real varints: (0, 0, 8064) per 1.0, (0, 0, 0, 0)
    # per 0.0; the label's entry follows at once, so it is placed after `4p - real` slots.
    label_entry = tf.concat([heads[6], label], axis=1)
    width = tf.shape(label_entry)[1]
    j = tf.range(4 * p + width)[None]
    start = 4 * p - real
    weight_varints = tf.where(j < 3 * real, tf.gather(tf.constant(_FLOAT_ONE_VARINTS, tf.int64), j % 3), 0)
    tail = tf.where(j < start, weight_varints,
                    tf.gather(label_entry, tf.clip_by_value(j - start, 0, width - 1), batch_dims=1))
    values = tf.concat([part for head, v in zip(heads, ints) for part in (head, v)] + [heads[5], tail], axis=1)
    # Valid varints: all but the last `real` slots. encode_proto writes 0A, the body's
    # length and the varints: the Example.
    sizes = tf.shape(values)[1] - real
    return tf.io.encode_proto(sizes, [values], ["value"], "tensorflow.Int64List")


def _flat_compatible(weights):
    """True when every row is 1.0 … 1.0 then 0.0 … 0.0 (the writer's weights)."""
    ones = tf.equal(weights, 1.0)
    binary = tf.reduce_all(ones | tf.equal(weights, 0.0))
    ones = tf.cast(ones, tf.int32)
    return binary & tf.reduce_all(ones[:, 1:] <= ones[:, :-1])  # no 1.0 after a 0.0


def encode_examples(features):
    """Serializes a batch of instances to `tf.train.Example` bytes, in graph.

    Features are written in the original's order and the bytes equal what protobuf writes
    for an `Example` built in that order (tests check), so the records parse with the
    original `run_pretraining.py` spec. Runs inside `tf.data` (no Python per record) or
    eagerly.

    Args:
        features: dict of tensors with a leading batch axis: `token_ids`, `padding_mask`,
            `segment_ids`, `mask_positions`, `mlm_ids` (ints), `mlm_weights` (floats),
            `nsp_labels`.

    Returns:
        1-D string tensor, one serialized Example per row.
    """
    rows = tf.shape(features["nsp_labels"])[0]
    weights = tf.reshape(tf.cast(features["mlm_weights"], tf.float32), [rows, -1])
    features = dict(features, mlm_weights=weights)
    return tf.cond(_flat_compatible(weights), lambda: _encode_flat(rows, features),
                   lambda: _encode_nested(rows, features))
