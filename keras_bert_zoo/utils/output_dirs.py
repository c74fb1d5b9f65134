"""The folders a tool writes into, checked before its first step and claimed by a run record.

A run must not fail at its end because it cannot write, must not write one output inside another
(an export is replaced as a whole and would take a preset with it), and must never mix its files
with an earlier run's, nor delete files it did not write. So, before a model is built:

- `check_writable`: makes the folder, writes and removes a probe file, then removes the folders
  it made, so a read-only or impossible path fails now, naming the flag (no trace is left);
- `check_separate`: refuses output paths that are equal or nested, naming both;
- `check_run_dir`: a folder that holds files is refused unless they are a recorded earlier run
  (`RUN_RECORD`, written by `claim_run_dir` / `finish_run_dir`) and the caller passes `overwrite`
  (the tools' `--overwrite`). Files no run recorded (the user's, or a run of a version before the
  record) are refused even with `overwrite` and left alone: only a person may decide to delete them;
- (an export's own folder is checked by `keras_bert_zoo.serving.export.export_target`: it writes only
  its SavedModel, or a new TF Serving version folder, and replaces only an earlier export, with `overwrite`);
- `claim_run_dir`, once every other check passed: removes the previous run's recorded files and
  writes the record as "running", so old and new files are never mixed; `finish_run_dir` records
  the files the run wrote.

A run holds its folder's lock (`utils/run_lock.FolderLock`) from before these checks to its end,
so two runs never write one folder. A run killed before `finish_run_dir` leaves its record
"running" while nobody holds the lock: an interrupted run. Only the names it said it would write
(the record's `planned`, and their `.tmp-`/`.old-` siblings) are taken as its files; anything else
(a user's notes added since) is refused as files no run recorded. An interrupted run that wrote
nothing is no work to lose: its record is replaced without `overwrite`. A run's inputs (a
`--preset` or data file inside the folder) are never among the files `overwrite` removes: such a
run is refused before anything is deleted.
"""

import contextlib
import os
import re
import shutil
import tempfile

from keras_bert_zoo.utils.files import atomic_write_json, read_json
from keras_bert_zoo.utils.run_lock import LOCK_FILE, FolderLock

RUN_RECORD = "run_files.json"


def existing_ancestor(path):
    """`path`, or its nearest ancestor that exists (absolute)."""
    path = os.path.abspath(os.fspath(path))
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return path


def inside(path, other):
    """Whether `path` is `other` or lies inside it (symbolic links resolved)."""
    path, other = os.path.realpath(os.fspath(path)), os.path.realpath(os.fspath(other))
    return path == other or path.startswith(other.rstrip(os.sep) + os.sep)


def check_writable(path, flag):
    """Refuses a folder the run could not create or write, by trying: makes it, writes and
    removes a probe file, then removes the folders it made (a permission check alone would
    pass a root user on a read-only mount, and miss a full or read-only file system).

    Args:
        path: str. The folder.
        flag: str. What names it to the user (`--output-dir`, `output_dir`).

    Raises:
        ValueError: `path` or an ancestor is a file, or the folder cannot be made or written;
            naming `flag`, the path and the fix.
    """
    path = os.path.abspath(os.fspath(path))
    ancestor = existing_ancestor(path)
    if os.path.islink(ancestor) and not os.path.exists(ancestor):
        where = "" if ancestor == path else f" ({ancestor}, on its way)"
        raise ValueError(f"{flag} is a symbolic link{where} to {os.readlink(ancestor)!r}, which does not exist. "
                         f"Received: {flag}={path!r}. Create the link's target, or pass another folder.")
    if not os.path.isdir(ancestor):
        what = "is an existing file" if ancestor == path else f"is inside the file {ancestor}"
        raise ValueError(f"{flag} {what}, not a folder. Received: {flag}={path!r}. Pass a folder path.")
    missing, parent = [], path
    while parent != ancestor:
        missing.append(parent)
        parent = os.path.dirname(parent)
    made = []
    try:
        for folder in reversed(missing):
            os.mkdir(folder)
            made.append(folder)
        fd, probe = tempfile.mkstemp(prefix=".write-probe-", dir=path)
        os.close(fd)
        os.remove(probe)
    except OSError as e:
        raise ValueError(f"{flag} cannot be written: {e.strerror} ({e.filename or path}). Received: "
                         f"{flag}={path!r}. Pass a folder this user can create and write, or fix its "
                         "permissions.") from e
    finally:
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(folder)


def lock_run_dir(path, flag):
    """`check_writable`, then the folder's `FolderLock`, taken (a context manager: released at the
    end of the `with`, the folder removed again if the lock made it and the run wrote nothing)."""
    check_writable(path, flag)
    return FolderLock(path, flag).acquire()


def check_separate(paths):
    """Refuses output folders that are the same or nested (a run replaces some of its outputs
    as a whole, and each must hold only its own files).

    Args:
        paths: list of `(flag, path)`; a None path is skipped.

    Raises:
        ValueError: naming both flags and paths.
    """
    given = [(flag, os.fspath(path)) for flag, path in paths if path is not None]
    for i, (flag_a, a) in enumerate(given):
        for flag_b, b in given[i + 1:]:
            if inside(a, b) or inside(b, a):
                how = ("are the same folder" if inside(a, b) and inside(b, a) else
                       f"overlap ({flag_a} is inside {flag_b})" if inside(a, b) else
                       f"overlap ({flag_b} is inside {flag_a})")
                raise ValueError(f"{flag_a} and {flag_b} {how}: one would replace or mix with the other's files. "
                                 f"Received: {flag_a}={a!r}, {flag_b}={b!r}. Pass separate folders.")


def read_run_record(path):
    """The run record of folder `path` (a dict), or None without one.

    Raises:
        ValueError: the record is not valid JSON or not a record, naming the file.
    """
    record_path = os.path.join(os.fspath(path), RUN_RECORD)
    if not os.path.isfile(record_path):
        return None
    record = read_json(record_path)
    if not (isinstance(record, dict) and isinstance(record.get("files"), list) and "tool" in record):
        raise ValueError(f"{record_path} is not a run record (a JSON object with 'tool' and 'files'). Restore it, "
                         "or move the folder's files away by hand.")
    return record


def _listing(names, limit=6):
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _planned_by(name, planned):
    """Whether `name` is one the run said it would write, or a `.tmp-`/`.old-` sibling of one."""
    return name in planned or any(re.fullmatch(rf"\.(?:tmp|old)-{re.escape(p)}-(?:\d+-)?[a-z0-9_]+", name)
                                  for p in planned)


def _check_inputs(path, remove, inputs):
    """Refuses a run whose input lies among the files `remove` would delete from folder `path`."""
    for flag, value in inputs:
        if value is None or not os.path.lexists(os.fspath(value)):
            continue  # a registry name, a tfds split, a handle: nothing of the folder
        for name in remove:
            target = os.path.join(path, name)
            if inside(value, target) or os.path.abspath(os.fspath(value)) == target:
                raise ValueError(
                    f"{flag} {value} is {name!r} of the previous run in {path}, which --overwrite would remove "
                    f"before this run reads it. Copy it out first (e.g. cp -r {target} {path}-{name}) and pass "
                    f"that copy as {flag}, or pass another --output-dir.")


def check_run_dir(path, flag, tool, overwrite=False, resume=None, inputs=()):
    """Checks that a run may write into folder `path`; changes nothing (see the module docstring).

    The caller holds the folder's `FolderLock`: a record that says "running" is then an
    interrupted run's.

    Args:
        path: str. The run's output folder.
        flag: str. Its flag, for messages (`--output-dir`).
        tool: str. The tool whose run this is (`finetune`, `tune`), stored in the record.
        overwrite: bool. Whether a previous recorded run's files may be removed.
        resume: callable `(record) -> bool` or None: True where the previous run is the one this
            run continues (a search's resume), whose files are then kept.
        inputs: `(flag, path)` pairs the run reads (`--preset`, `--train-file`, ...): refused
            where one is among the files `overwrite` would remove.

    Returns:
        dict: the plan for `claim_run_dir`: `path`, `tool`, `remove` (the previous run's files),
        `previous` (its record or None), `resume` and `note` (a line to log, or None).

    Raises:
        ValueError: the folder cannot be written, holds files no run recorded, holds a previous
            run and neither `overwrite` nor `resume` allows it, or an input lies in that run.
    """
    path = os.path.abspath(os.fspath(path))
    check_writable(path, flag)
    plan = {"path": path, "tool": tool, "remove": [], "previous": None, "resume": False, "note": None}
    names = sorted(n for n in os.listdir(path) if n != LOCK_FILE) if os.path.isdir(path) else []
    if not names:
        return plan
    record = read_run_record(path)
    if record is None:
        raise ValueError(
            f"{flag} {path} holds files that no run recorded ({_listing(names)}; no {RUN_RECORD}): this run "
            f"would mix its files with them{' and --overwrite removes only a recorded run' if overwrite else ''}. "
            f"Pass a new or empty folder, or move those files away yourself.")
    interrupted = record.get("status") == "running"
    previous = [n for n in names if n != RUN_RECORD]
    if interrupted:
        planned = record.get("planned") or []
        foreign = [n for n in previous if not _planned_by(n, planned)]
        what = f"its interrupted {record['tool']} run (killed or stopped before it finished) would not write"
        listed = f"{RUN_RECORD} lists the names that run would write: {_listing(sorted(planned)) or 'none'}"
    else:
        foreign = [n for n in previous if n not in record["files"]]
        what = f"its previous {record['tool']} run did not write"
        listed = f"{RUN_RECORD} lists that run's files"
    if foreign:
        raise ValueError(
            f"{flag} {path} holds files that {what} "
            f"({_listing(foreign)}; {listed}): this run would mix its files with them, and --overwrite removes "
            "only a recorded run's. Pass a new or empty folder, or move those files away yourself.")
    plan.update(previous=record, remove=previous + [RUN_RECORD])
    _check_inputs(path, previous, inputs)
    if interrupted and not previous:
        plan["note"] = (f"{path}: replacing the record of an interrupted {record['tool']} run "
                        f"(pid {record.get('pid', '?')}), which wrote nothing.")
        return plan
    if not overwrite and resume is not None and resume(record):
        plan.update(remove=[], resume=True)
        return plan
    if not overwrite:
        how = (f"an interrupted {record['tool']} run (pid {record.get('pid', '?')} was killed or stopped before it "
               f"finished; it left {_listing(previous)})" if interrupted else
               f"a previous {record['tool']} run ({_listing(previous)}; listed in {RUN_RECORD})")
        raise ValueError(
            f"{flag} {path} holds {how}: this run would replace some of its files and leave the others beside its "
            f"own. Pass --overwrite to remove that run's files before this one starts, or another {flag}.")
    return plan


def claim_run_dir(plan, planned=(), **extra):
    """Removes the previous run's files of `plan` (from `check_run_dir`) and records the folder
    as this run's, "running", with `planned`: the names it may write (what an interrupted run's
    rerun takes as its files). `extra` (JSON values, e.g. the export folder) is stored in the record.

    Returns:
        dict: the record written.
    """
    path = plan["path"]
    for name in plan["remove"]:
        target = os.path.join(path, name)
        if os.path.isdir(target) and not os.path.islink(target):
            shutil.rmtree(target)
        elif os.path.lexists(target):
            os.remove(target)
    kept = plan["previous"]["files"] if plan["resume"] else []
    record = dict(extra, format=1, tool=plan["tool"], status="running", files=list(kept),
                  planned=sorted(set(planned) | set(kept)), pid=os.getpid())
    atomic_write_json(os.path.join(path, RUN_RECORD), record)
    return record


def finish_run_dir(path, tool, **extra):
    """Records every file now in folder `path` as the finished run's (`claim_run_dir` left the
    folder holding only this run's files). Returns the record."""
    path = os.fspath(path)
    record = read_run_record(path) or {}
    record.update(extra, format=1, tool=tool, status="complete",
                  files=sorted(n for n in os.listdir(path) if n not in (RUN_RECORD, LOCK_FILE)))
    atomic_write_json(os.path.join(path, RUN_RECORD), record)
    return record
