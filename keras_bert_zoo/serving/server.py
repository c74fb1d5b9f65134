"""A model server for our SavedModel exports on KServe's model server (`kserve.Model` +
`kserve.ModelServer`), answering TF Serving's REST API (KServe's v1 protocol):

- `POST /v1/models/<name>:predict` with `{"instances": [...]}` (row format) -> `{"predictions":
  [...]}` or `{"inputs": ...}` (columnar) -> `{"outputs": ...}`, as TF Serving answers the same
  SavedModel: one named input may be given bare, one named output is given bare, strings come
  back as strings and bytes that are not UTF-8 as `{"b64": ...}` (inputs may be `{"b64": ...}` too);
- `GET /v1/models/<name>`: TF Serving's model status (`{"model_version_status": [{"version",
  "state": "AVAILABLE", "status": {"error_code": "OK", ...}}]}`), with KServe's `name` and
  `ready` keys beside it, so clients of either find what they read.

One server answers several exports, each under its own name, as TF Serving's model config does.
An export given as TF Serving's base path (`DIR/<version>/saved_model.pb`, as tools/export.py
writes versions) serves its highest version; a folder named by a number is that version.

Outputs padded to the longest row of a call (a token classifier's entities, the features'
tokens, fill-mask's masks: each has its `num_*` count) are cut to each row's own count, so a
row's answer never depends on the requests it was batched with.

Concurrent requests are batched dynamically: each request waits in an asyncio queue, and one
worker takes up to `max_batch_size` rows (waiting at most `max_wait_ms` for more after the first)
into one call of the signature, run off the event loop. KServe has no in-process batcher (its
batcher is the Kubernetes agent sidecar), hence the queue. A request larger than a batch runs
alone, in batches; more than `max_instances` rows get a 413; more than `max_queue` waiting
requests get a 503 with `Retry-After`. Bad requests get a 400 naming what is wrong (KServe's
`InvalidInput`), and never reach the queue.

kserve is an optional dependency (the `serve` extra): import this module only to serve.
"""

import asyncio
import os
import time

import fastapi
import kserve
import kserve.model_server
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops our exports' tokenizers use)
from kserve.errors import InvalidInput, ModelNotFound

from keras_bert_zoo.serving.client import input_names
from keras_bert_zoo.serving.rest_format import (
    SIGNATURE,
    BadRequest,
    cut_padding,
    encode_value,
    format_response,
    parse_request,
    value_size,
)

RETRY_AFTER_S = 1
def resolve_version(path):
    """An export folder -> (the SavedModel folder, its version as TF Serving names it).

    `DIR/<n>/saved_model.pb` folders (TF Serving's base path): the highest n. A SavedModel folder
    named by a number: that number. Another SavedModel folder: version "1"."""
    path = os.path.normpath(path)
    if os.path.isfile(os.path.join(path, "saved_model.pb")):
        name = os.path.basename(path)
        return path, name if name.isdigit() else "1"
    versions = sorted(
        (int(v) for v in (os.listdir(path) if os.path.isdir(path) else [])
         if v.isdigit() and os.path.isfile(os.path.join(path, v, "saved_model.pb"))),
    )
    if not versions:
        raise FileNotFoundError(
            f"--model {path}: no saved_model.pb there nor in a version folder (<n>/saved_model.pb). "
            "Give the folder tools/export.py wrote."
        )
    return os.path.join(path, str(versions[-1])), str(versions[-1])


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


class Overloaded(fastapi.HTTPException):
    """More requests wait than the queue holds: 503 with `Retry-After` (FastAPI answers it)."""

    def __init__(self, limit):
        super().__init__(
            503,
            detail=f"Server overloaded: more than {limit} requests are queued. Retry later.",
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )


class TooLarge(fastapi.HTTPException):
    """A request with more rows than the server answers at once: 413."""

    def __init__(self, count, limit):
        super().__init__(413, detail=f"{count} instances in one request; at most {limit} are answered. Split it.")


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
        """Loads the export's serving signature and warms it up."""
        self.saved_model_dir, self.version = resolve_version(self.export_dir)
        self.loaded = tf.saved_model.load(self.saved_model_dir)
        self.function = self.loaded.signatures[SIGNATURE]
        self.names = input_names(self.function)
        specs = self.function.structured_input_signature[1]
        self.shapes = {name: tuple(specs[name].shape[1:]) for name in self.names}
        self.run_rows([{name: warm_up_value(self.shapes[name]) for name in self.names}])
        self.ready = True
        return self.ready

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
            size = len(group[0].rows)
            deadline = loop.time() + self.max_wait_s
            while size < self.max_batch_size:
                timeout = deadline - loop.time()
                try:
                    item = self.queue.get_nowait() if timeout <= 0 else await asyncio.wait_for(self.queue.get(), timeout)
                except (asyncio.QueueEmpty, asyncio.TimeoutError):
                    break
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
        try:
            form, rows = parse_request(payload, self.names, self.shapes)
        except BadRequest as error:
            raise InvalidInput(str(error)) from error
        if len(rows) > self.max_instances:
            raise TooLarge(len(rows), self.max_instances)
        loop = asyncio.get_running_loop()
        if self.queue is None or self.loop is not loop:  # the first request (of this event loop)
            self.queue, self.loop = asyncio.Queue(), loop
            self.worker = loop.create_task(self.batch_worker())
        if self.queue.qsize() >= self.max_queue:
            raise Overloaded(self.max_queue)
        future = loop.create_future()
        await self.queue.put(Pending(rows, future))
        return format_response(form, await future)


def add_status_route(app, models):
    """`GET /v1/models/<name>` answers TF Serving's status; added before KServe's own routes, so it
    is the one matched (KServe's answers only `{"name", "ready"}`)."""

    async def status(model_name: str):
        if model_name not in models:
            raise ModelNotFound(model_name)
        return model_status(models[model_name])

    app.add_api_route("/v1/models/{model_name}", status, methods=["GET"])


def serve(exports, port=8501, max_batch_size=32, max_wait_ms=5.0, max_queue=256, max_instances=4096,
          delay_ms=0.0, grace_period=30):
    """Serves exports (`{name: export folder}`) on `port` until SIGTERM/SIGINT (in-flight requests
    finish first)."""
    models = {}
    for name, export_dir in exports.items():
        model = ExportModel(name, export_dir, max_batch_size, max_wait_ms, max_queue, max_instances, delay_ms)
        started = time.perf_counter()
        model.load()
        print(f"Loaded {model.saved_model_dir} as {name!r} version {model.version} (inputs {model.names}) "
              f"in {time.perf_counter() - started:.1f} s.", flush=True)
        models[name] = model
    add_status_route(kserve.model_server.app, models)
    server = kserve.ModelServer(http_port=port, workers=1, enable_grpc=False, enable_docs_url=False,
                                enable_latency_logging=False, grace_period=grace_period)
    server.start(list(models.values()))
