"""The real tokens of a padded batch as one `(tokens, hidden)` matrix, and back, by gathers only.

`TransformerEncoder.skip_padding` runs its dense layers on the real tokens and its attention
on the padded layout, so each layer moves rows between the two. Scattering rows into a zeroed
padded tensor (`ops.scatter`, TensorFlow's `ScatterNd`) took about three times as long as
gathering the same rows (`ops.take`) on the CPUs this project runs on
(docs/measurements/2026-12-speed.md).
So the way back is a gather too: every padded cell names its token's row, padding a zero row
appended to the tokens. Each function's gradient is the other one (both are a permutation of
rows, padding aside), so training's backward pass gathers as well instead of summing
`IndexedSlices` into dense gradients.
TensorFlow only, as the real-token path (`ops.custom_gradient`; the token count is dynamic).
"""

from keras import ops


def positions(padding_mask):
    """`(real, index)` of a `(batch, seq)` padding mask: `real` the flat positions of the real tokens
    in row-major order, `index` for every flat cell the row of its token in the packed matrix
    (the token count, i.e. the appended zero row, for padding)."""
    flat = ops.reshape(padding_mask, (-1,)) > 0
    real = ops.nonzero(flat)[0]
    rank = ops.cumsum(ops.cast(flat, "int32")) - 1
    index = ops.where(flat, rank, ops.cast(ops.shape(real)[0], "int32"))
    return real, index


def _take(rows, where):
    return ops.take(rows, where, axis=0)


def _with_zero_row(tokens):
    return ops.concatenate([tokens, ops.zeros((1, ops.shape(tokens)[-1]), tokens.dtype)], axis=0)


def pack(rows, real, index):
    """`(cells, hidden)` rows of the padded layout -> `(tokens, hidden)`: the real tokens."""

    @ops.custom_gradient
    def packed(rows):
        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return _take(_with_zero_row(upstream), index)  # zeros at padding: it was not read

        return _take(rows, real), grad

    return packed(rows)


def unpack(tokens, real, index):
    """`(tokens, hidden)` -> `(cells, hidden)` in the padded layout, zeros at padding."""

    @ops.custom_gradient
    def unpacked(tokens):
        def grad(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return _take(upstream, real)  # padding's gradient lands on the constant zero row

        return _take(_with_zero_row(tokens), index), grad

    return unpacked(tokens)
