"""Artifact file I/O: atomic writes, sha256 hashes and safe archive extraction.

Every file keras_bert_zoo writes as an artifact (preset directories, converted
checkpoints, cache records) goes through this module, so that a crash mid-write
never leaves a half-written file under the final name (write to a temporary name
in the same directory, then `os.replace`), and every archive is checked member
by member before anything is written (R14).
"""

import contextlib
import hashlib
import json
import os
import pathlib
import shutil
import stat
import tarfile
import tempfile
import zipfile

_CHUNK = 1 << 20


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
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=directory)
    os.close(fd)
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
    """Reads a JSON file (UTF-8) and returns the object."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@contextlib.contextmanager
def atomic_directory(path):
    """Yields a temporary directory; on success it replaces directory `path`.

    An existing `path` is moved aside first and removed only after the new
    directory is in place, so a failure at any point leaves the old one intact
    (or restores it).
    """
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=parent)
    try:
        yield tmp
        backup = None
        if os.path.exists(path):
            backup = tempfile.mkdtemp(prefix=".old-" + os.path.basename(path) + "-", dir=parent)
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
    finally:
        if os.path.exists(tmp):
            shutil.rmtree(tmp, ignore_errors=True)


def _check_member_path(archive, name, target):
    """Raises ValueError if the member `name` would land outside `target`."""
    if not name or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        raise ValueError(
            f"Refusing archive {archive}: member {name!r} has an absolute path. "
            "Nothing was extracted; repack the archive with relative paths."
        )
    parts = pathlib.PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        raise ValueError(
            f"Refusing archive {archive}: member {name!r} points outside the extraction "
            "directory ('..'). Nothing was extracted."
        )
    resolved = os.path.realpath(os.path.join(target, name))
    if os.path.commonpath([resolved, os.path.realpath(target)]) != os.path.realpath(target):
        raise ValueError(f"Refusing archive {archive}: member {name!r} escapes the target directory.")


def _zip_is_link(info):
    mode = info.external_attr >> 16
    return stat.S_ISLNK(mode)


def _check_zip(archive, zf, target):
    for info in zf.infolist():
        _check_member_path(archive, info.filename, target)
        if _zip_is_link(info):
            raise ValueError(
                f"Refusing archive {archive}: member {info.filename!r} is a symbolic link. "
                "Nothing was extracted."
            )


def _check_tar(archive, tf, target):
    for member in tf.getmembers():
        _check_member_path(archive, member.name, target)
        if member.issym() or member.islnk():
            link = member.linkname
            base = os.path.dirname(member.name) if member.issym() else ""
            joined = os.path.normpath(os.path.join(target, base, link))
            inside = os.path.commonpath([joined, os.path.abspath(target)]) == os.path.abspath(target)
            if os.path.isabs(link) or not inside:
                kind = "symbolic link" if member.issym() else "hard link"
                raise ValueError(
                    f"Refusing archive {archive}: member {member.name!r} is a {kind} to "
                    f"{link!r}, outside the extraction directory. Nothing was extracted."
                )
        elif not (member.isfile() or member.isdir()):
            raise ValueError(
                f"Refusing archive {archive}: member {member.name!r} is a device or FIFO."
            )


def safe_extract(archive, target):
    """Extracts a zip or tar archive into `target`, refusing it whole if any member is unsafe.

    Unsafe members (R14): absolute paths, `..` components, symbolic links in a zip,
    symbolic or hard links in a tar pointing outside `target`, devices. All members
    are checked before the first byte is written; extraction goes to a temporary
    directory that replaces `target` only when complete.

    Args:
        archive: str. Path of a `.zip`, `.tar`, `.tar.gz` or `.tgz` file.
        target: str. Directory to create (replaced if it exists).

    Returns:
        The target directory.

    Raises:
        ValueError: an unsafe member (named) or an unknown archive type.
    """
    archive = os.fspath(archive)
    target = os.path.abspath(os.fspath(target))
    with atomic_directory(target) as tmp:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                _check_zip(archive, zf, tmp)
                zf.extractall(tmp)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tf:
                _check_tar(archive, tf, tmp)
                tf.extractall(tmp, filter="tar")
        else:
            raise ValueError(
                f"`archive` is neither a zip nor a tar file. Received: archive={archive!r}. "
                "Pass a .zip or .tar.gz of the checkpoint directory."
            )
    return target
