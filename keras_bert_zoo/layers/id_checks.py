"""Range checks for integer inputs (token and segment ids) that fail eagerly and in graphs.

An id outside its table would otherwise pick a wrong row without a word: Keras' `take`
wraps a negative id to the end of the table (`-1`, a common padding value, embeds the
last word piece), and a gather on GPU returns zeros for ids past the end. We refuse such
ids rather than clip them to `[UNK]`: a clipped `-1` would still be attended to as a real
token, and the backbone does not know which id is `[UNK]`.

The condition is computed with `keras.ops` (two reductions over `(batch, seq)`, nothing
next to the encoder's matmuls). Raising needs values, so what fails depends on when they
exist:

- eager calls (TensorFlow eager, PyTorch, JAX outside `jit`): a `ValueError` naming the
  first bad id and its position;
- inside a `tf.function` (`fit`, `predict`, `evaluate`, an exported SavedModel): a
  `tf.debugging.Assert`, so the step raises `InvalidArgumentError` with the same advice
  and the smallest and largest id of the batch;
- traced code that cannot raise (`jax.jit`, PyTorch symbolic shapes, XLA-compiled
  TensorFlow, which drops asserts): unchecked.
"""

import keras
import numpy as np
from keras import ops


def _concrete(ids):
    """`ids` as a NumPy array if its values exist now (an eager call), else None."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf  # lazy: layers/ imports no framework but Keras at module level (they run on JAX and PyTorch)

        return ids.numpy() if tf.executing_eagerly() and hasattr(ids, "numpy") else None
    if backend == "jax":
        import jax  # lazy: the backend's own framework only (start-up time)

        return None if isinstance(ids, jax.core.Tracer) else np.asarray(ids)
    if backend == "torch":
        import torch  # lazy: the backend's own framework only (start-up time)

        if ids.is_meta or torch.compiler.is_compiling():
            return None
    return ops.convert_to_numpy(ids)


def check_id_range(ids, size, name, size_name, fix):
    """Returns `ids` unchanged, failing if any id is outside `[0, size)`.

    Args:
        ids: integer tensor.
        size: int. Number of rows of the table the ids index.
        name: str. The input's name (`"token_ids"`).
        size_name: str. The argument that sets `size` (`"vocabulary_size"`).
        fix: str. What the caller should do instead.

    Returns:
        `ids` (under a `tf.function`, with the check as a control dependency).

    Raises:
        ValueError: in an eager call, naming the first bad id and its position.
    """
    problem = f"`{name}` must be in [0, {size_name}={size})"
    values = _concrete(ids)
    if values is not None:
        bad = np.argwhere((values < 0) | (values >= size))
        if len(bad):
            position = tuple(int(i) for i in bad[0])
            raise ValueError(
                f"{problem}. Received: {name}[{', '.join(map(str, position))}]="
                f"{values[position]} ({len(bad)} of {values.size} ids out of range). {fix}"
            )
        return ids
    if keras.backend.backend() != "tensorflow":
        return ids
    import tensorflow as tf  # lazy: layers/ imports no framework but Keras at module level (they run on JAX and PyTorch)

    smallest, largest = ops.min(ids), ops.max(ids)
    in_range = ops.logical_and(smallest >= 0, largest < size)
    check = tf.debugging.Assert(
        in_range, [f"{problem}. {fix} Smallest and largest {name} received:", smallest, largest]
    )
    with tf.control_dependencies([check]):
        return tf.identity(ids)
