"""Presets by registry-style entry over HTTP on 127.0.0.1: download, checksum, safe
extraction, conversion once, cache hits; offline and network failures; R13."""

import functools
import hashlib
import http.server
import os
import socket
import threading
import zipfile

import pytest

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.presets import download, loading, config as preset_config
from tests.weights import weights_testlib as lib


class _CountingHandler(http.server.SimpleHTTPRequestHandler):
    requests = []

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.requests.append(self.path)
        super().do_GET()

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = type("Handler", (_CountingHandler,), {"requests": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{httpd.server_address[1]}", handler.requests
    httpd.shutdown()
    httpd.server_close()


def _google_zip(tmp_path, root):
    """A zip laid out like Google's: one folder with ckpt, bert_config.json, vocab.txt."""
    folder = lib.make_google_dir("gelu", str(tmp_path / "src" / "uncased_L-2_H-16_A-2"))
    path = root / "uncased_L-2_H-16_A-2.zip"
    with zipfile.ZipFile(path, "w") as zf:
        for name in sorted(os.listdir(folder)):
            zf.write(os.path.join(folder, name), f"uncased_L-2_H-16_A-2/{name}")
    return path


def _entry(url, path, with_hash=True):
    data = path.read_bytes()
    return {
        "name": "test_tiny_en_uncased",
        "config": preset_config.read_local_config(lib.fixture_dir("gelu")),
        "lowercase": True,
        "weights": {
            "url": f"{url}/{path.name}",
            "format": "google_checkpoint_zip",
            "sha256": hashlib.sha256(data).hexdigest() if with_hash else None,
            "size_bytes": len(data) if with_hash else None,
        },
    }


def _load_and_check(entry):
    backbone = BertBackbone(**entry["config"], dropout=0.0)
    loading.load_backbone_weights(backbone, entry)
    exp = lib.expected("gelu")
    lib.assert_matches_hf(backbone(lib.inputs_of(exp), training=False), exp, keys=("sequence_output", "pooled_output"))


def test_download_verify_extract_convert_then_cache_hit(server, tmp_path, _isolated_cache):
    root, url, requests = server
    entry = _entry(url, _google_zip(tmp_path, root))
    _load_and_check(entry)
    assert requests == ["/uncased_L-2_H-16_A-2.zip"]
    preset_dir = _isolated_cache / "presets" / "test_tiny_en_uncased"
    assert sorted(os.listdir(preset_dir / "converted")) == ["config.json", "manifest.json", "vocab.txt", "weights.safetensors"]
    assert not (preset_dir / "extracted").exists()
    _load_and_check(entry)  # second load: the converted file, no request
    assert len(requests) == 1
    vocab = loading.get_preset_vocabulary(entry)
    assert open(vocab).read() == open(os.path.join(lib.fixture_dir("gelu"), "vocab.txt")).read()


def test_wrong_registry_hash_keeps_nothing(server, tmp_path, _isolated_cache):
    root, url, _ = server
    entry = _entry(url, _google_zip(tmp_path, root))
    entry["weights"]["sha256"] = "0" * 64
    with pytest.raises(download.IntegrityError, match="expected sha256 0{64}, actual sha256 [0-9a-f]{64}"):
        _load_and_check(entry)
    preset_dir = _isolated_cache / "presets" / "test_tiny_en_uncased"
    assert not preset_dir.exists() or os.listdir(preset_dir) == []


def test_hash_recorded_at_first_download_then_verified(server, tmp_path, _isolated_cache):
    root, url, requests = server
    entry = _entry(url, _google_zip(tmp_path, root), with_hash=False)
    _load_and_check(entry)
    preset_dir = _isolated_cache / "presets" / "test_tiny_en_uncased"
    record = lib_json(preset_dir / "download.json")
    zip_path = preset_dir / "uncased_L-2_H-16_A-2.zip"
    assert record["sha256"] == hashlib.sha256(zip_path.read_bytes()).hexdigest()
    # Corrupt the cached zip and force a re-conversion: the recorded hash catches it.
    _flip_byte(zip_path, 100)
    import shutil

    shutil.rmtree(preset_dir / "converted")
    with pytest.raises(download.IntegrityError, match=f"{zip_path}: sha256 mismatch. Expected sha256 {record['sha256']}"):
        _load_and_check(entry)
    assert not zip_path.exists()
    _load_and_check(entry)  # fetched afresh, verified against the record
    assert len(requests) == 2


def test_flipped_byte_in_cached_weights_is_refused_and_removed(server, tmp_path, _isolated_cache):
    # R13
    root, url, requests = server
    entry = _entry(url, _google_zip(tmp_path, root))
    _load_and_check(entry)
    weights = _isolated_cache / "presets" / "test_tiny_en_uncased" / "converted" / "weights.safetensors"
    good = hashlib.sha256(weights.read_bytes()).hexdigest()
    _flip_byte(weights, weights.stat().st_size // 2)
    bad = hashlib.sha256(weights.read_bytes()).hexdigest()
    with pytest.raises(download.IntegrityError) as info:
        _load_and_check(entry)
    message = str(info.value)
    assert str(weights) in message and good in message and bad in message
    assert not weights.exists()
    _load_and_check(entry)  # rebuilt from the verified zip, no new download
    assert len(requests) == 1


def test_offline_fails_at_once_with_instructions_then_accepts_supplied_zip(server, tmp_path, monkeypatch, _isolated_cache):
    root, url, requests = server
    zip_path = _google_zip(tmp_path, root)
    entry = _entry(url, zip_path)
    monkeypatch.setenv("KERAS_BERT_ZOO_OFFLINE", "1")
    with pytest.raises(download.PresetNotAvailableError) as info:
        _load_and_check(entry)
    message = str(info.value)
    expected_place = _isolated_cache / "presets" / "test_tiny_en_uncased" / zip_path.name
    assert entry["weights"]["url"] in message and str(expected_place) in message and "local directory or zip" in message
    assert requests == []
    expected_place.write_bytes(zip_path.read_bytes())  # the user follows the message
    _load_and_check(entry)
    assert requests == []


def test_registry_name_offline_and_unreachable_server(monkeypatch):
    monkeypatch.setenv("KERAS_BERT_ZOO_OFFLINE", "1")
    with pytest.raises(download.PresetNotAvailableError, match="uncased_L-2_H-128_A-2.zip"):
        BertBackbone.from_preset("bert_tiny_en_uncased")
    monkeypatch.delenv("KERAS_BERT_ZOO_OFFLINE")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    entry = {"name": "unreachable", "weights": {"url": f"http://127.0.0.1:{port}/x.zip"}}
    with pytest.raises(download.PresetNotAvailableError, match="Download of .* failed"):
        loading.get_preset_vocabulary(entry)


def test_cache_dir_is_created_and_never_falls_back(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_BERT_ZOO_CACHE", str(tmp_path / "new" / "cache"))
    assert download.cache_dir() == str(tmp_path / "new" / "cache") and os.path.isdir(download.cache_dir())
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    monkeypatch.setenv("KERAS_BERT_ZOO_CACHE", str(blocker / "cache"))
    with pytest.raises(OSError, match="KERAS_BERT_ZOO_CACHE"):
        download.cache_dir()
    monkeypatch.delenv("KERAS_BERT_ZOO_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert download.cache_dir() == str(tmp_path / "home" / ".cache" / "keras_bert_zoo")


def test_local_google_zip_loads_wherever_a_name_does(tmp_path):
    zip_path = _google_zip(tmp_path, tmp_path)
    exp = lib.expected("gelu")
    pretrainer = lib.build_pretrainer(str(zip_path))
    lib.assert_matches_hf(lib.pretrainer_outputs(pretrainer, exp), exp)
    assert loading.get_preset_vocabulary(str(zip_path)).endswith("vocab.txt")


def _flip_byte(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def lib_json(path):
    import json

    with open(path) as f:
        return json.load(f)
