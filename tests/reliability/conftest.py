"""What the issue-57 reliability tests share: the tools run as a user runs them (a subprocess per
command, real signals), a tiny preset and GLUE files, and a real full file system (a tmpfs)."""

import os
import subprocess
import sys
import time

import pytest

from tests.helpers import sigint_at_default
from tests.tools.test_finetune import _argv, _sst2, _tiny_preset

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow", TF_NUM_INTRAOP_THREADS="1",
           TF_NUM_INTEROP_THREADS="1", PYTHONPATH=ROOT)
ENV.pop("KERAS_BERT_ZOO_DEBUG", None)


def tool(name, *args, **popen):
    """`tools/<name>.py args` started as a user starts it from a terminal (a Popen: stdout and stderr
    piped, text; SIGINT at its default)."""
    return subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", f"{name}.py"), *map(str, args)], cwd=ROOT,
                            env=popen.pop("env", ENV), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_at_default, **popen)


def run(name, *args, timeout=300, **popen):
    """`tool(...)` run to its end: `(exit status, stdout, stderr)`."""
    process = tool(name, *args, **popen)
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        if process.poll() is None:
            process.kill()
    return process.returncode, out, err


def one_error_line(err, name):
    """The single `<tool>.py: error: ...` line of a refused command (no traceback anywhere)."""
    assert "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if line.startswith(f"{name}.py: error: ")]
    assert len(lines) == 1, err[-3000:]
    return lines[0]


def finetune_args(train, dev, preset, out, *more, epochs=1):
    """tools/finetune.py's flags of a tiny SST-2 run (tests/tools/test_finetune.py's)."""
    args = _argv("sst2", train, dev, preset, out, *more)
    args[args.index("--epochs") + 1] = str(epochs)
    return args


def wait_for(predicate, timeout=240, what="the condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise TimeoutError(f"{what} did not happen in {timeout} s")


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    return _tiny_preset(tmp_path_factory.mktemp("presets"))


@pytest.fixture
def sst2(tmp_path):
    """`(train, dev, test)` tiny SST-2 files."""
    return _sst2(tmp_path)


@pytest.fixture
def tmpfs(tmp_path):
    """`mount(path, size)`: a real file system of `size` bytes at `path` (a tmpfs; needs root), unmounted
    after the test."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root here")
    mounted = []

    def mount(path, size):
        os.makedirs(path, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True,
                              text=True)
        if done.returncode:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(str(path))
        return str(path)

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", path], capture_output=True)


def fill(path):
    """Fills the file system of folder `path` to its last byte; returns the filler file."""
    filler = os.path.join(path, "filler")
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler
