"""Float policies: float32 unless the user asks otherwise; `"auto"` picks the fast one on request.

Every model, task and command runs in float32 unless asked: a checkpoint loaded with the
defaults then matches its reference (Google's, HF's) to float32 rounding, and the API and the
commands train the same numerics on every machine. A model built without `dtype` follows
Keras' global policy (`keras.config.set_dtype_policy("mixed_bfloat16")`), float32 unless
set (`default_policy()`). `"auto"` (`dtype="auto"`, `precision="auto"`, `--precision auto`)
is the opt-in that picks for this machine (`auto_precision()`): on a CPU with native bf16
instructions (AVX512-BF16 or AMX-BF16) oneDNN runs bf16 matmuls at about twice the float32
rate; on a CPU without them (AVX2 only) bf16 is emulated and *slower* than float32
(`../shared/PERFORMANCE.md`); GPUs and TPUs run bf16 natively. The environment variable
`KERAS_BERT_ZOO_PRECISION` is the user's choice by environment: it answers `"auto"`, and
models built without `dtype` while the global policy is float32 take it.
"""

import os

import keras
import numpy as np
import tensorflow as tf

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


def has_accelerator():
    """Whether a GPU or TPU runs the backend's computations (asked of the backend's own framework)."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
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
    """What `"auto"` picks here: `"mixed_bfloat16"` where bf16 is fast, else `"float32"`.

    `KERAS_BERT_ZOO_PRECISION` (one of `float32`, `mixed_bfloat16`, `mixed_float16`), when
    set, wins.

    Args:
        flags: iterable of str or None. CPU flags; None reads `/proc/cpuinfo`.
        accelerator: bool or None. Whether a GPU/TPU runs the model; None asks the backend.

    Returns:
        str, a Keras dtype policy name.
    """
    forced = forced_precision()
    if forced:
        return forced
    if accelerator is None:
        accelerator = has_accelerator()
    if accelerator or cpu_has_native_bf16(flags):
        return "mixed_bfloat16"
    return "float32"


def forced_precision():
    """The policy `KERAS_BERT_ZOO_PRECISION` names, or None where it is unset.

    Raises:
        ValueError: the variable names no supported policy.
    """
    forced = os.environ.get(ENV, "").strip()
    if forced and forced not in PRECISIONS:
        raise ValueError(
            f"The environment variable {ENV} must be one of {', '.join(PRECISIONS)}. "
            f"Received: {forced!r}. Unset it to choose automatically."
        )
    return forced or None


def default_policy():
    """The float policy of a model built without `dtype`: float32 unless the user asked otherwise.

    Keras' global policy where it was set to something other than float32
    (`keras.config.set_dtype_policy`), else `KERAS_BERT_ZOO_PRECISION` where set, else
    float32. Never a policy picked for the machine: that is `dtype="auto"`'s opt-in.
    """
    policy = keras.config.dtype_policy()
    if policy.name != "float32":
        return policy
    return keras.dtype_policies.get(forced_precision() or "float32")


def auto_reason(flags=None, accelerator=None):
    """Why `auto_precision()` picks what it picks here, in a few words (for a command's log line)."""
    forced = forced_precision()
    if forced:
        return f"{ENV}={forced}"
    if accelerator is None:
        accelerator = has_accelerator()
    if accelerator:
        return "a GPU/TPU runs bf16 natively"
    if cpu_has_native_bf16(flags):
        return "this CPU runs bf16 natively (AVX512-BF16/AMX)"
    return "this CPU has no native bf16 (AVX512-BF16/AMX), where bf16 is emulated and slower"


def precision_line(policy, asked=None, flag="--precision"):
    """The line a command prints once at its start: the float policy it runs in, and why.

    Args:
        policy: str. The policy the run actually uses.
        asked: str or None. The flag's value as given; None: not given (the default, float32).
        flag: str. The flag that sets it, as the line names it.

    Returns:
        str, e.g. "precision: float32 (default; --precision auto picks mixed_bfloat16 on this
        machine: this CPU runs bf16 natively (AVX512-BF16/AMX))".
    """
    wanted = resolve_precision(asked)
    if wanted != policy:  # a model file saved with its own policy keeps it
        given = "the default" if asked is None else f"{flag} {asked}"
        return f"precision: {policy} (the model's own saved policy; {given} ({wanted}) does not change it)"
    if asked == AUTO:
        return f"precision: {policy} ({flag} auto: {auto_reason()})"
    if asked is not None:
        return f"precision: {policy} ({flag} {asked})"
    return f"precision: float32 (default; {flag} auto picks {auto_precision()} on this machine: {auto_reason()})"


def model_precision_line(policy):
    """The line `Task.fit` prints at its start (with a progress bar): the policy the model trains
    in and how to choose another, as a command's first line says it (`precision_line`)."""
    if policy != "float32":
        return f"precision: {policy} (the model's dtype policy)"
    return (f"precision: float32 (the default; from_preset(..., dtype=\"auto\") picks {auto_precision()} on this "
            f"machine: {auto_reason()})")


def resolve_precision(precision):
    """Returns `precision`, with `"auto"` replaced by `auto_precision()` and None (nothing
    asked) by `"float32"`, the default of every command.

    Raises:
        ValueError: for a name that is neither "auto" nor a supported policy.
    """
    if precision is None:
        return "float32"
    if precision == AUTO:
        return auto_precision()
    if precision not in PRECISIONS:
        raise ValueError(
            f"`precision` must be 'auto' or one of {', '.join(PRECISIONS)}. Received: {precision!r}."
        )
    return precision


def widen_in_graph(outputs):
    """`predict_step`'s bf16/fp16 output tensors cast to float32 (ragged ones are left as they are): a
    MultiWorkerMirroredStrategy gathers them with collective ops that take no bfloat16 (a bf16 model's
    predict failed there), and users get float32 from `predict` whatever the policy."""
    def widen(output):
        dtype = getattr(output, "dtype", None)
        if dtype is None or isinstance(output, tf.RaggedTensor):
            return output
        if keras.backend.standardize_dtype(dtype) in ("bfloat16", "float16"):
            return keras.ops.cast(output, "float32")
        return output

    return keras.tree.map_structure(widen, outputs)


def as_float32(outputs):
    """Half-precision outputs (bf16/fp16 under a mixed policy) as float32 NumPy arrays:
    what a user's NumPy, SciPy or scikit-learn code takes."""
    def widen(output):
        output = np.asarray(output) if isinstance(output, (np.ndarray, np.generic)) else output
        if isinstance(output, np.ndarray) and output.dtype.name in ("bfloat16", "float16"):
            return output.astype("float32")
        return output

    return keras.tree.map_structure(widen, outputs)
