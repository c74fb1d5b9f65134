"""Free space checked before a run starts, against what the run will write.

A write probe (an empty file made and removed) passes on a full disk: creating a file needs an
inode, not a block. So a run that ends in a save also asks the file system how much it has free
(`shutil.disk_usage`) and compares that with what it will write (a model's weights are its
parameter count times 4 bytes in float32, whatever else the run writes is small beside them),
before its first step. Outputs on one file system are added up. The margin leaves room for what
the estimate leaves out (a SavedModel's graph, predictions files, the file system's own blocks).
"""

import os
import shutil

MARGIN = 1.1  # the estimate's share that is asked on top
MARGIN_BYTES = 4 << 20  # and a few MB for the small files around the weights


def megabytes(count):
    """`count` bytes as "12.3 MB" (or "45.6 kB" below a tenth of a megabyte)."""
    return f"{count / 1e6:.1f} MB" if count >= 100_000 else f"{count / 1e3:.1f} kB"


def _existing(path):
    path = os.path.abspath(os.fspath(path))
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return path


def check_free_space(needs):
    """Refuses a run whose outputs would not fit on their file systems.

    Args:
        needs: list of `(flag, path, bytes, what)`: an output folder (it need not exist yet), the
            bytes the run will write there and what they are ("the fine-tuned preset"). A None
            path is skipped.

    Raises:
        ValueError: naming the flag(s), the folder, the space free, the space needed and the fix.
    """
    by_device = {}
    for flag, path, count, what in needs:
        if path is None:
            continue
        where = _existing(path)
        entry = by_device.setdefault(os.stat(where).st_dev, {"where": where, "parts": []})
        entry["parts"].append((flag, os.path.abspath(os.fspath(path)), int(count), what))
    for entry in by_device.values():
        total = sum(count for _, _, count, _ in entry["parts"])
        needed = int(total * MARGIN) + MARGIN_BYTES
        free = shutil.disk_usage(entry["where"]).free
        if free >= needed:
            continue
        parts = "; ".join(f"{flag} {path}: {what}, about {megabytes(count)}"
                          for flag, path, count, what in entry["parts"])
        flags = " / ".join(flag for flag, _, _, _ in entry["parts"])
        raise ValueError(
            f"{flags}: the file system of {entry['where']} has {megabytes(free)} free; this run will write about "
            f"{megabytes(needed)} there ({parts}; with {MARGIN - 1:.0%} and {megabytes(MARGIN_BYTES)} of margin), "
            "so its save would fail after the training. Free space there, or pass a folder on another file system.")
