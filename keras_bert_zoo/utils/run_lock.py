"""`FolderLock`: one run at a time in an output folder, proven by the kernel, not by a check.

Two runs started together into one folder would both find it empty, both claim it and mix or
delete each other's files. A check of the folder cannot tell them apart; a lock can: the run
holds `flock` on a hidden file in the folder (`LOCK_FILE`) for as long as it writes there, and
a second run is refused at once, naming the first's process id and command line (written into
the lock file by its holder). The kernel releases the lock when its holder exits, killed or
not, so a dead run never blocks a folder, and a run record that says "running" while nobody
holds the lock is a run that was interrupted.

The lock file stays in the folder (removing it while held would let a third run lock a new
file of the same name); no run lists it as its own, and a folder the lock made is removed again
when a refused run lets go of it.
"""

import contextlib
import errno
import fcntl
import os
import sys

LOCK_FILE = ".keras_bert_zoo.lock"


def lock_holder(folder):
    """What the lock file of `folder` says about its holder: `"pid N (command)"`, or "" where
    it says nothing."""
    try:
        with open(os.path.join(os.fspath(folder), LOCK_FILE), encoding="utf-8", errors="replace") as f:
            pid, _, command = f.read(4096).partition("\n")
    except OSError:
        return ""
    pid = pid.strip()
    return f"pid {pid} ({command.strip()})" if pid.isdigit() else ""


def is_locked(folder):
    """Whether a live process holds the lock of `folder` now (False where there is no lock file)."""
    path = os.path.join(os.fspath(folder), LOCK_FILE)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as e:
        return e.errno in (errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)  # closing releases a shared lock this call took
    return False


class FolderLock:
    """An exclusive lock on an output folder for the life of a run (see the module docstring).

    Args:
        folder: str. The output folder (made if missing; removed again by `release` if the
            lock made it and nothing else was written there).
        flag: str. What names the folder to the user (`--output-dir`).

    Examples:
    >>> lock = FolderLock("runs/example", "--output-dir").acquire()
    >>> lock.release()
    """

    def __init__(self, folder, flag):
        self.folder = os.path.abspath(os.fspath(folder))
        self.flag = flag
        self.fd = None
        self.made = []

    def acquire(self):
        """Takes the lock, or raises ValueError naming the process that holds it. Returns self."""
        parent, missing = self.folder, []
        while not os.path.isdir(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        for path in reversed(missing):
            os.mkdir(path)
            self.made.append(path)
        fd = os.open(os.path.join(self.folder, LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = lock_holder(self.folder) or "another process"
            raise ValueError(
                f"{self.flag} {self.folder} is in use: {holder} is writing there now (it holds "
                f"{os.path.join(self.folder, LOCK_FILE)}). Wait for that run to finish, or pass another "
                f"{self.flag}.") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n{' '.join(sys.argv)[:2000]}\n".encode("utf-8", "replace"))
        self.fd = fd
        return self

    def release(self, remove_if_empty=False):
        """Lets go of the lock. With `remove_if_empty` (a run refused before it wrote anything),
        the lock file and the folders `acquire` made are removed where nothing else is in them."""
        if self.fd is None:
            return
        if remove_if_empty and self.made and os.listdir(self.folder) == [LOCK_FILE]:
            with contextlib.suppress(OSError):
                os.remove(os.path.join(self.folder, LOCK_FILE))
            for path in reversed(self.made):
                with contextlib.suppress(OSError):
                    os.rmdir(path)
        os.close(self.fd)
        self.fd = None

    def __enter__(self):
        return self if self.fd is not None else self.acquire()

    def __exit__(self, kind, value, traceback):
        self.release(remove_if_empty=kind is not None)
