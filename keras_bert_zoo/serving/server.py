"""A model server for our SavedModel exports on KServe's model server (`kserve.Model` +
`kserve.ModelServer`), answering TF Serving's REST API (KServe's v1 protocol):

- `POST /v1/models/<name>:predict` with `{"instances": [...]}` (row format) -> `{"predictions":
  [...]}` or `{"inputs": ...}` (columnar) -> `{"outputs": ...}`, as TF Serving answers the same
  SavedModel: one named input may be given bare, one named output is given bare, strings come
  back as strings and bytes that are not UTF-8 as `{"b64": ...}` (inputs may be `{"b64": ...}` too);
- `GET /v1/models/<name>`: KServe's readiness `{"name": ..., "ready": true}` (TF Serving's
  `model_version_status` list is not produced: KServe owns that route).

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
import base64
import binascii
import time

import fastapi
import kserve
import numpy as np
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops our exports' tokenizers use)
from kserve.errors import InvalidInput

from keras_bert_zoo.serving.client import input_names

SIGNATURE = "serving_default"
RETRY_AFTER_S = 1


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


def decode_value(value, where):
    """A JSON input value (a string, or `{"b64": ...}` for bytes) -> bytes; else InvalidInput."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and list(value) == ["b64"] and isinstance(value["b64"], str):
        try:
            return base64.b64decode(value["b64"], validate=True)
        except (binascii.Error, ValueError) as error:
            raise InvalidInput(f"{where}: invalid base64 ({error}).") from error
    raise InvalidInput(f'{where} must be a string or {{"b64": "..."}}. Received {type(value).__name__}: {value!r:.100}.')


def encode_value(value):
    """An output value (numpy .tolist()) as TF Serving writes it in JSON."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    return value


def parse_request(payload, names):
    """A v1 request body -> (format "row"|"columnar", rows: list of {input: bytes}); InvalidInput if bad."""
    if not isinstance(payload, dict):
        raise InvalidInput(f'A request must be a JSON object. Received {type(payload).__name__}.')
    signature = payload.get("signature_name", SIGNATURE)
    if signature != SIGNATURE:
        raise InvalidInput(f"Unknown signature_name {signature!r}: this server answers {SIGNATURE!r}.")
    keys = set(payload) - {"signature_name"}
    if keys not in ({"instances"}, {"inputs"}):
        raise InvalidInput(
            'A request must hold exactly one of "instances" (row format) or "inputs" (columnar), '
            f"as TF Serving's REST API. Received keys {sorted(payload)}."
        )
    if "instances" in payload:
        instances = payload["instances"]
        if not isinstance(instances, list) or not instances:
            raise InvalidInput(f'"instances" must be a non-empty list. Received {instances!r:.100}.')
        rows = []
        for index, row in enumerate(instances):
            if len(names) == 1 and not (isinstance(row, dict) and list(row) != ["b64"]):
                row = {names[0]: row}
            if not isinstance(row, dict) or sorted(row) != names:
                raise InvalidInput(f"Instance {index} must be an object with exactly the inputs {names}. Received {row!r:.100}.")
            rows.append({name: decode_value(row[name], f"Instance {index} input {name!r}") for name in names})
        return "row", rows
    columns = payload["inputs"]
    if len(names) == 1 and not isinstance(columns, dict):
        columns = {names[0]: columns}
    if not isinstance(columns, dict) or sorted(columns) != names:
        raise InvalidInput(f'"inputs" must hold exactly the inputs {names}. Received {columns!r:.100}.')
    for name, values in columns.items():
        if not isinstance(values, list) or not values:
            raise InvalidInput(f"Input {name!r} must be a non-empty list. Received {values!r:.100}.")
    lengths = {len(values) for values in columns.values()}
    if len(lengths) != 1:
        raise InvalidInput(f"Every input needs as many rows. Received lengths {sorted(lengths)}.")
    rows = [
        {name: decode_value(columns[name][i], f"Input {name!r} row {i}") for name in names}
        for i in range(lengths.pop())
    ]
    return "columnar", rows


def format_response(form, results):
    """Per-row output dicts -> TF Serving's response (one named output is given bare)."""
    keys = sorted(results[0])
    if form == "row":
        return {"predictions": [r[keys[0]] if len(keys) == 1 else {k: r[k] for k in keys} for r in results]}
    columns = {k: [r[k] for r in results] for k in keys}
    return {"outputs": columns[keys[0]] if len(keys) == 1 else columns}


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
        self.batches = 0

    def load(self):
        """Loads the export's serving signature and warms it up."""
        self.loaded = tf.saved_model.load(self.export_dir)
        self.function = self.loaded.signatures[SIGNATURE]
        self.names = input_names(self.function)
        self.run_rows([{name: b"warm up" for name in self.names}])
        self.ready = True
        return self.ready

    def run_rows(self, rows):
        """Calls the signature on rows (one padded batch); returns one output dict per row."""
        inputs = {name: tf.constant([row[name] for row in rows], tf.string) for name in self.names}
        outputs = {key: np.asarray(value).tolist() for key, value in self.function(**inputs).items()}
        return [{key: encode_value(values[i]) for key, values in outputs.items()} for i in range(len(rows))]

    def run_batches(self, rows):
        """Rows in batches of at most max_batch_size, longest-similar together (as predict)."""
        order = np.argsort([sum(len(v) for v in row.values()) for row in rows], kind="stable")
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
        form, rows = parse_request(payload, self.names)
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


def serve(export_dir, name="model", port=8501, max_batch_size=32, max_wait_ms=5.0, max_queue=256,
          max_instances=4096, delay_ms=0.0, grace_period=30):
    """Serves one export on `port` until SIGTERM/SIGINT (in-flight requests finish first)."""
    model = ExportModel(name, export_dir, max_batch_size, max_wait_ms, max_queue, max_instances, delay_ms)
    started = time.perf_counter()
    model.load()
    print(f"Loaded {export_dir} as {name!r} (inputs {model.names}) in {time.perf_counter() - started:.1f} s.", flush=True)
    server = kserve.ModelServer(http_port=port, workers=1, enable_grpc=False, enable_docs_url=False,
                                enable_latency_logging=False, grace_period=grace_period)
    server.start([model])
