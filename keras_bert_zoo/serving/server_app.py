"""`serve`: our exports (`server.ExportModel`) behind uvicorn, with the limits and signals a TF
Serving or TorchServe user expects of a model server.

- Routes: TF Serving's predict and status (`http_front.ServingFront`), in front of KServe's app
  (its model repository and v1 routes: `/v1/models`, `/`; `/metrics`; the v2 health routes).
- Address: `host` 127.0.0.1 by default (a one-command local server, as TorchServe and `mlflow
  models serve`); a container passes 0.0.0.0.
- Connections (`connection_guard`): the soft limit of open files raised to the hard one; at most
  `max_connections` (idle ones closed first); a request's headers within `header_timeout_s`; an
  idle keep-alive connection closed after `keep_alive_s`; a body within `max_body_bytes` (413)
  and `body_timeout_s` between its parts (408).
- Signals: SIGTERM, SIGINT and SIGHUP drain alike: the listening socket closes, the requests in
  flight and queued are answered (within `grace_period` seconds), the process exits 0. Each is
  logged once ("SIGHUP: draining ...").
- Logs (stderr): one line per request at INFO (`--log-level warning` leaves only problems);
  uvicorn's own access log off, KServe's per-request timing lines not installed.
"""

import contextlib
import logging
import signal
import sys
import time

import fastapi
import prometheus_client
import uvicorn
from fastapi.responses import JSONResponse
from kserve.errors import InvalidInput, ModelNotFound, ModelNotReady
from kserve.model_repository import ModelRepository
from kserve.protocol.dataplane import DataPlane
from kserve.protocol.model_repository_extension import ModelRepositoryExtension
from kserve.protocol.rest.server import metrics_handler
from kserve.protocol.rest.v1_endpoints import register_v1_endpoints
from kserve.protocol.rest.v2_endpoints import register_v2_endpoints

from keras_bert_zoo.serving.connection_guard import ConnectionGuard, connection_limit, raise_fd_limit
from keras_bert_zoo.serving.guarded_http_protocol import protocol_class
from keras_bert_zoo.serving.http_front import ServingFront
from keras_bert_zoo.serving.rest_format import BadRequest
from keras_bert_zoo.serving.server import ExportModel

log = logging.getLogger("keras_bert_zoo.serving")
DRAINED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
LOG_LEVELS = ("debug", "info", "warning", "error")
CONNECTIONS = prometheus_client.Gauge(
    "kbz_connections", "HTTP connections: open now, and closed by the server since it started (evicted: beyond "
    "--max-connections, the least recently active idle one; header_timeout: no complete request headers in "
    "--header-timeout-s).", ["state"])
DEFAULTS = dict(host="127.0.0.1", port=8501, max_batch_size=32, max_wait_ms=5.0, max_queue=256, max_instances=4096,
                max_body_bytes=16 << 20, max_connections=4096, header_timeout_s=10.0, body_timeout_s=30.0,
                keep_alive_s=5.0, grace_period=30, log_level="info")
"""The server's settings by default (tools/serve.py's flags show them in --help)."""


class DrainingServer(uvicorn.Server):
    """uvicorn's server, with SIGHUP drained as SIGTERM and SIGINT are, each logged, and a drained
    exit being the exit of the process (uvicorn re-raises the signal after draining, which would
    end the process by the signal instead of 0)."""

    @contextlib.contextmanager
    def capture_signals(self):
        previous = {sig: signal.signal(sig, self.drain) for sig in DRAINED_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def drain(self, sig, frame):
        name = signal.Signals(sig).name
        if self.should_exit:
            log.warning("%s again: stopping now, without waiting for the requests in flight.", name)
            self.force_exit = True
            return
        log.warning("%s: draining: no new connections; answering the %d request(s) in flight and queued, then "
                    "exiting.", name, len(self.server_state.tasks))
        self.should_exit = True


def configure_logging(level):
    """One stderr handler for every logger, at `level`; uvicorn's access log off (`ServingFront`
    writes the access line), KServe's trace logger (per-request timings) off."""
    logging.basicConfig(level=level.upper(), stream=sys.stderr, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for name in ("uvicorn", "uvicorn.error", "kserve"):
        logging.getLogger(name).handlers, logging.getLogger(name).propagate = [], True
        logging.getLogger(name).setLevel(level.upper())
    logging.getLogger("kserve.trace").setLevel(logging.CRITICAL)
    logging.getLogger("keras_bert_zoo.serving.access").setLevel(level.upper())


def kserve_app(models):
    """KServe's FastAPI app for the routes `ServingFront` passes on, its errors answered as JSON
    in one log line (KServe's own handlers log a traceback for each)."""
    repository = ModelRepository()
    for model in models.values():
        repository.update(model)
    app = fastapi.FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    dataplane = DataPlane(model_registry=repository)
    app.add_api_route("/", dataplane.live)
    app.add_api_route("/metrics", metrics_handler, methods=["GET"])
    register_v1_endpoints(app, dataplane, ModelRepositoryExtension(model_registry=repository))
    register_v2_endpoints(app, dataplane, ModelRepositoryExtension(model_registry=repository))
    for error, status in ((InvalidInput, 400), (BadRequest, 400), (ModelNotFound, 404), (ModelNotReady, 503)):
        app.add_exception_handler(error, lambda request, exc, status=status: JSONResponse(
            {"error": str(exc)}, status_code=status))
    app.add_exception_handler(Exception, failed)
    return app


async def failed(request, error):
    """Any other failure of a KServe route: 500 and one log line (not a traceback per request)."""
    reason = " ".join(str(error).split())[:500] or type(error).__name__
    log.error("%s %s failed: %s: %s", request.method, request.url.path, type(error).__name__, reason)
    return JSONResponse({"error": f"{type(error).__name__}: {reason}"}, status_code=500)


def load_models(exports, settings):
    """`{name: ExportModel}` of `exports` (`{name: folder}`), each loaded and warmed up."""
    models = {}
    for name, export_dir in exports.items():
        model = ExportModel(name, export_dir, settings["max_batch_size"], settings["max_wait_ms"],
                            settings["max_queue"], settings["max_instances"], settings.get("delay_ms", 0.0))
        started = time.perf_counter()
        model.load()
        log.info("Loaded %s as %r version %s (inputs %s) in %.1f s.", model.saved_model_dir, name, model.version,
                 model.names, time.perf_counter() - started)
        models[name] = model
    return models


def serve(exports, **settings):
    """Serves `exports` (`{name: export folder}`) until SIGTERM, SIGINT or SIGHUP (see the module
    docstring); `settings` are `DEFAULTS`' keys (plus `delay_ms`, tests' slow batches)."""
    unknown = set(settings) - set(DEFAULTS) - {"delay_ms"}
    if unknown:
        raise TypeError(f"serve() got unknown settings {sorted(unknown)}; known: {sorted(DEFAULTS)}.")
    settings = {**DEFAULTS, **settings}
    configure_logging(settings["log_level"])
    fd_limit = raise_fd_limit()
    models = load_models(exports, settings)
    guard = ConnectionGuard(connection_limit(settings["max_connections"], fd_limit), settings["header_timeout_s"])
    for state, value in (("open", lambda: len(guard.open)), ("evicted", lambda: guard.evicted),
                         ("header_timeout", lambda: guard.timed_out)):
        CONNECTIONS.labels(state).set_function(value)
    front = ServingFront(models, kserve_app(models), settings["max_body_bytes"], settings["body_timeout_s"])
    config = uvicorn.Config(front, host=settings["host"], port=settings["port"], http=protocol_class(guard),
                            lifespan="off", log_config=None, access_log=False, log_level=settings["log_level"],
                            timeout_keep_alive=settings["keep_alive_s"], backlog=4096,
                            timeout_graceful_shutdown=settings["grace_period"])
    log.info("Serving %s on http://%s:%d (at most %d connections; open files allowed: %d).", sorted(models),
             settings["host"], settings["port"], guard.max_connections, fd_limit)
    DrainingServer(config).run()
    log.info("Drained and stopped.")
