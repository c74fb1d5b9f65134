"""Runs one benchmark configuration in a fresh Python process and collects its JSON result.

Every measured configuration gets its own process (../shared/PERFORMANCE.md): graphs,
thread pools, allocator state and oneDNN caches of one configuration never leak into the
next. A section module names a worker function (importable, module level, keyword
arguments JSON-serialisable, returning a JSON-serialisable dict) and calls

    result = run_config("benchmarks.backbone", "measure_ours", {"precision": "float32"})

The child prints the result as one tagged JSON line; anything else it prints (TF logs,
warnings) is ignored. A crash, a timeout or an exception in the worker comes back as
`{"error": "..."}` so that one failing configuration never kills the whole section.

The module also holds the timing helpers every section shares: `time_runs` (warm-up
excluded, one duration per timed run) and `summarize` (median, spread, throughput).
"""

import argparse
import importlib
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
RESULT_TAG = "@@BENCH_RESULT@@ "


def run_config(module, func, kwargs=None, env=None, timeout=1800):
    """Calls `module.func(**kwargs)` in a new Python process and returns its dict.

    Args:
        module: str. Importable module name, e.g. `"benchmarks.backbone"`.
        func: str. Name of a module-level function returning a JSON-serialisable dict.
        kwargs: dict or None. JSON-serialisable keyword arguments. Defaults to `{}`.
        env: dict or None. Extra environment variables for the child (added to a copy of
            this process's environment). Defaults to None.
        timeout: float. Seconds before the child is killed. Defaults to 1800.

    Returns:
        The worker's dict, with `"wall_s"` (seconds the whole child took) added, or
        `{"error": str, "wall_s": float}` if the child failed, timed out or printed no result.
    """
    if not isinstance(module, str) or not isinstance(func, str):
        raise ValueError(
            f"`module` and `func` must be strings. Received: module={module!r}, func={func!r}."
        )
    payload = json.dumps(kwargs or {})
    child_env = dict(os.environ)
    child_env.setdefault("KERAS_BACKEND", "tensorflow")
    child_env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), child_env.get("PYTHONPATH", "")) if p
    )
    child_env.update({k: str(v) for k, v in (env or {}).items()})
    # The arguments go on stdin: a command line holds at most ~128 KiB per argument (a section's
    # thousands of real sentences do not fit).
    cmd = [sys.executable, "-m", "benchmarks._subprocess", module, func, "-"]
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=child_env, input=payload, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "wall_s": time.perf_counter() - start}
    wall = time.perf_counter() - start
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_TAG):
            result = json.loads(line[len(RESULT_TAG):])
            result["wall_s"] = wall
            return result
    tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-5:]
    return {"error": f"exit {proc.returncode}: " + " | ".join(tail), "wall_s": wall}


def time_runs(step, warmup, runs, calls_per_run=1):
    """Times `step()`: `warmup` untimed calls, then `runs` timed runs of `calls_per_run` calls.

    `step` must block until its work is done (return a host value or call `.numpy()`).

    Returns:
        list of float: seconds per call, one entry per timed run.
    """
    if runs < 1 or calls_per_run < 1 or warmup < 0:
        raise ValueError(
            "`runs` and `calls_per_run` must be >= 1 and `warmup` >= 0. Received: "
            f"warmup={warmup}, runs={runs}, calls_per_run={calls_per_run}."
        )
    for _ in range(warmup):
        step()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        for _ in range(calls_per_run):
            step()
        times.append((time.perf_counter() - start) / calls_per_run)
    return times


def summarize(times, items_per_call=1.0):
    """Median throughput and spread of a list of per-call durations.

    Returns:
        dict with `times` (s), `median_s`, `rate` (items per second at the median time),
        `rates` (per run) and `spread` ((max - min) / median of the rates).
    """
    rates = [items_per_call / t for t in times]
    med = statistics.median(rates)
    return {
        "times": times,
        "median_s": statistics.median(times),
        "rates": rates,
        "rate": med,
        "spread": (max(rates) - min(rates)) / med if med else float("nan"),
    }


def _child(argv):
    parser = argparse.ArgumentParser(description="Runs one benchmark worker (internal).")
    parser.add_argument("module")
    parser.add_argument("func")
    parser.add_argument("kwargs")
    args = parser.parse_args(argv)
    worker = getattr(importlib.import_module(args.module), args.func)
    try:
        result = worker(**json.loads(sys.stdin.read() if args.kwargs == "-" else args.kwargs))
    except Exception as exc:  # reported to the parent, which keeps going
        result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    sys.stdout.flush()
    print(RESULT_TAG + json.dumps(result), flush=True)


if __name__ == "__main__":
    _child(sys.argv[1:])
