"""Slow-loris probe: does tools/serve.py still answer while 20,000 idle or half-open connections are open?

A slow-loris client opens many connections and sends nothing, or a request's headers a few bytes
at a time, so that a server without a header timeout or a connection limit holds a file descriptor
for each until it has none left and stops accepting real clients. The probe opens `connections`
TCP connections to the server from this process (half of them send the start of a request's
headers and stop there, half send nothing), keeps every one open on its side, and then times real
`POST :predict` requests from fresh connections, each expected within a second.

Measured: the seconds to open the connections, the latency of each real request with them open
(and whether it was answered 200), how many the server closed while they were open (`/metrics`:
`kbz_connections{state="evicted"}` and `{state="header_timeout"}`; the server holds at most
`--max-connections`, the least recently active idle connection closed first), its open
connections then, and its stderr's size (a server out of descriptors logs each failed accept).
A process needs a descriptor per connection it holds: the probe raises its soft open-file limit to
the hard one and, where that is still too few for all the connections, holds them from several
processes (the section says how many, and the limit).
"""

import argparse
import os
import re
import resource
import socket
import tempfile
import time
import urllib.request

from benchmarks.common import cpu_description
from benchmarks.serving_load import free_port

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "probe"
PARTIAL = b"POST /v1/models/probe:predict HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"


def raise_own_fd_limit():
    """Raises this process's soft open-file limit to its hard one; returns it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        return hard
    return soft


def hold_idle(port, count, ready, done):
    """Child process: opens `count` connections to the server (half idle, half with a request's headers
    begun), says so on `ready` (how many it opened, seconds), and holds them until `done` is set."""
    raise_own_fd_limit()
    held, began = [], time.perf_counter()
    for i in range(count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(("127.0.0.1", port))
        if i % 2:
            try:
                sock.send(PARTIAL)
            except OSError:
                pass  # the server may have closed it already (beyond --max-connections): it stays open here
        held.append(sock)
    ready.put((len(held), time.perf_counter() - began))
    done.wait()
    for sock in held:
        sock.close()


def timed_request(url, name=NAME, body=b'{"instances": ["a gripping film"]}', timeout=10):
    """`(seconds, status)` of one real predict request to model `name` on a fresh connection."""
    request = urllib.request.Request(f"{url}/v1/models/{name}:predict", data=body,
                                     headers={"Content-Type": "application/json"})
    began = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
            status = response.status
    except Exception as error:  # noqa: BLE001 (a refused or failed request is the probe's finding)
        return time.perf_counter() - began, f"{type(error).__name__}: {error}"
    return time.perf_counter() - began, status


def server_counts(url):
    """`{state: value}` of the server's `kbz_connections` series."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {m.group(1): float(m.group(2)) for m in re.finditer(r'^kbz_connections\{state="(\w+)"\} (\S+)$', text, re.M)}


def probe(url, port, connections=20_000, requests=5, name=NAME):
    """Opens `connections` idle connections (from as many processes as the open-file limit needs),
    then times `requests` real ones from this process; returns the findings."""
    import multiprocessing  # lazy: the probe only

    per_process = max(1, raise_own_fd_limit() - 512)
    holders = -(-connections // per_process)
    context = multiprocessing.get_context("fork")
    ready, done = context.Queue(), context.Event()
    shares = [connections // holders + (i < connections % holders) for i in range(holders)]
    children = [context.Process(target=hold_idle, args=(port, n, ready, done), daemon=True) for n in shares]
    began = time.perf_counter()
    for child in children:
        child.start()
    try:
        opened = [ready.get(timeout=300) for _ in children]
        opened_s = time.perf_counter() - began
        timings = [timed_request(url, name) for _ in range(requests)]
        counts = server_counts(url)
    finally:
        done.set()
        for child in children:
            child.join(timeout=60)
    return {"connections": sum(n for n, _ in opened), "open_seconds": opened_s, "holders": holders,
            "per_process": per_process, "latencies": [t for t, _ in timings], "statuses": [s for _, s in timings],
            "server": counts}


def run(args):
    """The section's Markdown: a tiny classifier export served with tools/serve.py's defaults."""
    import subprocess  # lazy: the section's server process only
    import sys  # lazy: as above

    from benchmarks._subprocess import run_config  # lazy: as above

    connections = 2_000 if getattr(args, "quick", False) else 20_000
    with tempfile.TemporaryDirectory() as workdir:
        made = run_config("benchmarks.slow_loris", "tiny_export", dict(path=os.path.join(workdir, NAME, "1")))
        if "error" in made:
            raise RuntimeError(f"export failed: {made['error']}")
        port = free_port()
        log = open(os.path.join(workdir, "server.log"), "w+")
        server = subprocess.Popen([sys.executable, os.path.join(ROOT, "tools", "serve.py"), "--model",
                                   os.path.join(workdir, NAME), "--port", str(port)], cwd=ROOT, stdout=log, stderr=log)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, server)
            before = timed_request(url)
            found = probe(url, port, connections)
        finally:
            server.terminate()
            server.wait(timeout=60)
        log_kb = os.path.getsize(log.name) / 1000
    answered = [f"{t * 1000:.0f} ms ({s})" for t, s in zip(found["latencies"], found["statuses"])]
    server = found["server"]
    return "\n".join([
        "## Slow-loris probe: tools/serve.py with 20,000 idle connections open",
        "",
        f"With {found['connections']:,} connections open from the probe (half idle, half with a request's headers "
        f"begun and never finished; opened in {found['open_seconds']:.1f} s), {len(answered)} real predict requests "
        f"on fresh connections were answered in {', '.join(answered)} (goal < 1 s each; {before[0] * 1000:.0f} ms "
        f"before the probe). The server, at its defaults (--max-connections 4096, --header-timeout-s 10), had "
        f"closed {server.get('evicted', 0):,.0f} of them to stay within its limit (least recently active idle "
        f"first) and {server.get('header_timeout', 0):,.0f} for their headers' timeout, and held "
        f"{server.get('open', 0):,.0f} open; its log grew to {log_kb:.1f} kB for the whole run.",
        "",
        f"Conditions: {cpu_description()}; load average {' '.join(f'{v:.1f}' for v in os.getloadavg())} at the end, "
        f"on {os.cpu_count()} cores shared with other jobs; probe and server on the same machine. The probe's "
        f"open-file limit is {found['per_process'] + 512} per process (its hard limit, which this machine does not "
        f"let even root raise): the connections were held by {found['holders']} processes; the server raised its "
        "own soft limit to the hard one.",
    ])


def wait_ready(url, server, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"tools/serve.py exited with {server.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/v1/models/{NAME}", timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    raise TimeoutError(url)


def tiny_export(path):
    """Worker: a tiny classifier (2 layers, width 16, random weights) exported to `path`: the probe
    measures the server's connections, not the model."""
    import keras  # lazy: the worker process only

    from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor, BertTokenizer, export  # lazy: as above

    keras.utils.set_random_seed(0)
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"a gripping film dull and far too long".split()]
    backbone = BertBackbone(len(vocabulary), 2, 2, 16, 32, max_sequence_length=32)
    preprocessor = BertPreprocessor(BertTokenizer(vocabulary, lowercase=True), sequence_length=32)
    export(BertClassifier(backbone, 2, preprocessor=preprocessor, labels=["neg", "pos"]), path, signatures=("text",))
    return {"path": path}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 connections")
    print(run(parser.parse_args(argv)))


if __name__ == "__main__":  # python -m benchmarks.slow_loris
    main()
