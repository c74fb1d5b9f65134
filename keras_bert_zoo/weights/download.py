"""The download cache: where preset files live, how they are fetched and verified.

The cache is `~/.cache/keras_bert_zoo` (override: env `KERAS_BERT_ZOO_CACHE`), created
by the package; if it cannot be created the load fails, naming the directory — there
is no silent fallback to /tmp. Downloads stream into a temporary file next to the
target, are checked for size and sha256, and only then renamed into place.
"""

import hashlib
import os
import urllib.error
import urllib.request

from keras_bert_zoo.utils import files

CACHE_ENV = "KERAS_BERT_ZOO_CACHE"
OFFLINE_ENV = "KERAS_BERT_ZOO_OFFLINE"
_CHUNK = 1 << 20


class PresetNotAvailableError(RuntimeError):
    """A preset's files are neither cached nor downloadable (offline or no network)."""


class IntegrityError(ValueError):
    """A downloaded or cached file does not match its recorded size or sha256."""


def cache_dir():
    """Returns the cache directory, creating it.

    Raises:
        OSError: the directory cannot be created; the message names it and the env var.
    """
    path = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "keras_bert_zoo")
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


def how_to_supply(name, url, archive_path):
    """The message telling a user how to provide a preset's files by hand."""
    return (
        f"The files of preset {name!r} are not in the cache and cannot be downloaded. "
        f"Either download {url} yourself and place it at {archive_path} (it is verified on "
        "first use), or pass the path of a local directory or zip in Google's, HF's or our "
        f"layout instead of the name. ({OFFLINE_ENV}=1 forbids downloads; unset it to allow them.)"
    )


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


def download(url, path, sha256=None, size=None, name=None, timeout=60):
    """Downloads `url` to `path`, verifying size and sha256 before it appears there.

    Args:
        url: str. HTTP(S) or file URL.
        path: str. Destination.
        sha256: str or None. Expected hex digest.
        size: int or None. Expected size in bytes.
        name: str or None. Preset name, for messages.
        timeout: float. Socket timeout in seconds.

    Returns:
        The sha256 of the downloaded file.

    Raises:
        PresetNotAvailableError: offline mode, or the network or server failed.
        IntegrityError: size or sha256 mismatch (nothing is kept).
    """
    name = name or url
    if is_offline():
        raise PresetNotAvailableError(how_to_supply(name, url, path))
    digest = hashlib.sha256()
    received = 0
    with files.atomic_path(path) as tmp:
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response, open(tmp, "wb") as out:
                for chunk in iter(lambda: response.read(_CHUNK), b""):
                    out.write(chunk)
                    digest.update(chunk)
                    received += len(chunk)
        except (urllib.error.URLError, OSError) as e:
            raise PresetNotAvailableError(f"Download of {url} failed ({e}). " + how_to_supply(name, url, path)) from e
        actual = digest.hexdigest()
        if size is not None and received != int(size):
            raise IntegrityError(f"Download of {url}: {received} bytes, expected {size}. Nothing was kept.")
        if sha256 is not None and actual != sha256:
            raise IntegrityError(
                f"Download of {url}: expected sha256 {sha256}, actual sha256 {actual}. Nothing was kept."
            )
    return actual
