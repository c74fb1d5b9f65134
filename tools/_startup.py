"""Tool start-up: parse the arguments first, then import TensorFlow without its start-up noise.

Importing TensorFlow takes seconds, so a tool imports it (and the package, which
imports it) only after `argparse` is done: `--help` and argument errors come at once.

While its C++ libraries load and look for devices, TensorFlow 2.21 writes lines that
`TF_CPP_MIN_LOG_LEVEL` does not stop, because they come before its logging is set up
or are error-level (on a CPU-only machine, TF_CPP_MIN_LOG_LEVEL=2; each of the
first three twice, once per library):

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 ... port.cc:153] oneDNN custom operations are on. You may see slightly different ...
    I0000 ... cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
    E0000 ... cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: ... UNKNOWN ERROR (303)

No environment variable silences the first three (TF_CPP_MIN_LOG_LEVEL=3 hides only the
last, and every later error with it). `import keras_bert_zoo` filters them
(`keras_bert_zoo/utils/console.py`: file descriptor 2 goes to a temporary file during the
import and the device search, and every line but these is passed on: the absl banner, log
lines below `TF_CPP_MIN_LOG_LEVEL`, and the "no CUDA" lines when no GPU was found), so a
tool's `import_tensorflow` imports the package; tools default to TF_CPP_MIN_LOG_LEVEL=2.

`run_main(main)` is every tool's `__main__`: an expected user error (a bad flag value, a missing or
unreadable file, a refused folder) prints one line, `<tool>: error: <message>`, and exits 2, as
argparse does for a bad flag; the message already names the flag or file, the place and the fix,
so the traceback would only bury it. `--debug` (or KERAS_BERT_ZOO_DEBUG=1) shows the traceback
too; any other exception is a bug and keeps its traceback. Ctrl-C prints one line and exits 130,
as a shell reports SIGINT.
"""

import atexit
import contextlib
import errno
import importlib.util
import os
import re
import signal
import sys
import threading

# Error-level lines TensorFlow 2.21's C++ runtime writes during a normal CPU run (measured in
# tools/pretrain.py), which say nothing is wrong: a tf.data NodeDef attribute its own op
# registry does not know yet, and a oneDNN int64 fallback notice.
_RUNTIME_NOISE = re.compile(rb"NodeDef mentions attribute use_unbounded_threadpool|"
                            rb"oneDNN supports DT_INT64 only on platforms with AVX-512")
_ABSL_PREFIX = re.compile(rb"^[IWEF]\d{0,4}( [\d:.]*)?$")

# The hub handles `keras_bert_zoo.presets.hubs` resolves (a copy of its schemes, so a tool checks a
# `--model` path before importing the package): not on disk until from_preset fetches them.
HUB_PREFIXES = ("hf://", "kaggle://")

DEBUG_FLAG = "--debug"
DEBUG_ENV = "KERAS_BERT_ZOO_DEBUG"
# The user errors `run_main` prints as one line. ValueError: the package's type for a bad argument,
# flag, file content or refused folder (its messages name them and the fix; JSON and UTF-8 decoding
# errors are ValueErrors too, and name the file where our readers raise them). The OSErrors of a
# path the user gave: missing, of the wrong kind, existing, not permitted. Not TypeError, KeyError
# or any other: from a tool, whose flags argparse typed, those are bugs and keep their traceback.
USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError,
               PermissionError)
# OSErrors of the place the user chose, not of our code: a read-only or full file system, a name too long.
USER_ERRNOS = (errno.EROFS, errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG)


def package_module(name):
    """A module of the package that imports only the standard library (`keras_bert_zoo.tasks`: the
    task names a tool's flags offer), loaded from its file: importing it by name would run
    `keras_bert_zoo/__init__.py` first, which imports TensorFlow. Registered under its own name, so
    the package's later imports of it find this one."""
    if name not in sys.modules:
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        spec = importlib.util.spec_from_file_location(name, os.path.join(root, *name.split(".")) + ".py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def import_tensorflow():
    """Imports TensorFlow (through the package, whose `utils/console.py` filters its start-up noise:
    the same filter for the tools and the Python API) and, from then on, filters the runtime lines
    of `filter_runtime_noise` out of stderr.

    Returns:
        the `tensorflow` module.
    """
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if "tensorflow" in sys.modules:  # imported already (a test, or the caller): nothing to filter
        return sys.modules["tensorflow"]
    with _without_optional_imports():
        import keras_bert_zoo  # noqa: F401  # lazy: after the flags parsed (start-up time); imports TensorFlow quietly
    filter_runtime_noise()
    return sys.modules["tensorflow"]


def startup_noise_filter(text, gpu_found, min_level):
    """The lines of TensorFlow's start-up output worth showing (`keras_bert_zoo.utils.console`'s filter)."""
    from keras_bert_zoo.utils.console import startup_noise_filter as package_filter  # lazy: imports TensorFlow

    return package_filter(text, gpu_found, min_level)


# Optional imports of TensorFlow's and Keras' own start-up that no tool uses: Keras'
# scikit-learn wrappers and image-gallery plot (most of the import's time on a small CPU).
# Hidden while TensorFlow imports, so those two Keras utilities stay off in a
# tool's process; importing either package later (our metrics, the demo's plots) works as usual.
_OPTIONAL = ("sklearn", "matplotlib")


@contextlib.contextmanager
def _without_optional_imports():
    hidden = [name for name in _OPTIONAL if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # `import name` raises ImportError, which Keras catches
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]


def filter_runtime_noise():
    """Drops TensorFlow's known harmless runtime lines (`_RUNTIME_NOISE`) from stderr, from now on.

    File descriptor 2 becomes a pipe read by a thread that passes everything else on at once
    (a partial line too, unless it may be the start of a log line, so progress bars keep
    moving). At exit the pipe is drained, so a traceback is never lost.
    """
    sys.stderr.flush()
    original = os.dup(2)
    read_fd, write_fd = os.pipe()
    os.dup2(write_fd, 2)
    os.close(write_fd)

    def pump():
        pending = b""
        while True:
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            out = b"".join(line + b"\n" for line in lines if not _RUNTIME_NOISE.search(line))
            if pending and not _ABSL_PREFIX.match(pending[:20]):
                out, pending = out + pending, b""
            if out:
                os.write(original, out)
        if pending:
            os.write(original, pending)
        os.close(read_fd)

    thread = threading.Thread(target=pump, name="stderr-filter", daemon=True)
    thread.start()

    def drain():
        sys.stderr.flush()
        os.dup2(original, 2)  # closes the pipe's last write end: the thread reads to the end
        thread.join(timeout=5)

    atexit.register(drain)


def is_user_error(error):
    """Whether `run_main` prints `error` as one line (see `USER_ERRORS`)."""
    return isinstance(error, USER_ERRORS) or (isinstance(error, OSError) and error.errno in USER_ERRNOS)


def error_line(error):
    """`error` as one line: its message (an OSError's reason and path), newlines folded."""
    if isinstance(error, OSError) and error.strerror:
        text = f"{error.strerror}: {error.filename}" if error.filename else error.strerror
    else:
        text = str(error) or type(error).__name__
    return " ".join(text.split())


class _Interrupts:
    """Counts the Ctrl-Cs (SIGINT) a tool received. A library's bare `except:` can catch the
    KeyboardInterrupt and raise another error in its place (TensorFlow's `DType.max`, reached while
    a layer is built, turns it into "TypeError: Cannot find maximum value of <dtype: 'int32'>"):
    an error after a Ctrl-C is the interrupt's, not a bug to show as a traceback."""

    count = 0

    @classmethod
    def handler(cls, signum, frame):
        cls.count += 1
        signal.default_int_handler(signum, frame)  # raises KeyboardInterrupt, as without this handler


@contextlib.contextmanager
def _counting_interrupts():
    """Counts SIGINTs while `main` runs where Python's own handler would take them (the main thread, the
    handler not replaced or ignored); the handler before is put back after."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    signal.signal(signal.SIGINT, _Interrupts.handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _exit_interrupted(prog):
    sys.stderr.flush()
    sys.stderr.write(f"\n{prog or os.path.basename(sys.argv[0])}: interrupted (Ctrl-C): stopped where it was; "
                     "what it wrote before is kept, and a rerun of the same command says what that is "
                     f"(add {DEBUG_FLAG} for the traceback)\n")
    sys.stderr.flush()
    sys.exit(130)


def run_main(main, argv=None, prog=None):
    """Runs a tool's `main(argv)`; a user error (`is_user_error`) prints one line and exits 2; a Ctrl-C
    prints one line and exits 130, also where a library caught its KeyboardInterrupt and raised
    another error instead.

    `--debug` (anywhere in the arguments; removed before `main` sees them) or the environment
    variable KERAS_BERT_ZOO_DEBUG=1 lets the error's traceback through as well.

    Args:
        main: callable `(argv) -> result`: the tool's `main`.
        argv: list of str, or None for `sys.argv[1:]`.
        prog: str. The tool's name in the error line (default: the script's file name).

    Returns:
        what `main` returned.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    argv = [arg for arg in argv if arg != DEBUG_FLAG]
    interrupts = _Interrupts.count
    try:
        with _counting_interrupts():
            return main(argv)
    except KeyboardInterrupt:
        if debug:
            raise
        _exit_interrupted(prog)
    except Exception as e:  # noqa: BLE001 (re-raised unless it is a user error or came of a Ctrl-C)
        if not debug and _Interrupts.count > interrupts:
            _exit_interrupted(prog)  # a library caught the KeyboardInterrupt and raised `e` instead
        if debug or not is_user_error(e):
            raise
        sys.stderr.flush()
        sys.stderr.write(f"{prog or os.path.basename(sys.argv[0])}: error: {error_line(e)} "
                         f"(add {DEBUG_FLAG} for the traceback)\n")
        sys.stderr.flush()
        sys.exit(2)
