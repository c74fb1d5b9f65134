"""TensorFlow's import without its start-up noise on stderr, for every process of the package.

While its C++ libraries load and look for devices, TensorFlow writes lines that
`TF_CPP_MIN_LOG_LEVEL` does not stop, because they come before its logging is set up or
are error-level (on a CPU-only machine; the first three twice, once per shared library,
each of which sets up absl logging on its own):

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 ... port.cc:153] oneDNN custom operations are on. You may see slightly different ...
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E0000 ... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: ... UNKNOWN ERROR (303)

A CPU-only machine is a normal one, so none of them says anything is wrong. `import
keras_bert_zoo` imports TensorFlow through `import_tensorflow_quietly`: file descriptor 2
goes to a temporary file during the import and the device search, and every line but
these is passed on: the absl banner, log lines below `TF_CPP_MIN_LOG_LEVEL`, and the
"no CUDA" lines when no GPU was found. Everything else (a real error), and everything
when the import fails, reaches stderr unchanged. A process that imported TensorFlow
before the package has had its start-up lines already; nothing is filtered then.

This module imports only the standard library: the package loads it before any module
that imports TensorFlow (`keras_bert_zoo/__init__.py`). The tools add to it (tools/_startup.py:
argument parsing first, and a filter of known harmless runtime lines).
"""

import os
import re
import sys
import tempfile

BANNER = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
# absl's format: severity letter, MMDD, time, thread id, file:line]
LOG_LINE = re.compile(r"^([IWEF])\d{4} [\d:.]+ +\d+ [^\]]*\] ")
NO_CUDA = re.compile(r"failed call to cuInit|Could not find cuda drivers|Unable to register cu(DNN|FFT|BLAS) factory")
LEVELS = "IWEF"
# TensorFlow's C++ info lines (oneDNN and CPU-feature notices, device placement) are off
# unless asked for: warnings and errors stay. A value the user set is kept.
DEFAULT_MIN_LOG_LEVEL = "1"


def startup_noise_filter(text, gpu_found, min_level):
    """The lines of `text` worth showing: all but TensorFlow's start-up noise (see module doc).

    Args:
        text: str. What TensorFlow wrote to stderr during its import.
        gpu_found: bool. Whether TensorFlow found a GPU (if so, "no CUDA" lines are kept).
        min_level: int. `TF_CPP_MIN_LOG_LEVEL`: log lines of a lower severity are dropped.

    Returns:
        str: the remaining lines.
    """
    kept = []
    for line in text.splitlines(keepends=True):
        match = LOG_LINE.match(line)
        if line.rstrip("\n") == BANNER:
            continue
        if match and LEVELS.index(match.group(1)) < min_level:
            continue
        if not gpu_found and NO_CUDA.search(line):
            continue
        kept.append(line)
    return "".join(kept)


def min_log_level():
    """`TF_CPP_MIN_LOG_LEVEL` as an int (0, TensorFlow's default, when unset or not a number)."""
    try:
        return int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "0"))
    except ValueError:
        return 0


def import_tensorflow_quietly():
    """Imports TensorFlow and finds its devices with the start-up noise filtered out of stderr.

    Sets `KERAS_BACKEND=tensorflow` and `TF_CPP_MIN_LOG_LEVEL=1` unless set. Where file
    descriptor 2 cannot be redirected (a process without one), TensorFlow is imported as is.

    Returns:
        the `tensorflow` module.
    """
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", DEFAULT_MIN_LOG_LEVEL)
    if "tensorflow" in sys.modules:  # imported already: its start-up lines are out
        return sys.modules["tensorflow"]
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no fd 2 (or no sys.stderr): nothing to filter
        import tensorflow as tf  # lazy: the package's first import of TensorFlow, here or filtered below

        return tf
    gpu_found = None
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            import tensorflow as tf  # lazy: imported with fd 2 captured, which must be set up first

            # Device discovery is where the cuInit error is logged; listing devices does
            # not initialise the runtime, so strategies can still be configured after.
            gpu_found = bool(tf.config.list_physical_devices("GPU"))
        finally:
            _release(saved, captured, gpu_found)
    return tf


def _release(saved, captured, gpu_found):
    """Gives fd 2 back and writes what was captured: filtered, or all of it if the import failed."""
    if sys.stderr is not None:
        sys.stderr.flush()
    os.dup2(saved, 2)
    os.close(saved)
    captured.seek(0)
    text = captured.read().decode("utf-8", "replace")
    if gpu_found is not None:  # a failed import shows everything it wrote
        text = startup_noise_filter(text, gpu_found, min_log_level())
    if text and sys.stderr is not None:
        sys.stderr.write(text)
        sys.stderr.flush()
