"""Serve an exported SavedModel over TF Serving's REST API, on KServe's model server.

    python tools/serve.py --model served/sst2 --port 8501
    curl -d '{"instances": ["a gripping film"]}' localhost:8501/v1/models/sst2:predict

`--model` is an export folder, or TF Serving's base path (`served/sst2/<version>/`: the highest
version that loads is served; a newer one that does not is named in one log line), named in the
URL by --name or its folder's name; `--model NAME=DIR`, given several times, serves several exports
from one process. `POST /v1/models/NAME:predict` takes `{"instances": [...]}` or `{"inputs":
{...}}` as JSON whatever the content type, and answers as TF Serving would; `GET /v1/models/NAME`
answers TF Serving's model status; `/metrics` is Prometheus' (batch sizes, queue depth,
connections). It listens on --host 127.0.0.1 unless told otherwise (a container: --host 0.0.0.0).
Concurrent requests are batched (up to --max-batch-size rows, waiting at most --max-wait-ms); more
than --max-queue waiting requests get 503 with Retry-After; a body over --max-body-bytes 413;
idle or half-open connections are closed after --header-timeout-s, and beyond --max-connections
the least recently active idle one goes first. SIGTERM, SIGINT and SIGHUP finish the requests in
flight and exit 0. One log line per request at --log-level info. Needs the `serve` extra (kserve).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import import_tensorflow  # noqa: E402


# keras_bert_zoo.serving.server_app.DEFAULTS (a test keeps them equal): here, so that --help needs no import.
DEFAULTS = dict(host="127.0.0.1", port=8501, max_batch_size=32, max_wait_ms=5.0, max_queue=256, max_instances=4096,
                max_body_bytes=16 << 20, max_connections=4096, header_timeout_s=10.0, body_timeout_s=30.0,
                keep_alive_s=5.0, grace_period=30, log_level="info")
LOG_LEVELS = ("debug", "info", "warning", "error")


class DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """--help states every default (a flag without one says so in its own words)."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], formatter_class=DefaultsShown)
    p.add_argument("--model", required=True, action="append",
                   help="export folder (tools/export.py) or TF Serving base path DIR/<version>/; NAME=DIR to name it; "
                   "repeat to serve several")
    p.add_argument("--name", default=None, help="model name in the URL for a single --model DIR (default: the "
                   "export's folder name)")
    p.add_argument("--host", default=DEFAULTS["host"], help="address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=DEFAULTS["port"], help="TCP port (TF Serving's REST port)")
    p.add_argument("--max-batch-size", type=int, default=DEFAULTS["max_batch_size"],
                   help="most rows in one call; 1 turns batching off")
    p.add_argument("--max-wait-ms", type=float, default=DEFAULTS["max_wait_ms"],
                   help="how long a batch waits for more requests")
    p.add_argument("--max-queue", type=int, default=DEFAULTS["max_queue"], help="most waiting requests; more get 503")
    p.add_argument("--max-instances", type=int, default=DEFAULTS["max_instances"],
                   help="most rows in one request; more get 413")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULTS["max_body_bytes"],
                   help="most bytes of a request body; more get 413, unread")
    p.add_argument("--max-connections", type=int, default=DEFAULTS["max_connections"],
                   help="most open connections (within the open-file limit); beyond, the least recently active "
                   "idle one is closed")
    p.add_argument("--header-timeout-s", type=float, default=DEFAULTS["header_timeout_s"],
                   help="seconds a connection may take to send a request's headers")
    p.add_argument("--body-timeout-s", type=float, default=DEFAULTS["body_timeout_s"],
                   help="seconds a request body may stall between two parts (408)")
    p.add_argument("--keep-alive-s", type=float, default=DEFAULTS["keep_alive_s"],
                   help="seconds an idle keep-alive connection is kept")
    p.add_argument("--grace-period", type=int, default=DEFAULTS["grace_period"],
                   help="seconds SIGTERM/SIGINT/SIGHUP wait for the requests in flight")
    p.add_argument("--log-level", choices=LOG_LEVELS, default=DEFAULTS["log_level"],
                   help="info: one line per request; warning: problems only")
    # Tests only: makes each batch slow, so that overload is deterministic.
    p.add_argument("--batch-delay-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    for flag in ("max_batch_size", "max_queue", "max_instances", "max_body_bytes", "max_connections"):
        if getattr(args, flag) < 1:
            raise ValueError(f"--{flag.replace('_', '-')} must be at least 1. Received: {getattr(args, flag)}.")
    for flag in ("max_wait_ms", "header_timeout_s", "body_timeout_s", "keep_alive_s", "grace_period"):
        if getattr(args, flag) < 0:
            raise ValueError(f"--{flag.replace('_', '-')} must be at least 0. Received: {getattr(args, flag)}.")
    exports = model_names(args.model, args.name)
    # kserve parses sys.argv when imported (e.g. --model would abbreviate its --model_name): give it none.
    sys.argv = sys.argv[:1]
    import_tensorflow()
    from keras_bert_zoo.serving import server_app  # lazy: kserve and TensorFlow load after --help (start-up time)

    settings = {key: getattr(args, key) for key in DEFAULTS}
    server_app.serve(exports, delay_ms=args.batch_delay_ms, **settings)
    return 0


def model_names(models, name=None):
    """--model values -> {name in the URL: export folder}; refuses a name given twice."""
    if name is not None and len(models) > 1:
        raise ValueError("--name names a single --model; with several, give each as --model NAME=DIR.")
    named = {}
    for value in models:
        key, _, path = value.partition("=") if "=" in value and not os.path.exists(value) else (None, "", value)
        if key is None:
            key = name or os.path.basename(os.path.normpath(path))
            if key.isdigit():  # served/sst2/1: the version folder; the model is its parent
                key = os.path.basename(os.path.dirname(os.path.normpath(path)))
        if key in named:
            raise ValueError(f"--model: the name {key!r} is given twice ({named[key]} and {path}); name each "
                             "export once (--model NAME=DIR).")
        named[key] = path
    return named


if __name__ == "__main__":
    from tools._startup import run_main

    sys.exit(run_main(main))  # a user error: one line, exit 2 (--debug: the traceback)
