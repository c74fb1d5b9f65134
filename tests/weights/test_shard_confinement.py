"""A sharded HF folder's index names files inside the folder only (issue 45): an entry
that resolves outside it (`..`, an absolute path, a symbolic link) is refused, naming the
entry and the index; huggingface_hub's cache layout (snapshot links into `blobs`) still loads."""

import json
import os

import numpy as np
import pytest
import safetensors.numpy

from keras_bert_zoo.weights import safetensors_checkpoint
from tests.weights import weights_testlib as lib

INDEX = "model.safetensors.index.json"


def _sharded(folder, shard_name, shard_dir=None):
    """`folder` with config.json and an index mapping every tensor to `shard_name`, the
    shard itself written to `shard_dir` (default: the folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    tensors = lib.hf_tensors("gelu")
    shard_dir = shard_dir or folder
    shard_dir.mkdir(parents=True, exist_ok=True)
    safetensors.numpy.save_file(tensors, str(shard_dir / os.path.basename(shard_name)))
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": {k: shard_name for k in tensors}}))
    return tensors


def test_index_entry_with_dotdot_outside_the_folder_is_refused(tmp_path):
    _sharded(tmp_path / "model", "../outside/model-00001-of-00001.safetensors", tmp_path / "outside")
    with pytest.raises(ValueError, match=r"model.safetensors.index.json: the weight_map entry '.*' -> "
                                         r"'\.\./outside/model-00001-of-00001.safetensors' points outside"):
        safetensors_checkpoint.read_hf_tensors(str(tmp_path / "model"))


def test_index_entry_with_an_absolute_path_is_refused(tmp_path):
    shard = tmp_path / "elsewhere" / "model-00001-of-00001.safetensors"
    _sharded(tmp_path / "model", str(shard), shard.parent)
    with pytest.raises(ValueError, match="points outside the model folder"):
        safetensors_checkpoint.load_safetensors(str(tmp_path / "model"))


def test_index_entry_through_a_symbolic_link_out_of_the_folder_is_refused(tmp_path):
    _sharded(tmp_path / "model", "linked/model-00001-of-00001.safetensors", tmp_path / "outside")
    os.symlink(tmp_path / "outside", tmp_path / "model" / "linked")
    with pytest.raises(ValueError, match="resolves to .*outside"):
        safetensors_checkpoint.load_safetensors(str(tmp_path / "model"))


def test_shards_inside_the_folder_and_hub_cache_links_still_load(tmp_path):
    tensors = _sharded(tmp_path / "model", "sub/../model-00001-of-00001.safetensors")
    raw, _ = safetensors_checkpoint.load_safetensors(str(tmp_path / "model"))
    assert sorted(raw) == sorted(tensors)
    # huggingface_hub's cache: snapshots/<revision>/<file> are links to ../../blobs/<hash>.
    repo = tmp_path / "models--x--bert"
    blobs, snapshot = repo / "blobs", repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    _sharded(blobs, "0123abcd", blobs)
    os.replace(blobs / INDEX, snapshot / INDEX)
    index = json.loads((snapshot / INDEX).read_text())
    index["weight_map"] = {k: "model-00001-of-00001.safetensors" for k in index["weight_map"]}
    (snapshot / INDEX).write_text(json.dumps(index))
    os.symlink("../../blobs/0123abcd", snapshot / "model-00001-of-00001.safetensors")
    raw, _ = safetensors_checkpoint.load_safetensors(str(snapshot))
    np.testing.assert_array_equal(raw["bert.pooler.dense.bias"], tensors["bert.pooler.dense.bias"])


def test_index_entry_naming_a_missing_shard_is_one_clear_line(tmp_path):
    _sharded(tmp_path / "model", "model-00001-of-00002.safetensors")
    index = json.loads((tmp_path / "model" / INDEX).read_text())
    index["weight_map"]["bert.pooler.dense.bias"] = "model-00002-of-00002.safetensors"
    (tmp_path / "model" / INDEX).write_text(json.dumps(index))
    with pytest.raises(ValueError, match=r"'bert.pooler.dense.bias' names the shard "
                                         r"'model-00002-of-00002.safetensors', which is not in"):
        safetensors_checkpoint.load_safetensors(str(tmp_path / "model"))
