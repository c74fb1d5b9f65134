"""Reads and writes HF BERT weights in safetensors (never PyTorch pickles).

HF names (`bert.encoder.layer.0.attention.self.query.weight`, torch `Linear`
weights `[out, in]`) are mapped to the canonical Google names and layouts of
`keras_bert_zoo.weights.mapping` (`bert/encoder/layer_0/attention/self/query/kernel`,
`[in, out]`), and back.
"""

import json
import os
import re

import numpy as np
import safetensors
import safetensors.numpy

from keras_bert_zoo.utils import files

# HF head names -> canonical names, stored in the same layout ([K, H] for both).
_HEADS = {
    "cls.predictions.bias": "cls/predictions/output_bias",
    "cls.seq_relationship.weight": "cls/seq_relationship/output_weights",
    "cls.seq_relationship.bias": "cls/seq_relationship/output_bias",
    "classifier.weight": "output_weights",
    "classifier.bias": "output_bias",
    "qa_outputs.weight": "cls/squad/output_weights",
    "qa_outputs.bias": "cls/squad/output_bias",
}
_HEADS_INVERSE = {v: k for k, v in _HEADS.items()}
# The decoder is tied to the word embeddings; checked, then dropped.
DECODER_WEIGHT = "cls.predictions.decoder.weight"
DECODER_BIAS = "cls.predictions.decoder.bias"
_BACKBONE_ROOTS = ("embeddings", "encoder", "pooler")


def hf_to_canonical(name):
    """Returns `(canonical name, transpose)` for a HF key, or `(None, False)` if unknown."""
    if name in _HEADS:
        return _HEADS[name], False
    key = name[len("bert."):] if name.startswith("bert.") else name
    parts = key.split(".")
    # cls.predictions.transform.* follows the same rules as the encoder.
    if not name.startswith("cls.predictions.transform.") and parts[0] not in _BACKBONE_ROOTS:
        return None, False
    *module, leaf = parts
    module = re.sub(r"layer/(\d+)", r"layer_\1", "/".join(module))
    if module.endswith("LayerNorm"):
        leaf_map = {"weight": "gamma", "gamma": "gamma", "bias": "beta", "beta": "beta"}
        if leaf not in leaf_map:
            return None, False
        return _prefixed(f"{module}/{leaf_map[leaf]}"), False
    if module.endswith("_embeddings") and leaf == "weight":
        return _prefixed(module), False
    if leaf == "weight":
        return _prefixed(f"{module}/kernel"), True
    if leaf == "bias":
        return _prefixed(f"{module}/bias"), False
    return None, False


def _prefixed(name):
    return name if name.startswith("cls/") else "bert/" + name


def canonical_to_hf(name):
    """Returns `(HF key with the `bert.` prefix, transpose)` for a canonical name."""
    if name in _HEADS_INVERSE:
        return _HEADS_INVERSE[name], False
    parts = name.split("/")
    if parts[0] == "bert":
        parts = parts[1:]
        root = "bert."
    else:
        root = ""
    *module, leaf = parts
    module = ".".join(module)
    module = re.sub(r"layer_(\d+)", r"layer.\1", module)
    if leaf.endswith("_embeddings"):
        return f"{root}{module + '.' if module else ''}{leaf}.weight", False
    leaf_map = {"gamma": "weight", "beta": "bias", "kernel": "weight", "bias": "bias"}
    if leaf not in leaf_map:
        raise ValueError(f"No HF name for the canonical tensor {name!r}.")
    return f"{root}{module}.{leaf_map[leaf]}", leaf == "kernel"


def load_file(path):
    """Reads one `.safetensors` file into `{name: numpy array}`.

    Raises:
        ValueError: the file is truncated, not safetensors, or a PyTorch pickle under a
            `.safetensors` name; the message names the file.
    """
    try:
        tensors = safetensors.numpy.load_file(path)
    except (safetensors.SafetensorError, OSError) as e:
        with open(path, "rb") as f:
            head = f.read(2)
        # A pickle starts with the PROTO opcode 0x80; torch.save's zip format with "PK".
        what = "a PyTorch pickle (never loaded)" if head[:1] == b"\x80" or head == b"PK" else "truncated or not safetensors"
        raise ValueError(
            f"{path} cannot be read as safetensors: it is {what} ({e}). Replace it with the "
            "complete file (re-download or re-save it)."
        ) from e
    return {k: np.asarray(v) for k, v in tensors.items()}


def _allowed_roots(folder):
    """The real folders a shard may resolve into: the model folder, and for a folder of
    huggingface_hub's cache (`<repo>/snapshots/<revision>`, whose files are links to
    `<repo>/blobs/<hash>`) that repository's `blobs` folder."""
    real = os.path.realpath(folder)
    roots = [real]
    snapshots = os.path.dirname(real)
    if os.path.basename(snapshots) == "snapshots":
        roots.append(os.path.join(os.path.dirname(snapshots), "blobs"))
    return roots


def shard_paths(folder, index):
    """The shard files that `index` (a `model.safetensors.index.json` in `folder`) names.

    An index is data that came with the download: its `weight_map` must not make the
    reader open a file outside the model folder. Each entry is resolved (`..`, absolute
    paths and symbolic links) and must lie inside `folder` (or, for huggingface_hub's
    cache, its repository's `blobs`).

    Returns:
        list of str: the shard paths, each once, sorted.

    Raises:
        ValueError: the index has no `weight_map` dict of strings, or an entry resolves
            outside the folder or to no file; the message names the entry, the index and the fix.
    """
    weight_map = files.read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) and v for v in weight_map.values()):
        raise ValueError(
            f"{index}: `weight_map` must map each tensor name to a shard file name. Received: "
            f"{str(weight_map)[:200]}. Rewrite the index (transformers' `save_pretrained` writes one)."
        )
    roots = _allowed_roots(folder)
    shards = {}
    for tensor, shard in sorted(weight_map.items()):
        resolved = os.path.realpath(os.path.join(folder, shard))
        if not any(os.path.commonpath([resolved, root]) == root for root in roots):
            raise ValueError(
                f"{index}: the weight_map entry {tensor!r} -> {shard!r} points outside the model folder "
                f"{folder} (it resolves to {resolved}); nothing was read. Shards must be files in that "
                "folder: put the shard there and name it by its file name in the index."
            )
        if not os.path.isfile(resolved):
            raise ValueError(
                f"{index}: the weight_map entry {tensor!r} names the shard {shard!r}, which is not in "
                f"{folder}. Download the missing shard into that folder, or fix the index."
            )
        shards[shard] = os.path.normpath(os.path.join(folder, shard))
    return sorted(set(shards.values()))


def load_safetensors(directory_or_file):
    """Reads raw HF tensors from `model.safetensors`, a sharded index, or a `.safetensors` file.

    Returns:
        `(tensors, source)`: a dict of numpy arrays and the path read.
    """
    path = os.fspath(directory_or_file)
    if os.path.isfile(path):
        return load_file(path), path
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.isfile(index):
        tensors = {}
        for shard in shard_paths(path, index):
            tensors.update(load_file(shard))
        return tensors, index
    single = os.path.join(path, "model.safetensors")
    if os.path.isfile(single):
        return load_file(single), single
    raise ValueError(f"No model.safetensors in {path!r}.")


def _untie_decoder(raw, out, source):
    """Checks the (optional) decoder tensors against the tied embedding and bias."""
    decoder = raw.get(DECODER_WEIGHT, raw.get("bert." + DECODER_WEIGHT))
    if decoder is not None:
        word = out.get("bert/embeddings/word_embeddings")
        if word is None or decoder.shape != word.shape or not np.allclose(decoder, word):
            raise ValueError(
                f"{source}: {DECODER_WEIGHT} differs from the word embeddings. keras_bert_zoo "
                "ties the MLM decoder to the embeddings (as BERT does); untied decoders are unsupported."
            )
    bias = raw.get(DECODER_BIAS)
    if bias is not None:
        current = out.setdefault("cls/predictions/output_bias", bias)
        if not np.allclose(current, bias):
            raise ValueError(f"{source}: {DECODER_BIAS} differs from cls.predictions.bias.")


def read_hf_tensors(directory_or_file):
    """Reads HF safetensors and returns `{canonical name: array}` in canonical layout.

    Accepts keys with or without the `bert.` prefix, `LayerNorm.weight/bias` or the
    old `gamma/beta`, with the tied decoder present or absent; skips `position_ids`.

    Raises:
        ValueError: an unknown tensor (named), or an untied decoder.
    """
    raw, source = load_safetensors(directory_or_file)
    out, unknown = {}, []
    for name, value in raw.items():
        if name.endswith("position_ids") or name in (DECODER_WEIGHT, DECODER_BIAS):
            continue
        canonical, transpose = hf_to_canonical(name)
        if canonical is None:
            unknown.append(name)
            continue
        out[canonical] = np.ascontiguousarray(value.T if transpose else value).astype("float32")
    if unknown:
        raise ValueError(
            f"Unexpected tensor(s) in {source}: {', '.join(sorted(unknown)[:8])}. "
            "They are not part of a BERT model or a known head (classifier, qa_outputs)."
        )
    _untie_decoder(raw, out, source)
    return out


def write_hf_checkpoint(tensors, directory, config_json, vocabulary_path=None):
    """Writes canonical tensors as HF `model.safetensors` + `config.json` (+ `vocab.txt`).

    Args:
        tensors: dict `{canonical name: array}`.
        directory: str. Created if needed; files are replaced atomically.
        config_json: dict. The HF config (see `configs.foreign_config_from_backbone`).
        vocabulary_path: str or None. Copied as `vocab.txt`.
    """
    os.makedirs(directory, exist_ok=True)
    hf = {}
    for name, value in tensors.items():
        key, transpose = canonical_to_hf(name)
        hf[key] = np.ascontiguousarray(value.T if transpose else value).astype("float32")
    with files.atomic_path(os.path.join(directory, "model.safetensors")) as tmp:
        safetensors.numpy.save_file(hf, tmp, metadata={"format": "pt"})
        files.give_default_mode(tmp)
    files.atomic_write_text(os.path.join(directory, "config.json"), json.dumps(config_json, indent=2) + "\n")
    if vocabulary_path is not None:
        with open(vocabulary_path, "rb") as f:
            files.atomic_write_bytes(os.path.join(directory, "vocab.txt"), f.read())
