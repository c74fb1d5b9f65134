"""Serve an exported SavedModel over TF Serving's REST API, on KServe's model server.

    python tools/serve.py --model served/sst2 --port 8501
    curl -d '{"instances": ["a gripping film"]}' localhost:8501/v1/models/sst2:predict

`--model` is an export folder, or TF Serving's base path (`served/sst2/<version>/`: the highest
version is served), named in the URL by --name or its folder's name; `--model NAME=DIR`, given
several times, serves several exports from one process. `POST /v1/models/NAME:predict` takes
`{"instances": [...]}` or `{"inputs": {...}}` and answers as TF Serving would; `GET
/v1/models/NAME` answers TF Serving's model status. Concurrent requests are
batched (up to --max-batch-size rows, waiting at most --max-wait-ms); more than --max-queue waiting
requests get 503 with Retry-After; SIGTERM finishes the requests in flight and exits.
Needs the `serve` extra (kserve).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import import_tensorflow  # noqa: E402


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, action="append",
                   help="export folder (tools/export.py) or TF Serving base path DIR/<version>/; NAME=DIR to name it; "
                   "repeat to serve several")
    p.add_argument("--name", default=None, help="model name in the URL for a single --model DIR (default: the "
                   "export's folder name)")
    p.add_argument("--port", type=int, default=8501)
    p.add_argument("--max-batch-size", type=int, default=32, help="most rows in one call; 1 turns batching off")
    p.add_argument("--max-wait-ms", type=float, default=5.0, help="how long a batch waits for more requests")
    p.add_argument("--max-queue", type=int, default=256, help="most waiting requests; more get 503")
    p.add_argument("--max-instances", type=int, default=4096, help="most rows in one request; more get 413")
    p.add_argument("--grace-period", type=int, default=30, help="seconds SIGTERM waits for requests in flight")
    # Tests only: makes each batch slow, so that overload is deterministic.
    p.add_argument("--batch-delay-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    # kserve parses sys.argv when imported (e.g. --model would abbreviate its --model_name): give it none.
    sys.argv = sys.argv[:1]
    import_tensorflow()
    from keras_bert_zoo.serving import server  # lazy: kserve and TensorFlow load after --help (start-up time)

    server.serve(model_names(args.model, args.name), args.port, args.max_batch_size, args.max_wait_ms,
                 args.max_queue, args.max_instances, args.batch_delay_ms, args.grace_period)
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
