"""Safe archive extraction: every member is checked before anything is written.

Unsafe archives are refused whole (R14): members with absolute paths or `..`,
links out of the tree, devices, and zip bombs (a size or ratio limit). Extraction
goes through `files.atomic_directory`, so a failure leaves no partial tree.
"""

import os
import pathlib
import stat
import tarfile
import zipfile

from keras_bert_zoo.utils import files

# Limits of `safe_extract` (zip bombs): the total size the members would unpack to, and
# that size over the archive's own size. Real checkpoint archives hold float tensors,
# which deflate barely compresses (ratio ~1.1); the ratio applies above a floor so that
# small, very compressible archives (a vocabulary, configs) are never refused.
MAX_EXTRACT_BYTES = 64 << 30
MAX_EXTRACT_RATIO = 100
_RATIO_FLOOR_BYTES = 64 << 20


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


def _check_size(archive, total):
    """Raises ValueError if the members would unpack to more than the limits allow (zip bombs)."""
    packed = max(os.path.getsize(archive), 1)
    ratio = total / packed
    if total > MAX_EXTRACT_BYTES or (total > _RATIO_FLOOR_BYTES and ratio > MAX_EXTRACT_RATIO):
        raise ValueError(
            f"Refusing archive {archive}: its members would unpack to {total:,} bytes, "
            f"{ratio:,.0f} times its size of {packed:,} bytes (a zip bomb?). The limits are "
            f"MAX_EXTRACT_BYTES={MAX_EXTRACT_BYTES:,} bytes in all and MAX_EXTRACT_RATIO="
            f"{MAX_EXTRACT_RATIO} times the archive's size above {_RATIO_FLOOR_BYTES:,} bytes "
            "(keras_bert_zoo.utils.archives). Nothing was extracted."
        )


def safe_extract(archive, target):
    """Extracts a zip or tar archive into `target`, refusing it whole if any member is unsafe.

    Unsafe members (R14): absolute paths, `..` components, symbolic links in a zip,
    symbolic or hard links in a tar pointing outside `target`, devices; an archive
    that would unpack to more than `MAX_EXTRACT_BYTES`, or to more than
    `MAX_EXTRACT_RATIO` times its own size (a zip bomb), is refused too. All members
    are checked before the first byte is written; extraction goes to a temporary
    directory that replaces `target` only when complete.

    Args:
        archive: str. Path of a `.zip`, `.tar`, `.tar.gz` or `.tgz` file.
        target: str. Directory to create (replaced if it exists).

    Returns:
        The target directory.

    Raises:
        ValueError: an unsafe member (named), a size over the limits (named), or an
            unknown archive type.
    """
    archive = os.fspath(archive)
    target = os.path.abspath(os.fspath(target))
    with files.atomic_directory(target) as tmp:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                _check_zip(archive, zf, tmp)
                # zipfile stops each member at its declared size, so the sum bounds the output.
                _check_size(archive, sum(info.file_size for info in zf.infolist()))
                zf.extractall(tmp)
        elif tarfile.is_tarfile(archive):
            with tarfile.open(archive) as tf:
                _check_tar(archive, tf, tmp)
                _check_size(archive, sum(member.size for member in tf.getmembers() if member.isfile()))
                tf.extractall(tmp, filter="tar")
        else:
            raise ValueError(
                f"`archive` is neither a zip nor a tar file. Received: archive={archive!r}. "
                "Pass a .zip or .tar.gz of the checkpoint directory."
            )
    return target
