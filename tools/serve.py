"""Serve an exported SavedModel over TF Serving's REST API, on KServe's model server.

    python tools/serve.py --model served/sst2/1 --name sst2 --port 8501
    curl -d '{"instances": ["a gripping film"]}' localhost:8501/v1/models/sst2:predict

`POST /v1/models/NAME:predict` takes `{"instances": [...]}` or `{"inputs": {...}}` and answers as
TF Serving would; `GET /v1/models/NAME` says whether the model is ready. Concurrent requests are
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
    p.add_argument("--model", required=True, help="SavedModel directory (tools/export.py)")
    p.add_argument("--name", default=None, help="model name in the URL (default: the export's folder name)")
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

    name = args.name or os.path.basename(os.path.normpath(args.model))
    if name.isdigit():  # served/sst2/1: the version folder; the model is its parent
        name = os.path.basename(os.path.dirname(os.path.normpath(args.model)))
    server.serve(args.model, name, args.port, args.max_batch_size, args.max_wait_ms, args.max_queue,
                 args.max_instances, args.batch_delay_ms, args.grace_period)
    return 0


if __name__ == "__main__":
    from tools._startup import run_main

    sys.exit(run_main(main))  # a user error: one line, exit 2 (--debug: the traceback)
