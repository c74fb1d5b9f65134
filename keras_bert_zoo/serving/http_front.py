"""`ServingFront`: the server's ASGI application, TF Serving's REST routes in front of KServe's app.

What a TF Serving client expects of these routes, answered here before any framework routing:

- `POST /v1/models/<name>:predict` (also `/versions/<n>:predict` of the version served): the body
  is read as JSON whatever its content type (`curl -d` sends a form type; TF Serving ignores it),
  at most `max_body_bytes` of it (413 before reading more; a `Content-Length` above it is refused
  unread), each part within `body_timeout_s` (408); the answer is the model's, or `{"error": ...}`
  with 400 (a bad request), 404 (no such model), 413 (too many rows), 503 with `Retry-After`
  (queue full), 500 (a failure of the model, logged on one line);
- `GET /v1/models/<name>`: TF Serving's model status;
- another method on either route: 405 with `Allow`.

Everything else (`/`, `/v1/models`, `/metrics`, KServe's v2 health routes) goes to KServe's app,
under the same body limit. Each request is one access line at INFO (`client "METHOD path" status
ms`), the only one: uvicorn's access log is off and KServe's timing middleware is not installed.
"""

import asyncio
import logging
import re
import time

import orjson

from keras_bert_zoo.serving.rest_format import BadRequest

PREDICT = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:predict$")
STATUS = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?$")
access_log = logging.getLogger("keras_bert_zoo.serving.access")
log = logging.getLogger("keras_bert_zoo.serving")


class HttpError(Exception):
    """A request answered with `status` and TF Serving's `{"error": message}` body."""

    def __init__(self, status, message, headers=()):
        super().__init__(message)
        self.status, self.headers = status, list(headers)


class ServingFront:
    """The server's ASGI app (see the module docstring).

    Args:
        models: `{name: ExportModel}`.
        fallback: the ASGI app of every other route (KServe's).
        max_body_bytes: int. The most bytes of a request body read; beyond, 413.
        body_timeout_s: float. The most seconds between two parts of a body; beyond, 408.
    """

    def __init__(self, models, fallback, max_body_bytes, body_timeout_s):
        self.models = models
        self.fallback = fallback
        self.max_body_bytes = int(max_body_bytes)
        self.body_timeout_s = float(body_timeout_s)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.fallback(scope, receive, send)
        began, status = time.perf_counter(), [0]

        async def answer(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.route(scope, receive, answer)
        except HttpError as error:
            await respond(answer, error.status, {"error": str(error)}, error.headers)
        finally:
            client = scope.get("client") or ("-", 0)
            access_log.info('%s:%s "%s %s HTTP/%s" %d %.1f ms', client[0], client[1], scope["method"], scope["path"],
                            scope["http_version"], status[0], (time.perf_counter() - began) * 1000)

    async def route(self, scope, receive, send):
        path, method = scope["path"], scope["method"]
        predict, status = PREDICT.match(path), STATUS.match(path)
        if predict:
            check_method(method, "POST")
            model = self.model(predict.group(1), predict.group(2))
            payload = parse_json(await self.body(scope, receive))
            return await respond(send, 200, await model_answer(model, payload))
        if status and status.group(1) in self.models:
            check_method(method, "GET", "HEAD")
            model = self.model(status.group(1), status.group(2))
            return await respond(send, 200, model.status())
        declared = content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            raise too_large(declared, self.max_body_bytes)
        return await self.fallback(scope, self.limited(receive), send)

    def model(self, name, version=None):
        model = self.models.get(name)
        if model is None:
            raise HttpError(404, f"Servable not found for request: Latest({name}). Served: {sorted(self.models)}.")
        if version is not None and version != model.version:
            raise HttpError(404, f"Servable not found for request: Specific({name}, {version}); this server "
                                 f"serves version {model.version} of {name!r}.")
        return model

    async def body(self, scope, receive):
        """The request body, read within the limits (see the module docstring)."""
        declared = content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            raise too_large(declared, self.max_body_bytes)
        parts, size, more = [], 0, True
        while more:
            message = await self.next_part(receive)
            if message["type"] == "http.disconnect":
                raise HttpError(400, "The client disconnected before the body was complete.")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                raise too_large(size, self.max_body_bytes, "at least ")
            parts.append(chunk)
            more = message.get("more_body", False)
        return b"".join(parts)

    async def next_part(self, receive):
        try:
            return await asyncio.wait_for(receive(), self.body_timeout_s)
        except asyncio.TimeoutError:
            raise HttpError(408, f"The request body stalled for {self.body_timeout_s:g} s (--body-timeout-s); "
                                 "send the whole body at once.", CLOSE) from None

    def limited(self, receive):
        """`receive` for the fallback app: its body parts within the limits too."""
        seen = [0]

        async def limited_receive():
            message = await self.next_part(receive)
            seen[0] += len(message.get("body", b""))
            if seen[0] > self.max_body_bytes:
                raise too_large(seen[0], self.max_body_bytes, "at least ")
            return message

        return limited_receive


def content_length(scope):
    """The request's `Content-Length` (an int), or None without a usable one."""
    for key, value in scope["headers"]:
        if key == b"content-length":
            return int(value) if value.isdigit() else None
    return None


CLOSE = [(b"connection", b"close")]  # the rest of an unread body must not be read as the next request


def too_large(size, limit, qualifier=""):
    return HttpError(413, f"The request body is {qualifier}{size} bytes; this server reads at most {limit} "
                          "(--max-body-bytes). Split the request.", CLOSE)


def check_method(method, *allowed):
    if method not in allowed:
        raise HttpError(405, f"{method} is not allowed here; use {' or '.join(allowed)}.",
                        [(b"allow", ", ".join(allowed).encode())])


def parse_json(body):
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise HttpError(400, f"Unrecognized request format: the body is not JSON ({error}).") from None


async def model_answer(model, payload):
    """The model's answer to a request, its refusals as `HttpError`s."""
    try:
        return await model.predict(payload)
    except BadRequest as error:
        raise HttpError(400, str(error)) from None
    except HttpError:
        raise
    except Exception as error:  # noqa: BLE001 (a failure of the model: 500, one log line, the server lives on)
        reason = " ".join(str(error).split())[:500] or type(error).__name__
        log.error("%s failed on a request: %s: %s", model.name, type(error).__name__, reason)
        raise HttpError(500, f"{type(error).__name__}: {reason}") from None


async def respond(send, status, body, headers=()):
    data = orjson.dumps(body)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                            *headers]})
    await send({"type": "http.response.body", "body": data})
