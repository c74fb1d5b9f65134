"""`SegmentPacker`: one to N id segments -> `[CLS] A [SEP] B [SEP] ...` backbone inputs."""

import keras
import tensorflow as tf

from keras_bert_zoo.utils import keras_internals

TRUNCATE = ("longest_first", "round_robin", "waterfall")


def _to_ragged(segment):
    """A list, dense tensor or ragged tensor of ids -> int32 ragged (batch, None) + scalar flag."""
    if isinstance(segment, tf.RaggedTensor):
        return tf.cast(segment, tf.int32), False
    if not isinstance(segment, tf.Tensor):
        segment = tf.ragged.constant(segment) if _is_nested_list(segment) else tf.convert_to_tensor(segment)
        if isinstance(segment, tf.RaggedTensor):
            return tf.cast(segment, tf.int32), False
    segment = tf.cast(segment, tf.int32)
    if segment.shape.rank == 1:  # one unbatched sequence
        return tf.RaggedTensor.from_tensor(segment[tf.newaxis]), True
    if segment.shape.rank == 2:
        return tf.RaggedTensor.from_tensor(segment), False
    raise ValueError(
        "Each segment must be 1-D (one sequence) or 2-D/ragged (batch, None) ids. "
        f"Received: shape={segment.shape}."
    )


def _is_nested_list(value):
    return isinstance(value, (list, tuple)) and len(value) > 0 and isinstance(value[0], (list, tuple))


def _check_batch_sizes(segments):
    """Returns `segments`, failing unless all hold the same number of rows (examples)."""
    if len(segments) < 2:
        return segments
    static = [s.shape[0] for s in segments]
    if tf.executing_eagerly() or None not in static:
        rows = [int(s.nrows()) for s in segments] if None in static else static
        if len(set(rows)) > 1:
            counts = ", ".join(f"{n} in segment {i}" for i, n in enumerate(rows))
            raise ValueError(
                "Each segment must hold one row per example, so all segments need the same "
                f"batch size. Received: {counts}. Pass lists of equal length, e.g. "
                '(["A man eats.", "It rains."], ["Someone eats.", "It is dry."]).'
            )
        return segments
    checks = [
        tf.debugging.assert_equal(
            segments[0].nrows(), s.nrows(),
            message=f"Each segment must hold one row per example: segment {i} has a different "
            "batch size than segment 0. Pass lists of equal length.",
        )
        for i, s in enumerate(segments[1:], start=1)
    ]
    with tf.control_dependencies(checks):  # on both tensors: the packer reads the lengths first
        return [
            tf.RaggedTensor.from_row_splits(tf.identity(s.values), tf.identity(s.row_splits), validate=False)
            for s in segments
        ]


def water_level_lengths(lengths, budget):
    """Lengths after `longest_first`/`round_robin` truncation to `budget` tokens in total.

    The original's fine-tuning rule pops from the end of the longer segment (the later
    one on ties) until the pair fits. Its result is a water level `t`: every segment keeps
    `min(length, t)`, and the `r` tokens left over go to the earliest segments still
    longer than `t`. Round-robin allocation (one token per segment in turn, first
    segment first) ends in the same lengths, so both names share this function.

    Args:
        lengths: int32 (batch, segments).
        budget: int32 scalar or (batch,), tokens allowed in total.

    Returns:
        int32 (batch, segments).
    """
    budget = tf.broadcast_to(tf.cast(budget, tf.int32), tf.shape(lengths)[:1])  # (batch,)
    max_len = tf.reduce_max(tf.concat([tf.reshape(lengths, [-1]), [0]], 0))
    levels = tf.range(max_len + 1)  # (levels,)
    capped = tf.minimum(lengths[:, tf.newaxis, :], levels[tf.newaxis, :, tf.newaxis])  # (batch, levels, segs)
    fits = tf.reduce_sum(capped, axis=-1) <= budget[:, tf.newaxis]  # (batch, levels)
    # Sums grow with the level, so the highest level that fits is the count of fits - 1.
    level = tf.reduce_sum(tf.cast(fits, tf.int32), axis=1) - 1  # (batch,)
    kept = tf.minimum(lengths, level[:, tf.newaxis])
    left = budget - tf.reduce_sum(kept, axis=1)  # (batch,)
    longer = tf.cast(lengths > level[:, tf.newaxis], tf.int32)
    rank = tf.cumsum(longer, axis=1, exclusive=True)  # order among segments still longer
    extra = longer * tf.cast(rank < left[:, tf.newaxis], tf.int32)
    return kept + extra


def waterfall_lengths(lengths, budget):
    """Lengths after `waterfall` truncation: earlier segments keep all they can."""
    budget = tf.cast(budget, tf.int32)
    before = tf.cumsum(lengths, axis=1, exclusive=True)
    return tf.clip_by_value(budget - before, 0, lengths)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SegmentPacker(keras.layers.Layer):
    """Packs id segments into `[CLS] A [SEP] B [SEP] ...` with segment ids and a mask.

    Args:
        sequence_length: int or None. Output length (truncate and pad to it); None pads
            to the longest packed row of the batch and truncates nothing.
        start_value: int. The `[CLS]` id.
        end_value: int. The `[SEP]` id closing every segment.
        pad_value: int. The `[PAD]` id. Defaults to 0.
        truncate: str. "longest_first" (the original fine-tuning rule: pop from the end
            of the longer segment), "round_robin" (one token per segment in turn; the
            same lengths as "longest_first") or "waterfall" (earlier segments first).
            Defaults to "longest_first".

    Call arguments:
        inputs: one segment of ids (list, tensor or ragged; 1-D for one sequence or
            (batch, None)) or a tuple of such segments.

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask`, (batch, length) or
        (length,) for 1-D inputs.

    Examples:
    >>> packer = keras_bert_zoo.SegmentPacker(8, start_value=101, end_value=102)
    >>> packer(([[7, 8, 9]], [[4, 5]]))["token_ids"].numpy().tolist()
    [[101, 7, 8, 9, 102, 4, 5, 102]]
    """

    def __init__(self, sequence_length, start_value, end_value, pad_value=0, truncate="longest_first", **kwargs):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        keras_internals.accept_raw_inputs(self)
        self.built = True
        if sequence_length is not None and (not isinstance(sequence_length, int) or sequence_length < 2):
            raise ValueError(
                "`sequence_length` must be an int >= 2 (room for [CLS] and [SEP]) or None. "
                f"Received: sequence_length={sequence_length!r}."
            )
        if truncate not in TRUNCATE:
            raise ValueError(f"`truncate` must be one of {TRUNCATE}. Received: truncate={truncate!r}.")
        for name, value in (("start_value", start_value), ("end_value", end_value), ("pad_value", pad_value)):
            if not isinstance(value, int):
                raise ValueError(f"`{name}` must be an int token id. Received: {name}={value!r}.")
        self.sequence_length = sequence_length
        self.start_value = start_value
        self.end_value = end_value
        self.pad_value = pad_value
        self.truncate = truncate

    def _keep_lengths(self, lengths):
        """Per row and segment, the tokens kept: (batch, segments) int32."""
        if self.sequence_length is None:
            return lengths
        budget = self.sequence_length - 1 - lengths.shape[1]  # [CLS] + one [SEP] per segment
        if budget < 0:
            raise ValueError(
                f"`sequence_length`={self.sequence_length} leaves no room for {lengths.shape[1]} "
                "segments and their [CLS]/[SEP] tokens. Increase it."
            )
        if self.truncate == "waterfall":
            return waterfall_lengths(lengths, budget)
        return water_level_lengths(lengths, budget)

    def _pack(self, segments):
        """Truncates and packs ragged segments with dense ops on (batch, length) positions
        (~210 graph ops for a pair, where ragged masks and `combine_segments` traced ~1,350)."""
        lengths = tf.stack([tf.cast(s.row_lengths(), tf.int32) for s in segments], axis=1)  # (batch, segs)
        keep = self._keep_lengths(lengths)
        # Segment s fills positions [starts[:, s], ends[:, s]) and its [SEP] sits at ends[:, s].
        starts = 1 + tf.cumsum(keep + 1, axis=1, exclusive=True)
        ends = starts + keep
        totals = ends[:, -1] + 1  # [CLS] ... last [SEP]
        if self.sequence_length is None:
            width = tf.reduce_max(tf.concat([totals, [0]], 0))
        else:
            width = self.sequence_length
        positions = tf.range(width)[tf.newaxis, :]  # (1, length)
        token_ids = tf.fill(tf.stack([tf.shape(lengths)[0], width]), tf.constant(self.pad_value, tf.int32))
        segment_ids = tf.zeros_like(token_ids)
        for i, segment in enumerate(segments):
            start, end = starts[:, i : i + 1], ends[:, i : i + 1]
            # Flat index of each position's token in this segment's values (clipped outside it).
            row_starts = tf.cast(segment.row_splits[:-1], tf.int32)[:, tf.newaxis]
            values = tf.concat([tf.cast(segment.values, tf.int32), [self.pad_value]], 0)
            index = tf.clip_by_value(row_starts + positions - start, 0, tf.size(values) - 1)
            inside, at_sep = (positions >= start) & (positions < end), positions == end
            token_ids = tf.where(inside, tf.gather(values, index), token_ids)
            token_ids = tf.where(at_sep, self.end_value, token_ids)
            if i:
                segment_ids = tf.where(inside | at_sep, i, segment_ids)
        token_ids = tf.where(positions == 0, self.start_value, token_ids)
        padding_mask = tf.cast(positions < totals[:, tf.newaxis], tf.int32)
        return {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}

    def call(self, inputs):
        # A tuple holds segments; anything else (tensor, ragged, list) is one segment.
        if not isinstance(inputs, tuple):
            inputs = (inputs,)
        if not inputs:
            raise ValueError("`inputs` must hold at least one segment. Received: an empty tuple.")
        converted = [_to_ragged(s) for s in inputs]
        segments = _check_batch_sizes([c[0] for c in converted])
        scalar = converted[0][1]
        outputs = self._pack(segments)
        if scalar:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "start_value": self.start_value,
                "end_value": self.end_value,
                "pad_value": self.pad_value,
                "truncate": self.truncate,
            }
        )
        return config
