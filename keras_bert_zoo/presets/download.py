"""The download cache: where preset files live, how they are fetched and verified.

The cache is `~/.cache/keras_bert_zoo` (override: env `KERAS_BERT_ZOO_CACHE`), created
by the package; if it cannot be created the load fails, naming the directory — there
is no silent fallback to /tmp. Downloads stream into a temporary file next to the
target, are checked for size and sha256, and only then renamed into place; they give
up after an overall deadline or a stall, and print their progress.
"""

import hashlib
import os
import sys
import time
import urllib.error
import urllib.request

from keras_bert_zoo.utils import files

CACHE_ENV = "KERAS_BERT_ZOO_CACHE"
OFFLINE_ENV = "KERAS_BERT_ZOO_OFFLINE"
DEADLINE_ENV = "KERAS_BERT_ZOO_DOWNLOAD_TIMEOUT"
DEFAULT_DEADLINE_S = 3600.0
_CHUNK = 1 << 20


class PresetNotAvailableError(RuntimeError):
    """A preset's files are neither cached nor downloadable (offline or no network)."""


class IntegrityError(ValueError):
    """A downloaded or cached file does not match its recorded size or sha256."""


def _cache_path():
    return os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "keras_bert_zoo")


def cache_dir():
    """Returns the cache directory, creating it.

    Raises:
        OSError: the directory cannot be created; the message names it and the env var.
    """
    path = _cache_path()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise OSError(
            f"Cannot create the keras_bert_zoo cache directory {path!r} ({e}). Set {CACHE_ENV} "
            "to a writable directory."
        ) from e
    return path


def is_offline():
    """True when env `KERAS_BERT_ZOO_OFFLINE` is set to 1/true/yes."""
    return os.environ.get(OFFLINE_ENV, "").strip().lower() in ("1", "true", "yes")


def how_to_supply(name, url, archive_path, sha256=None):
    """The message telling a user how to provide a preset's files by hand.

    Without a published sha256 the placed file cannot be checked against the original:
    its hash is recorded on first use and checked on every later load (trust on first use).
    """
    if sha256:
        check = f"it is checked against the published sha256 {sha256}"
    else:
        check = (
            "no sha256 is published for it, so it is trusted on first use: its hash is recorded "
            "then and checked on every later load; get it from that address only"
        )
    return (
        f"The files of preset {name!r} are not in the cache and cannot be downloaded. "
        f"Either download {url} yourself and place it at {archive_path} ({check}), or pass "
        "the path of a local directory or zip in Google's, HF's or our layout instead of the "
        f"name. ({OFFLINE_ENV}=1 forbids downloads; unset it to allow them.)"
    )


def is_in_cache(path):
    """True if `path` lies inside the cache's preset directory (files there can be refetched)."""
    root = os.path.realpath(os.path.join(_cache_path(), "presets"))  # not created: a read-only home is fine
    return os.path.commonpath([os.path.realpath(path), root]) == root


def check_file(path, sha256=None, size=None, remove=True):
    """Verifies a file's size and sha256; on mismatch removes it (by default) and raises.

    Returns:
        The actual sha256.

    Raises:
        IntegrityError: naming the file, the expected and the actual values.
    """
    actual_size = os.path.getsize(path)
    if size is not None and actual_size != int(size):
        if remove:
            os.remove(path)
        raise IntegrityError(
            f"{path}: size {actual_size} bytes, expected {size}. The file was removed"
            f"{'' if remove else ' (not)'}; load again to fetch it afresh."
        )
    actual = files.sha256_file(path)
    if sha256 is not None and actual != sha256:
        if remove:
            os.remove(path)
        raise IntegrityError(
            f"{path}: sha256 mismatch. Expected sha256 {sha256}, actual sha256 {actual}. "
            f"The file {'was removed' if remove else 'is corrupt'}; load again to fetch or "
            "rebuild it."
        )
    return actual


def _deadline_from_env():
    value = os.environ.get(DEADLINE_ENV, "").strip()
    try:
        return float(value) if value else DEFAULT_DEADLINE_S
    except ValueError as e:
        raise ValueError(f"{DEADLINE_ENV} must be a number of seconds. Received: {value!r}.") from e


class _Progress:
    """Progress lines on stderr, at most one every `every` seconds, and one at the end."""

    def __init__(self, name, total, enabled, every=5.0):
        self.name, self.total, self.enabled, self.every = name, total, enabled, every
        self.start = self.last = time.monotonic()

    def update(self, received, done=False):
        now = time.monotonic()
        if not self.enabled or (not done and now - self.last < self.every):
            return
        self.last = now
        rate = received / max(now - self.start, 1e-6) / 1e6
        of = f" of {self.total / 1e6:.1f} MB ({100 * received / self.total:.0f}%)" if self.total else ""
        state = "downloaded" if done else "downloading"
        print(f"{self.name}: {state} {received / 1e6:.1f} MB{of}, {rate:.2f} MB/s", file=sys.stderr, flush=True)


def _read_some(response, stall_timeout):
    """The bytes that have arrived (up to 1 MiB); read(n) would wait for all n of them,
    so with read1 the deadline is checked at least every `stall_timeout` seconds."""
    try:
        return getattr(response, "read1", response.read)(_CHUNK)
    except TimeoutError as e:
        raise TimeoutError(f"no byte arrived for {stall_timeout:g} s (stall_timeout)") from e


def download(url, path, sha256=None, size=None, name=None, timeout=None, stall_timeout=30.0, progress=True):
    """Downloads `url` to `path`, verifying size and sha256 before it appears there.

    The file streams into a temporary `.tmp-*` sibling that is removed on any error or
    interrupt (and, if the process is killed, by the next write of `path`).

    Args:
        url: str. HTTP(S) or file URL.
        path: str. Destination.
        sha256: str or None. Expected hex digest.
        size: int or None. Expected size in bytes.
        name: str or None. Preset name, for messages.
        timeout: float or None. Overall deadline in seconds for the whole download (a
            server that trickles bytes is given up on). None: env
            `KERAS_BERT_ZOO_DOWNLOAD_TIMEOUT`, else 3600.
        stall_timeout: float. Seconds without a single byte after which the download is
            given up. Defaults to 30.
        progress: bool. Print progress to stderr (every five seconds, and at the end). Defaults to True.

    Returns:
        The sha256 of the downloaded file.

    Raises:
        PresetNotAvailableError: offline mode, the network or server failed, or a deadline passed.
        IntegrityError: size or sha256 mismatch (nothing is kept).
    """
    name = name or url
    if is_offline():
        raise PresetNotAvailableError(how_to_supply(name, url, path, sha256))
    deadline = _deadline_from_env() if timeout is None else float(timeout)
    digest = hashlib.sha256()
    received = 0
    start = time.monotonic()
    with files.atomic_path(path) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=stall_timeout) as response, open(tmp, "wb") as out:
                total = size or int(getattr(response, "headers", {}).get("Content-Length") or 0)
                bar = _Progress(name, total, progress)
                for chunk in iter(lambda: _read_some(response, stall_timeout), b""):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
                    bar.update(received)
                    if time.monotonic() - start > deadline:
                        raise TimeoutError(
                            f"the overall deadline of {deadline:g} s passed with {received:,} bytes received "
                            f"(timeout=… or env {DEADLINE_ENV} sets it)"
                        )
                bar.update(received, done=True)
        except (urllib.error.URLError, OSError) as e:
            raise PresetNotAvailableError(f"Download of {url} failed ({e}). " + how_to_supply(name, url, path, sha256)) from e
        actual = digest.hexdigest()
        if size is not None and received != int(size):
            raise IntegrityError(f"Download of {url}: {received} bytes, expected {size}. Nothing was kept.")
        if sha256 is not None and actual != sha256:
            raise IntegrityError(
                f"Download of {url}: expected sha256 {sha256}, actual sha256 {actual}. Nothing was kept."
            )
    return actual
