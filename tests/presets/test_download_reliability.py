"""Downloads and archives under faults (issue 21), over HTTP on 127.0.0.1 only: a zip bomb
is refused by size (R22), a trickling or stalled server is given up on with progress and
no leftovers (R26), and a registry entry without a hash is called trust-on-first-use
while a known hash refuses a wrong file (R27)."""

import hashlib
import http.server
import os
import pathlib
import subprocess
import sys
import threading
import time
import zipfile

import pytest

from keras_bert_zoo.utils import archives
from keras_bert_zoo.presets import download, sources

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


class _SlowHandler(http.server.BaseHTTPRequestHandler):
    """Announces 1000 bytes, then sends one every `gap` seconds (`gap=None`: none at all)."""

    gap = 0.2
    stop = None

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        for _ in range(1000):
            if self.stop.wait(self.gap if self.gap is not None else 30):
                return
            if self.gap is not None:
                self.wfile.write(b"x")
                self.wfile.flush()

    def log_message(self, *args):
        pass


@pytest.fixture
def slow_server():
    stop = threading.Event()
    servers = []

    def start(gap):
        handler = type("Handler", (_SlowHandler,), {"gap": gap, "stop": stop})
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/weights.zip"

    yield start
    stop.set()
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


def _leftovers(directory):
    return [n for n in os.listdir(directory) if n.startswith(".tmp-")]


def test_r26_trickling_server_hits_the_overall_deadline(slow_server, tmp_path):
    url = slow_server(gap=0.1)
    target = tmp_path / "weights.zip"
    start = time.monotonic()
    with pytest.raises(download.PresetNotAvailableError, match=r"overall deadline of 1 s passed with \d+ bytes"):
        download.download(url, str(target), timeout=1.0, stall_timeout=5.0)
    assert time.monotonic() - start < 4
    assert not target.exists() and _leftovers(tmp_path) == []


def test_r26_deadline_from_the_environment(slow_server, tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_BERT_ZOO_DOWNLOAD_TIMEOUT", "0.8")
    with pytest.raises(download.PresetNotAvailableError, match="overall deadline of 0.8 s"):
        download.download(slow_server(gap=0.1), str(tmp_path / "w.zip"), stall_timeout=5.0)


def test_r26_stalled_server_is_given_up_after_the_stall_timeout(slow_server, tmp_path):
    start = time.monotonic()
    with pytest.raises(download.PresetNotAvailableError, match=r"no byte arrived for 0.5 s \(stall_timeout\)"):
        download.download(slow_server(gap=None), str(tmp_path / "w.zip"), stall_timeout=0.5)
    assert time.monotonic() - start < 4
    assert _leftovers(tmp_path) == []


def test_r26_the_leftover_of_a_killed_download_is_removed_by_the_next(tmp_path):
    source = tmp_path / "src.zip"
    source.write_bytes(os.urandom(1 << 20))
    target = tmp_path / "dl" / "w.zip"
    target.parent.mkdir()
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    killed = target.parent / f".tmp-w.zip-{process.pid}-abc_12"  # a download killed with SIGKILL
    killed.write_bytes(b"partial")
    digest = download.download(source.as_uri(), str(target), progress=False)
    assert digest == hashlib.sha256(source.read_bytes()).hexdigest()
    assert os.listdir(target.parent) == ["w.zip"]


def test_r26_progress_line_names_sizes(tmp_path, capsys):
    source = tmp_path / "src.zip"
    source.write_bytes(b"\x01" * 2_000_000)
    download.download(source.as_uri(), str(tmp_path / "w.zip"), name="bert_tiny", progress=True)
    assert "bert_tiny: downloaded 2.0 MB of 2.0 MB (100%)" in capsys.readouterr().err


def test_r22_zip_bomb_is_refused_by_its_unpacked_size(tmp_path):
    bomb = tmp_path / "bomb.zip"
    zeros = bytes(1 << 20)
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as zf, zf.open("model.safetensors", "w") as f:
        for _ in range(160):
            f.write(zeros)
    assert bomb.stat().st_size < 1 << 20  # < 1 MB packed, 160 MiB unpacked
    with pytest.raises(ValueError, match=r"would unpack to 167,772,160 bytes.*MAX_EXTRACT_RATIO=100"):
        archives.safe_extract(bomb, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert sorted(os.listdir(tmp_path)) == ["bomb.zip"]
    with pytest.raises(ValueError, match="zip bomb"):
        sources.locate(str(bomb))  # a local zip passed as a preset


def _entry(url, sha256=None):
    return {"name": "tofu_test", "weights": {"url": url, "sha256": sha256, "size_bytes": None}}


def test_r27_without_a_published_hash_the_message_says_trust_on_first_use(monkeypatch, _isolated_cache):
    monkeypatch.setenv("KERAS_BERT_ZOO_OFFLINE", "1")
    with pytest.raises(download.PresetNotAvailableError) as info:
        sources.ensure_cached_preset(_entry("https://example.invalid/w.zip"))
    assert "trusted on first use" in str(info.value) and "verified on first use" not in str(info.value)
    readme = README.read_text()
    assert "sha256-verified" not in readme and "trust on first use" in readme


def test_r27_a_known_hash_refuses_a_wrong_placed_file(monkeypatch, _isolated_cache, tmp_path):
    published = hashlib.sha256(b"the real archive").hexdigest()
    entry = _entry("https://example.invalid/w.zip", sha256=published)
    monkeypatch.setenv("KERAS_BERT_ZOO_OFFLINE", "1")
    with pytest.raises(download.PresetNotAvailableError, match=f"checked against the published sha256 {published}"):
        sources.ensure_cached_preset(entry)
    placed = _isolated_cache / "presets" / "tofu_test" / "w.zip"
    placed.write_bytes(b"something else")  # the user follows the message with the wrong file
    with pytest.raises(download.IntegrityError, match=f"Expected sha256 {published}, actual sha256 "):
        sources.ensure_cached_preset(entry)
    assert not (_isolated_cache / "presets" / "tofu_test" / "download.json").exists()
