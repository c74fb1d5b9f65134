"""The fast float policy for this machine: `mixed_bfloat16` where bf16 is native, else float32.

On a CPU with native bf16 instructions (AVX512-BF16 or AMX-BF16) oneDNN runs bf16 matmuls
at about twice the float32 rate; on a CPU without them (AVX2 only) bf16 is emulated and *slower* than
float32 (`../shared/PERFORMANCE.md`). GPUs and TPUs run bf16 natively. `auto_precision()`
picks accordingly; the environment variable `KERAS_BERT_ZOO_PRECISION` overrides it.
A `BertBackbone` (and so every task) built without `dtype` takes `default_policy()`: the
fast policy, unless Keras' global policy was set to another than float32.
"""

import os

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
AUTO = "auto"
ENV = "KERAS_BERT_ZOO_PRECISION"
_BF16_CPU_FLAGS = ("avx512_bf16", "amx_bf16")
# int8 dot products: oneDNN's uint8 x int8 kernel (QuantizedMatMulWithBias) needs them; on a
# CPU without them the op returns an empty tensor and fails.
_VNNI_CPU_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


def cpu_flags(path="/proc/cpuinfo"):
    """The CPU feature flags of the first processor in `path` (empty where unreadable)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags") and ":" in line:
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_native_bf16(flags=None):
    """True if the CPU executes bf16 dot products natively (AVX512-BF16 or AMX-BF16).

    Args:
        flags: iterable of str or None. CPU flags; None reads `/proc/cpuinfo`.
    """
    return _cpu_has_any(_BF16_CPU_FLAGS, flags)


def cpu_has_vnni(flags=None):
    """True if the CPU has int8 dot-product instructions (AVX512-VNNI, AVX-VNNI or AMX-INT8).

    Args:
        flags: iterable of str or None. CPU flags; None reads `/proc/cpuinfo`.
    """
    return _cpu_has_any(_VNNI_CPU_FLAGS, flags)


def _cpu_has_any(wanted, flags):
    flags = cpu_flags() if flags is None else frozenset(flags)
    return any(flag in flags for flag in wanted)


def _has_accelerator():
    import keras  # lazy: reading the precision setting needs no Keras (start-up time)

    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf  # lazy: the backend's own framework only (start-up time)

        # Physical, not logical devices: listing logical ones initialises the runtime, after
        # which a MultiWorkerMirroredStrategy can no longer configure its collectives.
        return bool(tf.config.list_physical_devices("GPU") or tf.config.list_physical_devices("TPU"))
    if backend == "jax":
        import jax  # lazy: the backend's own framework only (start-up time)

        return jax.default_backend() in ("gpu", "tpu")
    if backend == "torch":
        import torch  # lazy: the backend's own framework only (start-up time)

        return bool(torch.cuda.is_available())
    return False


def auto_precision(flags=None, accelerator=None):
    """The float policy to use here: `"mixed_bfloat16"` where bf16 is fast, else `"float32"`.

    `KERAS_BERT_ZOO_PRECISION` (one of `float32`, `mixed_bfloat16`, `mixed_float16`), when
    set, wins.

    Args:
        flags: iterable of str or None. CPU flags; None reads `/proc/cpuinfo`.
        accelerator: bool or None. Whether a GPU/TPU runs the model; None asks the backend.

    Returns:
        str, a Keras dtype policy name.
    """
    forced = os.environ.get(ENV, "").strip()
    if forced:
        if forced not in PRECISIONS:
            raise ValueError(
                f"The environment variable {ENV} must be one of {', '.join(PRECISIONS)}. "
                f"Received: {forced!r}. Unset it to choose automatically."
            )
        return forced
    if accelerator is None:
        accelerator = _has_accelerator()
    if accelerator or cpu_has_native_bf16(flags):
        return "mixed_bfloat16"
    return "float32"


def default_policy():
    """The float policy of a model built without `dtype`.

    Keras' global policy where it was set to something other than float32 (the user's
    choice), else `auto_precision()`: `mixed_bfloat16` where bf16 is native, float32
    elsewhere. `dtype="float32"` (or `KERAS_BERT_ZOO_PRECISION=float32`) pins float32.
    """
    import keras  # lazy: reading the precision setting needs no Keras (start-up time)

    policy = keras.config.dtype_policy()
    if policy.name != "float32":
        return policy
    return auto_precision()


def resolve_precision(precision):
    """Returns `precision`, with `"auto"` (or None) replaced by `auto_precision()`.

    Raises:
        ValueError: for a name that is neither "auto" nor a supported policy.
    """
    if precision is None or precision == AUTO:
        return auto_precision()
    if precision not in PRECISIONS:
        raise ValueError(
            f"`precision` must be 'auto' or one of {', '.join(PRECISIONS)}. Received: {precision!r}."
        )
    return precision
