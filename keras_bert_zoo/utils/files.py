"""Artifact file I/O: atomic writes and sha256 hashes (archives: `utils/archives.py`).

Every file keras_bert_zoo writes as an artifact (preset directories, converted
checkpoints, cache records) goes through this module, so that a crash mid-write
never leaves a half-written file under the final name (write to a temporary name
in the same directory, then `os.replace`); what a killed write leaves behind is
removed by the next write of the same path. New files get the user's umask.
"""

import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading

_CHUNK = 1 << 20
_umask_lock = threading.Lock()


def _umask():
    """The process umask: from /proc on Linux, else by setting and restoring it (which
    another thread creating a file at that instant could notice)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def current_umask():
    """The process umask (read without changing it where the platform allows)."""
    return _umask()


def give_default_mode(path):
    """Sets a file's mode to what a new file gets under the umask (0666 - umask), for
    writers that create theirs 0600 (tempfile, safetensors)."""
    os.chmod(path, 0o666 & ~_umask())


def _temp_prefix(kind, path):
    """`.tmp-<name>-<pid>-` / `.old-<name>-<pid>-`: the pid tells a later save whether the
    writer of a leftover sibling is still running."""
    return f".{kind}-{os.path.basename(path)}-{os.getpid()}-"


def _is_stale(name, kind, base):
    """True if `name` is a `.tmp-`/`.old-` sibling of `base` whose writer is gone."""
    # tempfile's random suffixes are [a-z0-9_]; an exact match keeps `.tmp-run-2-…` (of
    # `run-2`) from being taken for a leftover of `run`.
    match = re.fullmatch(rf"\.{kind}-{re.escape(base)}-(?:(\d+)-)?[a-z0-9_]+", name)
    if match is None:
        return False
    if match.group(1) is None:
        return True  # written before the pid was part of the name
    pid = int(match.group(1))
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


def interrupted_copies(path):
    """The `.old-*` copies an interrupted save left of `path` (newest first).

    A save killed between its two renames leaves the previous version under a hidden
    `.old-<name>-…` name and nothing under `path`; these are the copies to restore.
    """
    path = os.path.abspath(os.fspath(path))
    parent, base = os.path.dirname(path), os.path.basename(path)
    if not os.path.isdir(parent):
        return []
    found = [os.path.join(parent, n) for n in os.listdir(parent) if _is_stale(n, "old", base)]
    return sorted(found, key=os.path.getmtime, reverse=True)


def interrupted_save_hint(path):
    """A sentence pointing to the copy a save killed between its two renames left of `path`
    (`.old-<name>-…`), or "" where there is none."""
    copies = interrupted_copies(path)
    if not copies:
        return ""
    absolute = os.path.abspath(os.fspath(path))
    return f" An interrupted save left its previous version at {copies[0]}: rename it to {absolute} to use it."


def remove_stale_siblings(path):
    """Removes `.tmp-*` / `.old-*` siblings of `path` left by killed writers.

    Siblings of a writer that is still running (its pid is alive) are kept. An `.old-*`
    copy is kept while `path` itself is missing: it is then the only copy.
    """
    path = os.path.abspath(os.fspath(path))
    parent, base = os.path.dirname(path), os.path.basename(path)
    if not os.path.isdir(parent):
        return []
    removed = []
    for name in os.listdir(parent):
        old = _is_stale(name, "old", base)
        if not (_is_stale(name, "tmp", base) or (old and os.path.exists(path))):
            continue
        stale = os.path.join(parent, name)
        if os.path.isdir(stale) and not os.path.islink(stale):
            shutil.rmtree(stale, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.remove(stale)
        removed.append(stale)
    return removed


def sha256_file(path):
    """Returns the hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


@contextlib.contextmanager
def atomic_path(path):
    """Yields a temporary path next to `path`; on success it replaces `path` atomically.

    On an exception the temporary file is removed and `path` is left untouched.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    remove_stale_siblings(path)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix("tmp", path), dir=directory)
    os.close(fd)
    give_default_mode(tmp)  # mkstemp creates 0600
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def atomic_write_bytes(path, data):
    """Writes `data` (bytes) to `path` atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())


def atomic_write_text(path, text):
    """Writes `text` (str, UTF-8) to `path` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path, obj):
    """Writes `obj` as indented JSON to `path` atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def read_json(path):
    """Reads a JSON file (UTF-8) and returns the object.

    Raises:
        ValueError: the file is not valid UTF-8 JSON; the message names the file.
    """
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(
            f"{os.fspath(path)} is not valid JSON ({e}). Fix the file or restore it from where it came from."
        ) from e


@contextlib.contextmanager
def atomic_directory(path, replace=True):
    """Yields a temporary directory; on success it replaces directory `path`.

    An existing `path` is moved aside first and removed only after the new
    directory is in place, so a failure at any point leaves the old one intact
    (or restores it). With `replace=False` an existing `path` that holds files is
    never replaced (another writer filled it while this one wrote): FileExistsError
    naming it, the temporary directory removed. Leftovers of a killed earlier write (`.tmp-*`, `.old-*`
    siblings whose process is gone) are removed: first, and an `.old-*` copy kept
    while `path` was missing once the new directory is in place.

    Raises:
        ValueError: `path` is an existing file, not a directory.
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.lexists(path) and not os.path.isdir(path):
        raise ValueError(
            f"`path` is an existing file, not a directory. Received: path={path!r}. "
            "Pass a new or existing directory; the file is left as it is."
        )
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    remove_stale_siblings(path)
    tmp = tempfile.mkdtemp(prefix=_temp_prefix("tmp", path), dir=parent)
    # mkdtemp creates 0700; the directory gets the mode any other new one would.
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        if not replace:
            try:
                os.rename(tmp, path)  # refuses a directory that holds files: nothing is replaced
            except OSError as e:
                if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                    raise
                raise FileExistsError(errno.EEXIST, "written by another process while this one wrote; "
                                      "left as it is", path) from None
            return
        backup = None
        if os.path.exists(path):
            backup = tempfile.mkdtemp(prefix=_temp_prefix("old", path), dir=parent)
            os.rmdir(backup)
            os.replace(path, backup)
        try:
            os.replace(tmp, path)
        except BaseException:
            if backup is not None:
                os.replace(backup, path)
            raise
        if backup is not None:
            shutil.rmtree(backup, ignore_errors=True)
        # `.old-*` copies a killed save left were kept while `path` was missing (the only copy
        # then); with the new version in place they are stale.
        remove_stale_siblings(path)
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
