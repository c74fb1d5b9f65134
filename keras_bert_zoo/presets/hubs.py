"""Hub handles, accepted wherever a preset is: `hf://org/name[@revision]` (Hugging Face Hub,
see `hf_hub`) and `kaggle://owner/model/framework/variation[/version]` (Kaggle Models).

Each is resolved to a local folder by the hub's own client and cache (huggingface_hub, kagglehub),
so a model fetched once, by us or by that hub's tools, is found again offline; `sources` then reads
the folder as it reads a local path (ours, Google's, HF's or a keras-hub preset, such as Kaggle's
`keras/bert` models). A TensorFlow SavedModel, which our loaders cannot read, is refused, naming the
layout, before anything is read from it.
"""

import os
import re

import requests

from keras_bert_zoo.presets import download, hf_hub, preset_format

HF_SCHEME = hf_hub.SCHEME
KAGGLE_SCHEME = "kaggle://"
HubFileMissingError = hf_hub.HubFileMissingError
KAGGLE_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # Kaggle's slugs; no `.`/`..` path step


def is_hub_handle(preset):
    """True for a string that starts with `hf://` or `kaggle://`."""
    return isinstance(preset, str) and preset.strip().lower().startswith((HF_SCHEME, KAGGLE_SCHEME))


def resolve_handle(handle):
    """Returns the local folder of a hub handle, downloading it into the hub's cache if needed.

    Raises:
        ValueError: a malformed handle, an unknown repo or revision, PyTorch-pickle-only weights,
            or a layout we cannot read (each named).
        HubFileMissingError: offline (or the hub unreachable) and the cache lacks the model or a
            file of it; the message names the files and the command that fetches them.
        download.IntegrityError: a cached safetensors file does not match the hub's hash.
    """
    handle = handle.strip()
    if handle.lower().startswith(HF_SCHEME):
        folder = hf_hub.snapshot(HF_SCHEME + handle[len(HF_SCHEME):])
    else:
        folder = kaggle_folder(KAGGLE_SCHEME + handle[len(KAGGLE_SCHEME):])
    refuse_unreadable_layout(handle, folder)
    return folder


def refuse_unreadable_layout(handle, folder):
    """Raises ValueError when the checkpoint in `folder` (or its one sub-folder, as
    `sources.detect_layout` looks) is a layout our loaders cannot read (a TensorFlow SavedModel),
    rather than misread it. A keras-hub preset is read (`sources`, `weights/keras_hub_checkpoint`):
    a keras-hub model other than BERT is refused there, by its name, before its weights are read."""
    directory = folder
    while True:
        names = set(os.listdir(directory))
        if "saved_model.pb" in names and "config.json" not in names:
            raise ValueError(
                f"{handle} resolved to {directory}, a TensorFlow SavedModel (saved_model.pb): keras_bert_zoo reads "
                "checkpoints, not SavedModels. Pass the model as a checkpoint in our, Google's (bert_config.json + "
                "bert_model.ckpt), HF's (config.json + model.safetensors) or keras-hub's (config.json + "
                "model.weights.h5) layout."
            )
        if names & {"config.json", "bert_config.json", preset_format.MANIFEST_FILE}:
            return
        subdirs = [n for n in names if os.path.isdir(os.path.join(directory, n)) and not n.startswith((".", "__"))]
        if len(subdirs) != 1:
            return  # `sources.detect_layout` says what is missing
        directory = os.path.join(directory, subdirs[0])


def parse_kaggle_handle(handle):
    """`kaggle://owner/model/framework/variation[/version]` -> `(slug, version or None)`."""
    parts = handle.strip()[len(KAGGLE_SCHEME):].strip("/").split("/")
    unsafe = [p for p in parts if not KAGGLE_PART.fullmatch(p)]
    if unsafe:  # `..` or `.` would lead out of kagglehub's cache folder (and Kaggle names no such model)
        raise ValueError(
            f"{handle!r} is not a Kaggle model handle: {unsafe[0]!r} is not a name (each part of "
            "kaggle://owner/model/framework/variation/version is letters, digits, '-', '_' or '.', not '.' or '..'), "
            "e.g. kaggle://keras/bert/keras/bert_base_en_uncased/2."
        )
    if len(parts) not in (4, 5) or not all(parts) or (len(parts) == 5 and not parts[4].isdigit()):
        raise ValueError(
            f"{handle!r} is not a Kaggle model handle: write kaggle://owner/model/framework/variation/version, "
            "e.g. kaggle://keras/bert/keras/bert_base_en_uncased/2 (without /version: the latest, which needs "
            "the network to look up)."
        )
    return "/".join(parts), int(parts[4]) if len(parts) == 5 else None


def cached_kaggle_versions(model_handle):
    """The versions of a Kaggle model variation complete in kagglehub's cache, ascending."""
    from kagglehub import cache  # lazy: only kaggle:// handles need kagglehub (and requests)

    base = os.path.dirname(cache.get_cached_path(model_handle.with_version(1)))
    versions = sorted(int(n) for n in (os.listdir(base) if os.path.isdir(base) else ()) if n.isdigit())
    return [v for v in versions if cache.Cache().load_from_cache(model_handle.with_version(v))]


def kaggle_missing(handle, slug, version, model_handle, why):
    """The error for a Kaggle model that is not cached and cannot be downloaded now."""
    from kagglehub import config  # lazy: as in `cached_kaggle_versions`

    versions = cached_kaggle_versions(model_handle)
    have = (f"; cached versions: {', '.join(map(str, versions))} (name one: "
            f"kaggle://{slug.rsplit('/', 1)[0] if version else slug}/{versions[-1]})" if versions else "")
    what = f"version {version} of {handle}" if version else f"{handle} (no version given: the latest is looked up online)"
    return HubFileMissingError(
        f"{what} is not in kagglehub's cache ({config.get_cache_folder()}) and {why}{have}. Fetch it on a machine "
        f"with network: `python -c \"import kagglehub; kagglehub.model_download('{slug}')\"` (then copy that cache "
        "here, or point KAGGLEHUB_CACHE at it)."
    )


def inside_kaggle_cache(handle, folder):
    """`folder`, which kagglehub resolved `handle` to, where it lies inside kagglehub's cache folder
    (links resolved); else ValueError: a model is read only from where kagglehub keeps models."""
    from kagglehub import config  # lazy: as in `cached_kaggle_versions`

    cache_root = os.path.realpath(config.get_cache_folder())
    real = os.path.realpath(folder)
    if real != cache_root and not real.startswith(cache_root.rstrip(os.sep) + os.sep):
        raise ValueError(f"{handle} resolved to {real}, outside kagglehub's cache folder {cache_root}: "
                         "refused. Pass the model's own handle (kaggle://owner/model/framework/variation/version).")
    return folder


def kaggle_folder(handle):
    """Returns the local folder of a Kaggle model handle through `kagglehub.model_download`.

    kagglehub has no offline switch: a handle with its version that is complete in its cache
    (`KAGGLEHUB_CACHE`, else ~/.cache/kagglehub) resolves without the network; with
    `KERAS_BERT_ZOO_OFFLINE=1` only the cache is read.
    """
    import kagglehub  # lazy: only kaggle:// handles need kagglehub (and requests)
    from kagglehub import cache, exceptions, handle as kaggle_handles  # lazy: as above

    slug, version = parse_kaggle_handle(handle)
    model_handle = kaggle_handles.parse_model_handle(slug)
    if download.is_offline():
        folder = version and cache.Cache().load_from_cache(model_handle)
        if not folder:
            raise kaggle_missing(handle, slug, version, model_handle, f"{download.OFFLINE_ENV}=1 forbids downloading")
        return inside_kaggle_cache(handle, folder)
    try:
        return inside_kaggle_cache(handle, kagglehub.model_download(slug))
    except exceptions.KaggleApiHTTPError as e:
        raise ValueError(f"{handle}: Kaggle answered {' '.join(str(e).split())}") from e
    except (requests.ConnectionError, requests.Timeout) as e:
        raise kaggle_missing(handle, slug, version, model_handle, f"Kaggle could not be reached ({e})") from e
