"""The real-token path of `TransformerEncoder` (`skip_padding`): a padded batch's real tokens as one
`(tokens, hidden)` matrix for the dense layers, and back, by gathers only.

The rows of a batch padded to its longest row are mostly padding on real text (a batch of 32
review snippets: ~27 pieces on average, padded to ~55), and the dense layers are nearly all the
work: on the real tokens alone they do about half of it. The attention keeps the padded
`(batch, seq)` layout (queries, keys and values put into it, zeros at padding, which the mask
hides), where its dropout is drawn as on the padded path. Real positions get the padded path's
outputs (to float rounding); padded positions get zeros, and no gradient.

At inference, batches of rows longer than the encoder's `per_sequence_above` (SQuAD-style windows)
attend one sequence at a time on the packed tokens themselves (`attend`): no padded keys, no mask, no
scores for padded queries, each sequence's `(heads, length, length)` scores in the CPU's cache
(docs/benchmarks.md, `encoder_paths`: 1.14× on QA windows); shorter rows attend in one batched call,
whose few ops per layer cost less than a loop over short rows.

Scattering rows into a zeroed padded tensor (`ops.scatter`, TensorFlow's `ScatterNd`) took about
three times as long as gathering the same rows (`ops.take`) on the CPUs this project runs on
(docs/measurements/), so the way back is a gather too: every padded cell names its token's row,
padding a zero row appended to the tokens. Each function's gradient is the other one (both are a
permutation of rows, padding aside), so training's backward pass gathers as well instead of
summing `IndexedSlices` into dense gradients. Every batch's token count is a new matmul shape,
which XLA and JAX's jit do not take: TensorFlow without XLA only.
"""

import keras
from keras import ops

# `TransformerEncoder(skip_padding=...)`: when its dense layers run on the real tokens only (None:
# not chosen yet, every position meanwhile; the first `Task` built on the backbone chooses).
NEVER, INFERENCE, ALWAYS = "never", "inference", "always"
SKIP_PADDING = (NEVER, INFERENCE, ALWAYS)


def check_skip_padding(value, backend):
    """Raises ValueError for a value not in `SKIP_PADDING` (or None), or a skipping one off TensorFlow."""
    if value is not None and value not in SKIP_PADDING:
        raise ValueError(
            f"`skip_padding` must be one of {SKIP_PADDING} or None. Received: skip_padding={value!r}. 'never' runs "
            "every position (any device, XLA), 'inference' the real tokens only when not training, 'always' in "
            "training too (for a task whose loss reads no padded position); None leaves it to the task.")
    if value not in (None, NEVER) and backend != "tensorflow":
        raise ValueError(
            f"skip_padding={value!r} runs on TensorFlow only (each batch's token count is a dynamic shape, "
            f"which JAX's jit and torch's compile do not take). Received it on the {backend} backend; "
            "pass skip_padding='never'.")
    return value


def skips_more(value, allowed):
    """Whether `value` skips more of the padding than `allowed` does (None skips none)."""
    rank = {None: 0, NEVER: 0, INFERENCE: 1, ALWAYS: 2}
    return rank[value] > rank[allowed]


def check_allowed(value, allowed, task):
    """Raises ValueError where the encoder skips more of the padding (`value`) than `task` (a class
    name) allows, since that task reads the encoder's outputs at padded positions."""
    if skips_more(value, allowed):
        raise ValueError(
            f"{task} reads its encoder's outputs at padded positions (allows skip_padding={allowed!r}), but the "
            f"backbone was built with skip_padding={value!r}. Build the backbone with skip_padding={allowed!r} or "
            "None (the task then picks).")


def compile_arguments(skip_padding, kwargs):
    """`keras.Model.compile`'s `kwargs` for a model over an encoder that skips the padding as
    `skip_padding`: XLA takes no new shape per batch, so `jit_compile="auto"` (or none given) becomes
    False (what Keras picks on a CPU; the skipping path needs it elsewhere too) and True is refused."""
    if not skips_more(skip_padding, NEVER):
        return kwargs
    if kwargs.get("jit_compile") is True:
        raise ValueError(
            "jit_compile=True cannot compile an encoder that skips the padding (each batch's token count is a new "
            f"shape, which XLA does not take). Received: jit_compile=True with the backbone's skip_padding="
            f"{skip_padding!r}. Build the task with skip_padding='never' (`from_preset(..., skip_padding='never')`), "
            "or leave jit_compile at 'auto'.")
    return dict(kwargs, jit_compile=False) if kwargs.get("jit_compile", "auto") == "auto" else kwargs


def skips(skip_padding, padding_mask, training):
    """Whether a call takes the real-token path: a mask to find the tokens, and `training` exactly
    False (`predict`, `evaluate`, exports) or, with "always", exactly True (`fit`); a call that
    does not say (a symbolic build) runs every position."""
    if padding_mask is None or skip_padding in (None, NEVER):
        return False
    return training is False or (training is True and skip_padding == ALWAYS)


class RealTokens:
    """Where the real tokens of a `(batch, seq)` padding mask are, for `pack` and `unpack`."""

    def __init__(self, padding_mask, padded_shape):
        flat = ops.reshape(padding_mask, (-1,)) > 0
        self.real = ops.nonzero(flat)[0]  # flat positions of the real tokens, row-major
        rank = ops.cumsum(ops.cast(flat, "int32")) - 1
        # For every flat cell, the row of its token in the packed matrix (the zero row for padding).
        self.index = ops.where(flat, rank, ops.cast(ops.shape(self.real)[0], "int32"))
        self.padded_shape = padded_shape  # (batch, seq, hidden)

    def pack(self, padded):
        """`(batch, seq, hidden)` -> `(tokens, hidden)`: the real tokens."""
        return pack(ops.reshape(padded, (-1, self.padded_shape[-1])), self.real, self.index)

    def unpack(self, tokens):
        """`(tokens, hidden)` -> `(batch, seq, hidden)`, zeros at padding."""
        return ops.reshape(unpack(tokens, self.real, self.index), self.padded_shape)


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


def positions(padding_mask):
    """`(real, index)` of a `(batch, seq)` padding mask (see `RealTokens`)."""
    where = RealTokens(padding_mask, None)
    return where.real, where.index


def check_per_sequence_above(value, skip_padding=None):
    """Raises ValueError for a value that is not a row length or None, or one given with
    `skip_padding="never"`: only the real-token path attends one sequence at a time."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise ValueError(
            "`per_sequence_above` must be a row length (an int >= 0) or None. Received: "
            f"per_sequence_above={value!r}. 128 attends longer rows one sequence at a time at inference on "
            "the real-token path (CPUs); None always attends the whole batch at once.")
    if value is not None and skip_padding == NEVER:
        raise ValueError(
            f"per_sequence_above={value!r} applies to the real-token path only, which skip_padding='never' never "
            "takes. Drop `per_sequence_above`, or pass skip_padding='inference' or 'always'.")
    return value


def attend(attention, query, key, value, where, padding_mask, training, per_sequence_above=None):
    """`attention`'s context of the real tokens' projected `(tokens, hidden)` queries, keys and values:
    in the padded layout (`where.unpack`, the mask hiding the zeros there; dropout drawn as on the
    padded path), or at inference for rows longer than `per_sequence_above` one sequence at a time
    on the packed rows (`attend_packed`). Returns `(tokens, hidden)`."""

    def in_padded_layout():
        padded = (where.unpack(part) for part in (query, key, value))
        return where.pack(attention.attend(*padded, padding_mask, training))

    def one_sequence_at_a_time():
        lengths = ops.sum(ops.cast(padding_mask > 0, "int32"), axis=1)  # (batch,)
        return attend_packed(attention, query, key, value, lengths)

    if training or per_sequence_above is None:
        return in_padded_layout()
    length = ops.shape(padding_mask)[1]
    if isinstance(length, int):  # a shape known when traced: one path in the graph
        return one_sequence_at_a_time() if length > per_sequence_above else in_padded_layout()
    return ops.cond(length > per_sequence_above, one_sequence_at_a_time, in_padded_layout)


def attend_packed(attention, query, key, value, lengths):
    """Inference attention of sequences packed row after row (`(tokens, hidden)`, sequence `i` is rows
    `sum(lengths[:i])` to `sum(lengths[:i + 1])`), each attending within itself, one at a time: the
    same outputs as the padded batch's at the real positions (to float rounding); no dropout."""
    hidden = ops.shape(query)[-1]
    lengths = ops.cast(lengths, "int32")
    starts = ops.cumsum(lengths) - lengths  # (batch,) each sequence's first row
    longest = ops.max(lengths)

    def one_sequence(bounds):
        start, length = bounds[0], bounds[1]
        q, k, v = (ops.slice(x, (start, 0), (length, hidden))[None] for x in (query, key, value))  # (1, n, hidden)
        # A sequence without padding: no mask; `causal` masks by order, which the real tokens keep.
        context = attention.attend(q, k, v, None, False)[0]  # (n, hidden)
        return ops.pad(context, ((0, longest - length), (0, 0)))  # (longest, hidden)

    padded = map_rows(one_sequence, (starts, lengths), attention.hidden_dim, attention.compute_dtype)
    # Row t of sequence i sits at (i, t - starts[i]) of `padded`.
    sequence = ops.repeat(ops.arange(ops.shape(lengths)[0], dtype="int32"), lengths, axis=0)  # (tokens,)
    within = ops.arange(ops.shape(query)[0], dtype="int32") - ops.take(starts, sequence)
    return ops.take(ops.reshape(padded, (-1, attention.hidden_dim)), sequence * longest + within, axis=0)


def map_rows(function, rows, hidden_dim, dtype):
    """`ops.map(function, rows)` -> `(batch, seq, hidden)`. On TensorFlow `tf.map_fn` with the
    output's signature given: Keras' `ops.map` first calls `function` on row 0 for it, a second
    copy of the per-sequence attention in every layer's graph."""
    if keras.backend.backend() != "tensorflow":
        return ops.map(function, rows)
    import tensorflow as tf  # lazy: layers/ imports no framework but Keras at module level (they run on JAX and PyTorch)

    return tf.map_fn(function, rows, fn_output_signature=tf.TensorSpec([None, hidden_dim], dtype))
