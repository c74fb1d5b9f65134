"""Finds a preset's files: a registry entry (downloaded, verified, converted once into
the cache) or a local directory / archive in our, Google's, HF's or keras-hub's layout."""

import hashlib
import logging
import os
import tarfile
import urllib.parse
import zipfile

from keras_bert_zoo.presets import registry as presets
from keras_bert_zoo.utils import archives, files
from keras_bert_zoo.weights import configs, google_checkpoint
from keras_bert_zoo.presets import download, hf_tokenizer, hubs, preset_format
from keras_bert_zoo.weights import keras_hub_checkpoint, safetensors_checkpoint

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".pkl", ".pickle")
DOWNLOAD_RECORD = "download.json"
logger = logging.getLogger("keras_bert_zoo.weights")


def refuse_pickle(path):
    """Raises ValueError for PyTorch pickle checkpoints (R15): nothing is ever unpickled."""
    raise ValueError(
        f"Refusing {path}: PyTorch pickle checkpoints (.bin, .pt) are never loaded, because "
        "unpickling can run arbitrary code. Convert it to safetensors (in transformers: "
        "`model.save_pretrained(dir, safe_serialization=True)`) and pass that directory."
    )


def resolve_entry(preset):
    """Returns the registry entry for a name/alias, or validates an entry dict.

    An entry dict needs `name`, `config` and `weights.url` (optional `weights.sha256`,
    `weights.size_bytes`); it lets tools and tests load from a registry-style entry
    that is not in `keras_bert_zoo/presets/registry.json`.
    """
    if isinstance(preset, dict):
        if not preset.get("name") or not (preset.get("weights") or {}).get("url"):
            raise ValueError(
                "A preset entry dict needs `name` and `weights.url`. Received keys: "
                f"{sorted(preset)}."
            )
        return preset
    if hubs.is_hub_handle(preset):
        raise ValueError(f"{preset!r} is a hub handle, not a registry name: `locate` resolves it.")
    return presets.get_preset(preset)


def _find_layout_root(directory):
    """Returns the directory holding the checkpoint (the zip's folder, if any)."""
    names = set(os.listdir(directory))
    markers = ("bert_config.json", "config.json", preset_format.MANIFEST_FILE)
    if any(m in names for m in markers):
        return directory
    subdirs = [n for n in names if os.path.isdir(os.path.join(directory, n)) and not n.startswith((".", "__"))]
    if len(subdirs) == 1:
        return _find_layout_root(os.path.join(directory, subdirs[0]))
    raise ValueError(
        f"No BERT checkpoint found in {directory!r}: expected bert_config.json (Google), "
        f"config.json (HF or keras_bert_zoo). Found: {sorted(names)[:10]}."
    )


def detect_layout(directory):
    """Returns `(layout, root)` with layout `"keras_bert_zoo"`, `"google"`, `"keras_hub"` or `"hf"`.

    keras-hub's `config.json` is a serialized Keras object (`registered_name` `keras_hub>…`),
    HF's a dict of sizes: both are named config.json, so the content tells them apart."""
    root = _find_layout_root(directory)
    if preset_format.is_preset_dir(root):
        return "keras_bert_zoo", root
    if os.path.isfile(os.path.join(root, "bert_config.json")):
        return "google", root
    if keras_hub_checkpoint.is_keras_hub_preset(root):
        return "keras_hub", root
    return "hf", root


def _extract_local_archive(path):
    """Extracts a local zip/tar once into the cache (keyed by its sha256)."""
    digest = files.sha256_file(path)
    target = os.path.join(download.cache_dir(), "local", digest[:32])
    marker = os.path.join(target, ".complete")
    if not os.path.isfile(marker):
        archives.safe_extract(path, target)
        files.atomic_write_text(marker, digest + "\n")
    return target


def locate(preset):
    """Returns `(layout, directory)` for a registry name/alias, entry dict, local path or hub
    handle (`hf://org/name[@revision]`, `kaggle://owner/model/framework/variation/version`)."""
    if hubs.is_hub_handle(preset):
        return detect_layout(hubs.resolve_handle(preset))
    if isinstance(preset, dict) or not presets.is_local_preset(preset):
        return "keras_bert_zoo", ensure_cached_preset(resolve_entry(preset))
    path = os.fspath(preset)
    if path.lower().endswith(PICKLE_SUFFIXES):
        refuse_pickle(path)
    if not os.path.exists(path) and os.path.exists(path + ".index"):
        path = os.path.dirname(os.path.abspath(path))  # a checkpoint prefix: `…/bert_model.ckpt`
    elif os.path.isfile(path):
        if zipfile.is_zipfile(path) or tarfile.is_tarfile(path):
            path = _extract_local_archive(path)
        else:
            path = os.path.dirname(os.path.abspath(path))
    return detect_layout(path)


def folder_fingerprint(directory):
    """The sha256 of a preset's content: each file of its folder (hidden names aside), path and
    sha256, in name order. Two folders of one name hold the same model exactly when these agree
    (a search resumes only on the same backbone, whatever the folder is called). `Preset.fingerprint`
    is this of the preset's folder."""
    paths = []
    for folder, subfolders, names in os.walk(directory):
        subfolders[:] = [n for n in subfolders if not n.startswith(".")]
        paths += [os.path.join(folder, n) for n in names if not n.startswith(".")]
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(f"{os.path.relpath(path, directory)}\0{files.sha256_file(path)}\n".encode())
    return digest.hexdigest()


def read_config(layout, directory):
    """Returns `BertBackbone` arguments from the directory's config file."""
    if layout == "keras_bert_zoo":
        return dict(preset_format.read_preset_config(directory)["backbone"])
    if layout == "keras_hub":
        return keras_hub_checkpoint.read_keras_hub_config(directory)
    name = "bert_config.json" if layout == "google" else "config.json"
    path = os.path.join(directory, name)
    return configs.backbone_config_from_foreign(files.read_json(path), source=path)


def read_tensors(layout, directory, verify=True):
    """Returns `({canonical name: array}, source description)`.

    `verify=False` skips the manifest check of our presets (a hand-edited `config.json`
    or `vocab.txt`); foreign checkpoints have no manifest.
    """
    if layout == "keras_bert_zoo":
        return preset_format.read_preset_tensors(directory, verify=verify), directory
    if layout == "google":
        return google_checkpoint.read_google_tensors(directory), directory
    if layout == "keras_hub":
        return keras_hub_checkpoint.read_keras_hub_tensors(directory), directory
    has_safetensors = any(n.endswith(".safetensors") or n == "model.safetensors.index.json" for n in os.listdir(directory))
    if not has_safetensors:
        pickles = [n for n in os.listdir(directory) if n.lower().endswith(PICKLE_SUFFIXES)]
        if pickles:
            refuse_pickle(os.path.join(directory, pickles[0]))
        raise ValueError(f"No model.safetensors in {directory!r}.")
    return safetensors_checkpoint.read_hf_tensors(directory), directory


def vocabulary_path(layout, directory):
    """Returns the path of the vocabulary (`vocab.txt`; keras-hub's
    `assets/tokenizer/vocabulary.txt`; for an HF folder without `vocab.txt`, as transformers 5
    saves them, its `tokenizer.json`'s vocabulary written to the cache) or None."""
    name = keras_hub_checkpoint.VOCABULARY_FILE if layout == "keras_hub" else "vocab.txt"
    path = os.path.join(directory, name)
    if os.path.isfile(path):
        return path
    return hf_tokenizer.vocabulary_from_tokenizer_json(directory) if layout == "hf" else None


def tokenizer_settings(layout, directory):
    """The casing a foreign checkpoint's tokenizer files state: `{"lowercase", "strip_accents"}`,
    each only where stated (HF's `tokenizer_config.json` `do_lower_case`/`strip_accents`, keras-hub's
    `tokenizer.json`); `{}` for the others (our presets keep `lowercase` in their config)."""
    if layout == "keras_hub":
        return keras_hub_checkpoint.tokenizer_settings(directory)
    if layout != "hf":
        return {}
    settings = {}
    tokenizer_json = os.path.join(directory, hf_tokenizer.TOKENIZER_FILE)
    if os.path.isfile(tokenizer_json):  # its normalizer; tokenizer_config.json's keys, where given, decide
        settings.update(hf_tokenizer.casing(tokenizer_json))
    path = os.path.join(directory, "tokenizer_config.json")
    if os.path.isfile(path):
        config = files.read_json(path)
        settings.update(hf_tokenizer.stated_casing(config.get("do_lower_case"), config.get("strip_accents")))
    return settings


def convert_directory(layout, directory, target, extra=None):
    """Converts a Google/HF/our checkpoint directory into our preset layout at `target`."""
    return preset_format.write_preset(
        target,
        read_tensors(layout, directory)[0],
        read_config(layout, directory),
        vocabulary=vocabulary_path(layout, directory),
        extra=extra,
    )


def _verified_archive(entry, root):
    """Returns the path of the entry's verified archive, downloading it if needed."""
    weights = entry["weights"]
    url = weights["url"]
    # Created up front so that a user told to place the file here (offline) can.
    os.makedirs(root, exist_ok=True)
    archive = os.path.join(root, os.path.basename(urllib.parse.urlparse(url).path) or "weights.zip")
    record_path = os.path.join(root, DOWNLOAD_RECORD)
    record = files.read_json(record_path) if os.path.isfile(record_path) else {}
    sha256 = weights.get("sha256") or record.get("sha256")
    size = weights.get("size_bytes") or record.get("size")
    if os.path.isfile(archive):
        actual = download.check_file(archive, sha256=sha256, size=size)
    else:
        actual = download.download(url, archive, sha256=sha256, size=size, name=entry["name"])
    if not record:
        # No hash in the registry: trust on first use. The first download's hash is
        # recorded and verified on every later load.
        if not weights.get("sha256"):
            logger.info("%s: no published sha256; recorded sha256 %s (trust on first use).", archive, actual)
        files.atomic_write_json(record_path, {"url": url, "sha256": actual, "size": os.path.getsize(archive)})
    return archive


def ensure_cached_preset(entry):
    """Returns our converted preset directory for a registry entry, building it once.

    Download → size/sha256 check → safe extraction → conversion to our format →
    extracted files removed. Later loads read the converted directory, whose files
    are verified against its manifest on every load.
    """
    root = os.path.join(download.cache_dir(), "presets", entry["name"])
    converted = os.path.join(root, "converted")
    manifest = os.path.join(converted, preset_format.MANIFEST_FILE)
    if os.path.isfile(manifest):
        listed = files.read_json(manifest)["files"]
        if all(os.path.isfile(os.path.join(converted, name)) for name in listed):
            return converted
        # A file was removed after failing verification (R13): convert again.
        files.shutil.rmtree(converted, ignore_errors=True)
    archive = _verified_archive(entry, root)
    extracted = os.path.join(root, "extracted")
    try:
        archives.safe_extract(archive, extracted)
        layout, directory = detect_layout(extracted)
        extra = {k: entry[k] for k in ("lowercase",) if k in entry}
        extra["source"] = {"name": entry["name"], "url": entry["weights"]["url"], "sha256": files.sha256_file(archive)}
        convert_directory(layout, directory, converted, extra=extra)
    finally:
        files.shutil.rmtree(extracted, ignore_errors=True)
    return converted
