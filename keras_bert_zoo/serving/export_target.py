"""Where `export` writes (`export_target`): only its own SavedModel folder, checked before
anything is built or written.

A new or empty folder is written; an earlier export of ours is replaced only with `overwrite`;
a folder holding only TF Serving version folders (`MODEL/<n>/`) gets the next version (the
number itself is taken at the publishing rename, `serving/versions.py`); any other non-empty
folder is refused, naming it and the version option that would put a version folder in it.
"""

import os

from keras_bert_zoo.serving.versions import is_version_name, version_numbers

VOCABULARY_FILE = "vocab.txt"

RECORD = os.path.join("assets.extra", "keras_bert_zoo_export.json")
"""What marks a SavedModel as `export`'s (TF Serving reads nothing of `assets.extra/` but its warmup file)."""
SAVED_MODEL_ENTRIES = {"saved_model.pb", "fingerprint.pb", "variables", "assets", "assets.extra"}
API_OPTIONS = {"version": "version=N or version='next'", "overwrite": "overwrite=True"}
"""How `export_target`'s messages name its options; tools pass their flags' names."""


def is_export(directory):
    """True if `directory` holds a SavedModel `export` wrote: with its record, or (written
    before the record) a SavedModel with our vocabulary asset and nothing else."""
    if os.path.isfile(os.path.join(directory, RECORD)):
        return True
    names = set(os.listdir(directory))
    return ("saved_model.pb" in names and names <= SAVED_MODEL_ENTRIES
            and os.path.isfile(os.path.join(directory, "assets", VOCABULARY_FILE)))


def _versions(path):
    """The numbered version folders in `path` (TF Serving's MODEL/<version>/), or None where
    `path` holds anything else (hidden names aside) or nothing."""
    if not os.path.isdir(path):
        return None
    names = [n for n in os.listdir(path) if not n.startswith(".")]
    if not names or not all(is_version_name(n) and os.path.isdir(os.path.join(path, n)) for n in names):
        return None
    return sorted(int(n) for n in names)


def next_version_base(path, version=None):
    """The model folder whose next version `export(path, version=version)` writes, or None where
    it writes one named folder (`version` an int, or `path` itself)."""
    path = os.path.abspath(os.fspath(path))
    return path if version == "next" or (version is None and _versions(path)) else None


def export_target(path, version=None, overwrite=False, options=None):
    """The SavedModel directory `export` writes for `path`; ValueError, before anything is
    written, where writing it would touch what is not an earlier export.

    `version` None: `path` itself, or where `path` is a TF Serving model folder (only numbered
    version folders in it), its next version `path/<highest + 1>`. An int >= 0: `path/<version>`;
    "next": the next free number under `path` (1 in a new folder); other files there stay. The
    target must be new, empty or, with `overwrite`, an earlier export (replaced once the new one
    is complete). `options`: how messages name `version` and `overwrite` (default: as arguments).
    """
    options = options or API_OPTIONS
    path = os.path.abspath(os.fspath(path))
    if version is None and _versions(path):
        version = "next"
    if version is not None:
        if not (version == "next" or (isinstance(version, int) and not isinstance(version, bool) and version >= 0)):
            raise ValueError(f"`version` must be an int >= 0 or 'next'. Received: version={version!r}.")
        if os.path.lexists(path) and not os.path.isdir(path):
            raise ValueError(f"{path} is a file; a version goes in a model's folder. Pass a directory.")
        if os.path.isfile(os.path.join(path, "saved_model.pb")):
            raise ValueError(f"{path} is itself a SavedModel; a version goes in the model's folder above it "
                             f"(TF Serving's MODEL/<version>/). Pass {os.path.dirname(path)} or another folder.")
        if version == "next":
            version = max(version_numbers(path), default=0) + 1
        path = os.path.join(path, str(version))
    if not os.path.lexists(path):
        return path
    if not os.path.isdir(path):
        raise ValueError(f"{path} is a file, not a directory; an export never replaces it. "
                         "Pass a new or empty directory.")
    entries = sorted(os.listdir(path))
    if not entries:
        return path
    if not is_export(path):
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise ValueError(f"{path} holds files that are not an export of keras_bert_zoo ({shown}); an export "
                         f"never writes over them. Pass a new or empty directory, or add a TF Serving version "
                         f"folder in it with {options['version']}.")
    if not overwrite:
        raise ValueError(f"{path} holds an earlier export. Pass {options['overwrite']} to replace it (once the "
                         f"new one is complete), or {options['version']} on its model folder for a new version.")
    return path
