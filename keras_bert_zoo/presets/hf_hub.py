"""`hf://org/name[@revision]`: a Hugging Face Hub model repository, fetched into HF's own cache by
huggingface_hub's `snapshot_download` and read from there (our loaders read HF's layout).

Only the files our readers use are fetched (`HF_PATTERNS`): never a PyTorch pickle (unpickling runs
code), nor ONNX/OpenVINO copies or sentence-transformers' sub-folders. A repo whose weights exist only
as pickles is refused, saying how to get safetensors. Offline (`HF_HUB_OFFLINE=1` or
`KERAS_BERT_ZOO_OFFLINE=1`, or no network) the snapshot comes from the cache; a file it lacks is
named with the command that fetches it. huggingface_hub checks a download's size only, so every
safetensors file is checked here against its blob's name, which is its sha256 (the LFS oid the hub
sends as ETag).
"""

import hashlib
import importlib.util
import logging
import os
import re

import huggingface_hub

from keras_bert_zoo.presets import download
from keras_bert_zoo.utils import files

SCHEME = "hf://"
# What our readers use of a repo: weights, config and the tokenizer's files.
HF_PATTERNS = ("*.safetensors", "model.safetensors.index.json", "config.json", "vocab.txt",
               "tokenizer_config.json", "tokenizer.json", "special_tokens_map.json")
# Sub-folders hold other formats (onnx/, openvino/) or sentence-transformers' extra modules.
HF_IGNORE = ("*/*",)
INDEX = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
SHA256 = re.compile(r"[0-9a-f]{64}")
GIT_SHA1 = re.compile(r"[0-9a-f]{40}")
logger = logging.getLogger("keras_bert_zoo.weights")


class HubFileMissingError(download.PresetNotAvailableError, FileNotFoundError):
    """A hub model, or a file of it, is not in the local cache and cannot be downloaded now."""


def parse_handle(handle):
    """`hf://org/name[@revision]` -> `(repo_id, revision or None)`."""
    repo_id, at, revision = handle.strip()[len(SCHEME):].partition("@")
    repo_id = repo_id.rstrip("/")
    if not REPO_ID.fullmatch(repo_id) or (at and not revision.strip()):
        raise ValueError(
            f"{handle!r} is not a Hugging Face handle: write hf://org/name, or hf://org/name@revision for a "
            "branch, tag or commit (e.g. hf://google-bert/bert-base-uncased@main)."
        )
    return repo_id, revision.strip() or None


def is_true(name):
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def offline_reason():
    """The setting that forbids downloading, or None."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", download.OFFLINE_ENV):
        if is_true(name):
            return f"{name}=1"
    return None


def cache_dir(constants):
    """HF's cache folder, from the environment as it is now: huggingface_hub reads HF_HOME,
    HF_HUB_CACHE and HF_ENDPOINT once, when it is imported, and a process may set them later."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(name):
            return os.path.expanduser(os.path.expandvars(os.environ[name]))
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.path.expandvars(os.environ["HF_HOME"])), "hub")
    return constants.HF_HUB_CACHE


def fetch_command(repo_id, revision, cache, names=None):
    """The shell command that puts a repo's files (`names`, else our patterns) into the HF cache:
    `hf download`, or `huggingface-cli download` where the installed huggingface_hub has no `hf`."""
    cli = "hf" if importlib.util.find_spec("huggingface_hub.cli.hf") else "huggingface-cli"
    parts = [cli, "download", repo_id]
    parts += list(names) if names else [f"--include '{p}'" for p in HF_PATTERNS] + [f"--exclude '{HF_IGNORE[0]}'"]
    if revision:
        parts += ["--revision", revision]
    return " ".join(parts + ["--cache-dir", cache])


def missing_files(folder):
    """The files our readers need that `folder` lacks: config.json and the weights
    (model.safetensors, or the index and every shard it names)."""
    missing = [] if os.path.isfile(os.path.join(folder, "config.json")) else ["config.json"]
    index = os.path.join(folder, INDEX)
    if os.path.isfile(index):
        shards = sorted(set((files.read_json(index).get("weight_map") or {}).values()))
        missing += [s for s in shards if not os.path.isfile(os.path.join(folder, s))]
    elif not any(n.endswith(".safetensors") for n in os.listdir(folder)):
        missing.append("model.safetensors")
    return missing


def git_blob_sha1(path):
    """Git's id of a file (the ETag the hub sends for a file kept in git, not LFS)."""
    digest = hashlib.sha1(f"blob {os.path.getsize(path)}\0".encode())
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def verify_blobs(folder, handle):
    """Checks each safetensors file of a snapshot against the name of the blob it links to: the
    sha256 (LFS) or git id the hub sent as its ETag. A file that does not match is removed (the
    next load downloads it again) and refused."""
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".safetensors"):
            continue
        path = os.path.join(folder, name)
        blob = os.path.realpath(path)
        expected = os.path.basename(blob)
        if SHA256.fullmatch(expected):
            actual, kind = files.sha256_file(blob), "sha256"
        elif GIT_SHA1.fullmatch(expected):
            actual, kind = git_blob_sha1(blob), "git blob id"
        else:
            logger.info("%s: %s is not a hub cache blob (%s): its hash cannot be checked.", handle, name, blob)
            continue
        if actual != expected:
            for bad in (blob, path):
                if os.path.lexists(bad):
                    os.remove(bad)
            raise download.IntegrityError(
                f"{handle}: {name} in the HF cache has {kind} {actual}, but the hub's ETag says {expected}: the "
                f"file is corrupt or was replaced. It was removed ({blob}); load again to download it again."
            )


def refuse_incomplete(handle, repo_id, revision, folder, cache, listed, reason):
    """Raises for a snapshot that lacks files our readers need, saying which and what to do."""
    missing = missing_files(folder)
    if not missing:
        return
    present = set(os.listdir(folder)) | set(listed or ())
    pickles = sorted(n for n in present if "/" not in n and n.lower().endswith(PICKLE_SUFFIXES))
    if pickles and any(m.endswith(".safetensors") for m in missing):
        raise ValueError(
            f"Refusing {handle}: its weights are only PyTorch pickles ({', '.join(pickles)}), which are never "
            "loaded, because unpickling can run arbitrary code. Convert them to safetensors (in transformers: "
            "`model.save_pretrained(dir, safe_serialization=True)`) and pass that folder, or load a revision "
            "that has model.safetensors (the hub's safetensors conversion bot opens one as a pull request: "
            f"hf://{repo_id}@refs/pr/<number>)."
        )
    if listed is not None and not set(missing) & set(listed):
        raise ValueError(
            f"{handle} has no {', '.join(missing)} at revision {os.path.basename(folder)}: it is not a BERT "
            f"checkpoint in transformers' layout with safetensors weights (files: {', '.join(sorted(listed)[:12])})."
        )
    raise HubFileMissingError(
        f"{handle}: the HF cache ({folder}) lacks {', '.join(missing)}, and {reason}. Fetch "
        f"{'it' if len(missing) == 1 else 'them'} on a machine with network: "
        f"`{fetch_command(repo_id, revision, cache, missing)}` (then copy that cache here), or allow downloads."
    )


def snapshot(handle):
    """Returns the local snapshot folder of `hf://org/name[@revision]`, downloading what it lacks
    unless offline (see the module doc)."""
    from huggingface_hub import constants, errors  # lazy: only hf:// handles need the hub client's errors, which import httpx (start-up time)

    repo_id, revision = parse_handle(handle)
    cache, reason = cache_dir(constants), offline_reason()
    endpoint = os.environ.get("HF_ENDPOINT", "").rstrip("/") or None
    try:
        folder = huggingface_hub.snapshot_download(
            repo_id, revision=revision, cache_dir=cache, endpoint=endpoint, local_files_only=reason is not None,
            allow_patterns=list(HF_PATTERNS), ignore_patterns=list(HF_IGNORE), library_name="keras_bert_zoo",
        )
    except errors.IncompleteSnapshotError as e:
        # The cached listing names files we may not need (tokenizer.json): only ours decide.
        folder = e.snapshot_path
        if not missing_files(folder):
            logger.warning("%s: using the cached snapshot %s, which lacks files not needed to load it (%s).",
                           handle, folder, " ".join(str(e).split()))
    except errors.LocalEntryNotFoundError as e:
        why = f"{reason} forbids downloading" if reason else f"the hub could not be reached ({e.__cause__ or e})"
        raise HubFileMissingError(
            f"{handle} is not in the HF cache ({cache}) and {why}. Fetch it on a machine with network: "
            f"`{fetch_command(repo_id, revision, cache)}` (then copy that cache here, or point HF_HOME at it)."
        ) from e
    except errors.RevisionNotFoundError as e:
        raise ValueError(f"{handle}: the repository has no revision {revision!r} (a branch, tag or commit).") from e
    except errors.RepositoryNotFoundError as e:
        raise ValueError(
            f"{handle}: no such model repository on {endpoint or constants.ENDPOINT}, or it is private or gated "
            "(log in with `hf auth login`, or set HF_TOKEN)."
        ) from e
    except OSError as e:
        raise OSError(f"{handle}: downloading into the HF cache ({cache}) failed: {' '.join(str(e).split())}") from e
    listed = None
    if reason is None and missing_files(folder):
        listed = repo_files(repo_id, os.path.basename(folder), endpoint)
    why = f"{reason} forbids downloading" if reason else "the hub could not be reached"
    refuse_incomplete(handle, repo_id, revision, folder, cache, listed, why)
    verify_blobs(folder, handle)
    return folder


def repo_files(repo_id, commit, endpoint):
    """The repo's file names at `commit`, or None when the hub cannot say (unreachable)."""
    try:
        return huggingface_hub.HfApi(endpoint=endpoint).list_repo_files(repo_id, revision=commit)
    except Exception as e:  # noqa: BLE001 (any failure only means the hub cannot say: the caller says so)
        logger.info("hf://%s: the file list could not be read (%s).", repo_id, e)
        return None
