"""A model server for our SavedModel exports on KServe (`kserve.Model`, KServe's model repository
and v1 routes), answering TF Serving's REST API (KServe's v1 protocol):

- `POST /v1/models/<name>:predict` with `{"instances": [...]}` (row format) -> `{"predictions":
  [...]}` or `{"inputs": ...}` (columnar) -> `{"outputs": ...}`, as TF Serving answers the same
  SavedModel: one named input may be given bare, one named output is given bare, strings come
  back as strings and bytes that are not UTF-8 as `{"b64": ...}` (inputs may be `{"b64": ...}` too);
- `GET /v1/models/<name>`: TF Serving's model status (`{"model_version_status": [{"version",
  "state": "AVAILABLE", "status": {"error_code": "OK", ...}}]}`), with KServe's `name` and
  `ready` keys beside it, so clients of either find what they read.

One server answers several exports, each under its own name, as TF Serving's model config does.
An export given as TF Serving's base path (`DIR/<version>/saved_model.pb`, as tools/export.py
writes versions) serves its highest version that loads: a newer one that does not (a corrupt or
half-copied file) is named in one log line, with its version and the reason, and the next one is
served; a folder named by a number is that version.

Outputs padded to the longest row of a call (a token classifier's entities, the features'
tokens, fill-mask's masks: each has its `num_*` count) are cut to each row's own count, so a
row's answer never depends on the requests it was batched with.

Concurrent requests are batched dynamically: each request waits in an asyncio queue, and one
worker takes up to `max_batch_size` rows (waiting at most `max_wait_ms` for more after the first)
into one call of the signature, run off the event loop. KServe has no in-process batcher (its
batcher is the Kubernetes agent sidecar), hence the queue. A request larger than a batch runs
alone, in batches; more than `max_instances` rows get a 413; more than `max_queue` waiting
requests get a 503 with `Retry-After`. Bad requests get a 400 naming what is wrong, and never
reach the queue. `/metrics` (Prometheus) has, per model, the rows of each call of the signature
(`kbz_batch_size`, a histogram: batching at work shows as calls of many rows) and the requests
waiting (`kbz_queue_depth`), beside the connections the server closed (`server_app.py`).

The HTTP side (routes, limits, timeouts, signals, logging) is `server_app.serve`'s.
kserve is an optional dependency (the `serve` extra): import this module only to serve.
"""

import asyncio
import logging
import os

import kserve
import numpy as np
import prometheus_client
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops our exports' tokenizers use)

from keras_bert_zoo.serving.client import input_names
from keras_bert_zoo.serving.http_front import HttpError
from keras_bert_zoo.serving.rest_format import SIGNATURE, cut_padding, encode_value, format_response, parse_request, \
    value_size
from keras_bert_zoo.serving.versions import is_version_name

RETRY_AFTER_S = 1
log = logging.getLogger("keras_bert_zoo.serving")
BATCH_SIZE = prometheus_client.Histogram(
    "kbz_batch_size", "Rows in each call of a model's signature (dynamic batching groups requests into one call).",
    ["model"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096))
QUEUE_DEPTH = prometheus_client.Gauge("kbz_queue_depth", "Requests waiting for a model's batch worker.", ["model"])


def candidate_versions(path):
    """An export folder -> `[(SavedModel folder, version as TF Serving names it)]`, newest first.

    `DIR/<n>/saved_model.pb` folders (TF Serving's base path): each n, highest first (a name that
    is not ASCII digits is not a version, as TF Serving skips it). A SavedModel folder named by a
    number: that number. Another SavedModel folder: version "1"."""
    path = os.path.normpath(path)
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        name = os.path.basename(path)
        return [(path, name if is_version_name(name) else "1")]
    versions = sorted(
        (int(v) for v in (os.listdir(path) if os.path.isdir(path) else [])
         if is_version_name(v) and os.path.isfile(os.path.join(path, v, "saved_model.pb"))), reverse=True)
    if not versions:
        raise FileNotFoundError(
            f"--model {path}: no saved_model.pb there nor in a version folder (<n>/saved_model.pb). "
            "Give the folder tools/export.py wrote."
        )
    return [(os.path.join(path, str(v)), str(v)) for v in versions]


def load_failure(folder, error):
    """One line saying why a SavedModel folder does not load: the file and the reason."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    reason = next((line for line in lines if folder in line), lines[0] if lines else type(error).__name__)
    return f"{os.path.join(folder, 'saved_model.pb')} ({type(error).__name__}: {reason[:300]})"


def warm_up_value(shape):
    """A row value of the signature's per-row shape, for the first (graph-building) call."""
    return [warm_up_value(shape[1:]) for _ in range(shape[0] or 1)] if shape else b"warm up"


def model_status(model):
    """TF Serving's `GET /v1/models/<name>` answer, with KServe's `name` and `ready` beside it."""
    state = "AVAILABLE" if model.ready else "LOADING"
    return {
        "model_version_status": [
            {"version": model.version, "state": state, "status": {"error_code": "OK", "error_message": ""}}
        ],
        "name": model.name,
        "ready": bool(model.ready),
    }


def overloaded(limit):
    """More requests wait than the queue holds: 503 with `Retry-After`."""
    return HttpError(503, f"Server overloaded: more than {limit} requests are queued. Retry later.",
                     [(b"retry-after", str(RETRY_AFTER_S).encode())])


def too_many_rows(count, limit):
    """A request with more rows than the server answers at once: 413."""
    return HttpError(413, f"{count} instances in one request; at most {limit} are answered (--max-instances). "
                          "Split it.")


class Pending:
    """One request in the queue: its rows and the future its answers go to."""

    def __init__(self, rows, future):
        self.rows = rows
        self.future = future


class ExportModel(kserve.Model):
    """One of our SavedModel exports behind KServe, with dynamic batching.

    Args:
        name: the model's name in the URL.
        export_dir: a SavedModel written by `keras_bert_zoo.export`.
        max_batch_size: most rows in one call of the signature (1: no batching).
        max_wait_ms: how long the first request of a batch waits for others.
        max_queue: most requests waiting; beyond it requests get 503.
        max_instances: most rows in one request; beyond it 413.
        delay_ms: sleep before each batch (tests: makes a batch deterministically slow).
    """

    def __init__(self, name, export_dir, max_batch_size=32, max_wait_ms=5.0, max_queue=256,
                 max_instances=4096, delay_ms=0.0):
        super().__init__(name)
        self.export_dir = export_dir
        self.saved_model_dir = None
        self.version = None
        self.max_batch_size = max(1, int(max_batch_size))
        self.max_wait_s = max(0.0, max_wait_ms) / 1000.0
        self.max_queue = max(1, int(max_queue))
        self.max_instances = int(max_instances)
        self.delay_s = delay_ms / 1000.0
        self.queue = None
        self.loop = None
        self.worker = None
        self.function = None
        self.names = []
        self.shapes = {}
        self.batches = 0

    def load(self):
        """Loads the newest version of the export that loads and answers, and warms it up; a newer
        one that fails is named in one warning line (file, version, reason).

        Raises:
            ValueError: no version loads, naming each and why.
        """
        failures = []
        for folder, version in candidate_versions(self.export_dir):
            try:
                self.load_version(folder)
            except Exception as error:  # noqa: BLE001 (any failure to load: the next version is tried)
                failures.append(f"version {version}: {load_failure(folder, error)}")
                log.warning("%s: version %s does not load: %s; trying the next version.", self.name, version,
                            load_failure(folder, error))
                continue
            self.saved_model_dir, self.version, self.ready = folder, version, True
            return self.ready
        raise ValueError(f"--model {self.export_dir}: no version loads ({'; '.join(failures)}). Export it again "
                         "(tools/export.py).")

    def load_version(self, folder):
        loaded = tf.saved_model.load(folder)
        self.function = loaded.signatures[SIGNATURE]
        self.loaded = loaded
        self.names = input_names(self.function)
        specs = self.function.structured_input_signature[1]
        self.shapes = {name: tuple(specs[name].shape[1:]) for name in self.names}
        self.run_rows([{name: warm_up_value(self.shapes[name]) for name in self.names}])

    def status(self):
        """TF Serving's `GET /v1/models/<name>` answer (`model_status`)."""
        return model_status(self)

    def run_rows(self, rows):
        """Calls the signature on rows (one padded batch); returns one output dict per row."""
        inputs = {name: tf.constant([row[name] for row in rows], tf.string) for name in self.names}
        outputs = {key: np.asarray(value).tolist() for key, value in self.function(**inputs).items()}
        return [cut_padding({key: encode_value(values[i]) for key, values in outputs.items()})
                for i in range(len(rows))]

    def run_batches(self, rows):
        """Rows in batches of at most max_batch_size, longest-similar together (as predict)."""
        order = np.argsort([sum(value_size(v) for v in row.values()) for row in rows], kind="stable")
        results = [None] * len(rows)
        for begin in range(0, len(rows), self.max_batch_size):
            chunk = order[begin : begin + self.max_batch_size]
            for i, result in zip(chunk, self.run_rows([rows[i] for i in chunk])):
                results[i] = result
        return results

    async def batch_worker(self):
        """Takes queued requests into batches and answers them, forever."""
        loop = asyncio.get_running_loop()
        while True:
            group = [await self.queue.get()]
            QUEUE_DEPTH.labels(self.name).set(self.queue.qsize())
            size = len(group[0].rows)
            deadline = loop.time() + self.max_wait_s
            while size < self.max_batch_size:
                timeout = deadline - loop.time()
                try:
                    item = self.queue.get_nowait() if timeout <= 0 else await asyncio.wait_for(self.queue.get(), timeout)
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
                QUEUE_DEPTH.labels(self.name).set(self.queue.qsize())
                if size + len(item.rows) > self.max_batch_size:
                    await self.run_group(group)
                    group, size = [item], len(item.rows)
                    continue
                group.append(item)
                size += len(item.rows)
            await self.run_group(group)

    async def run_group(self, group):
        group = [item for item in group if not item.future.cancelled()]
        if not group:
            return
        rows = [row for item in group for row in item.rows]
        BATCH_SIZE.labels(self.name).observe(len(rows))
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            results = await asyncio.to_thread(self.run_batches, rows)
            self.batches += 1
        except Exception as error:  # a failure answers every request of the batch, and the worker lives on
            for item in group:
                if not item.future.done():
                    item.future.set_exception(error)
            return
        begin = 0
        for item in group:
            if not item.future.done():
                item.future.set_result(results[begin : begin + len(item.rows)])
            begin += len(item.rows)

    async def predict(self, payload, headers=None):
        """A v1 request body -> TF Serving's response; batched with concurrent requests."""
        form, rows = parse_request(payload, self.names, self.shapes)  # BadRequest: 400
        if len(rows) > self.max_instances:
            raise too_many_rows(len(rows), self.max_instances)
        loop = asyncio.get_running_loop()
        if self.queue is None or self.loop is not loop:  # the first request (of this event loop)
            self.queue, self.loop = asyncio.Queue(), loop
            self.worker = loop.create_task(self.batch_worker())
        if self.queue.qsize() >= self.max_queue:
            raise overloaded(self.max_queue)
        future = loop.create_future()
        await self.queue.put(Pending(rows, future))
        QUEUE_DEPTH.labels(self.name).set(self.queue.qsize())
        return format_response(form, await future)
