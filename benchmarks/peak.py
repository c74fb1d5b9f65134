"""The machine's practical roofs: GFLOP/s of a large square matmul, and GB/s of memory, through TensorFlow.

A 2048³ matmul through TF's oneDNN kernels is the best dense throughput a Keras model on
this CPU can hope for (../shared/PERFORMANCE.md: ~205 GFLOP/s fp32, ~400 bf16 when the
host is quiet). Sections divide their FLOP rate by this roof, measured in the same run.

    from benchmarks.peak import measure_roof
    roof = measure_roof(quick=False)   # {"float32": {...}, "bfloat16": {...}}, each in a subprocess
"""

from benchmarks._subprocess import run_config, summarize, time_runs

DTYPES = ("float32", "bfloat16")


def matmul_gflops(dtype="float32", n=2048, warmup=3, runs=5, calls_per_run=10):
    """Worker: GFLOP/s of an `n`×`n` @ `n`×`n` matmul in `dtype` (run it in a subprocess).

    Args:
        dtype: str. `"float32"` or `"bfloat16"`.
        n: int. Matrix size. Defaults to 2048.
        warmup: int. Untimed calls first. Defaults to 3.
        runs: int. Timed runs. Defaults to 5.
        calls_per_run: int. Matmuls per timed run. Defaults to 10.

    Returns:
        dict: `gflops` (median), `spread`, `runs` (GFLOP/s per run), `dtype`, `n`.
    """
    if dtype not in DTYPES:
        raise ValueError(f"`dtype` must be one of {DTYPES}. Received: dtype={dtype!r}.")
    import tensorflow as tf

    a = tf.random.stateless_normal((n, n), seed=(1, 2), dtype=tf.float32)
    b = tf.random.stateless_normal((n, n), seed=(3, 4), dtype=tf.float32)
    a, b = tf.cast(a, dtype), tf.cast(b, dtype)

    @tf.function
    def matmul(x, y):
        # Reduce to a scalar so the host copy is negligible but the whole product is needed.
        return tf.reduce_sum(tf.cast(tf.linalg.matmul(x, y), tf.float32))

    stats = summarize(
        time_runs(lambda: matmul(a, b).numpy(), warmup, runs, calls_per_run),
        items_per_call=2.0 * n**3 / 1e9,
    )
    return {"dtype": dtype, "n": n, "gflops": stats["rate"], "spread": stats["spread"], "runs": stats["rates"]}


def memory_gbs(megabytes=512, warmup=2, runs=5, calls_per_run=4):
    """Worker: GB/s TensorFlow moves through memory on an element-wise op far larger than the caches.

    `x * c` on a float32 tensor of `megabytes` (STREAM's "scale": each element read once and
    written once, 8 bytes), on TensorFlow's own threads: the rate at which a memory-bound op
    such as an optimizer's update can at best stream its tensors on this host.

    Returns:
        dict: `gbs` (median), `spread`, `runs` (GB/s per run), `megabytes`.
    """
    import tensorflow as tf

    n = megabytes * 2**20 // 4
    x = tf.random.stateless_uniform((n,), seed=(5, 6), dtype=tf.float32)

    @tf.function
    def scale(x):
        y = x * 1.0001
        return y[0]  # the whole product is computed; one element comes back

    stats = summarize(time_runs(lambda: scale(x).numpy(), warmup, runs, calls_per_run),
                      items_per_call=8.0 * n / 1e9)
    return {"gbs": stats["rate"], "spread": stats["spread"], "runs": stats["rates"], "megabytes": megabytes}


def measure_bandwidth():
    """`memory_gbs` in a subprocess of its own."""
    return run_config("benchmarks.peak", "memory_gbs", {}, timeout=300)


def measure_roof(quick=False, n=2048, dtypes=DTYPES):
    """Measures the matmul roof of each of `dtypes` (fp32 and bf16 by default), each in its own subprocess.

    Returns:
        dict mapping each dtype (`"float32"`, `"bfloat16"`) to the worker's result (or `{"error": ...}`).
    """
    runs = 3 if quick else 5
    return {
        dtype: run_config("benchmarks.peak", "matmul_gflops", {"dtype": dtype, "n": n, "runs": runs}, timeout=600)
        for dtype in dtypes
    }


if __name__ == "__main__":
    import json

    print(json.dumps(measure_roof(quick=True), indent=1))
