"""Answer JSON Lines with an exported SavedModel, a task preset or a .keras file; JSON Lines out, in order.

    python tools/predict.py --model served/sst2/1 --input reviews.jsonl --output answers.jsonl

Each input line is either one instance, an object with the model's named inputs
(`{"text": "a gripping film"}`; with a single input a bare JSON string will do), answered
by one object of outputs (`{"label": "positive", "label_id": 1, "probabilities": [...]}`),
or a whole TF Serving REST request, answered as TF Serving's REST API answers it:
`{"instances": [...]}` -> `{"predictions": [...]}`, `{"inputs": {...}}` -> `{"outputs": {...}}`.
Instances are run in batches of similar length (sorted by characters) and written in the
input's order, one output line per input line: a blank input line is answered by `null`.
Every instance is checked before any runs; a line that is not UTF-8 JSON or not an instance
of the model's inputs stops the run with its file and line number. `-` reads stdin / writes
stdout; --output may not be the --input file.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import HUB_PREFIXES, import_tensorflow  # noqa: E402



def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="SavedModel directory (tools/export.py), task preset or .keras")
    p.add_argument("--input", required=True, help="JSON Lines file, or - for stdin")
    p.add_argument("--output", required=True, help="JSON Lines file, or - for stdout")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--text-inputs", nargs="+", metavar="NAME", help="for a classifier preset: text_a text_b for pairs")
    p.add_argument("--no-progress", action="store_true")
    return p


BLANK = object()
"""A blank input line: answered by a `null` line, so that output line N answers input line N."""


def _read_lines(path):
    """`[(line number, JSON value or BLANK)]`, one per input line; a line that is not UTF-8 or
    not JSON stops the run with a message naming the file and the line."""
    stream = sys.stdin.buffer if path == "-" else open(path, "rb")
    try:
        lines = []
        for number, raw in enumerate(stream, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}:{number} is not valid UTF-8 (byte {e.start + 1} of the line, "
                                 f"{raw[e.start:e.start + 1]!r}). JSON Lines are UTF-8: re-encode the file, "
                                 "e.g. iconv -f latin1 -t utf-8.") from None
            if not line.strip():
                lines.append((number, BLANK))
                continue
            try:
                lines.append((number, json.loads(line)))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{number} is not JSON ({e}). Each line must be one JSON value.") from None
        return lines
    finally:
        if stream is not sys.stdin.buffer:
            stream.close()


def _refuse_output_onto_input(args):
    """--output naming the --input file would truncate it before it is read: refused."""
    if "-" in (args.input, args.output) or not os.path.exists(args.output):
        return
    if os.path.exists(args.input) and os.path.samefile(args.input, args.output):
        raise ValueError(f"--output {args.output!r} is the --input file; writing the answers would overwrite "
                         "the input. Pass another --output file.")


def _is_request(line, names):
    return isinstance(line, dict) and len(line) == 1 and set(line) <= {"instances", "inputs"} and set(line) != set(names)


def _request_rows(request):
    body = next(iter(request.values()))
    if isinstance(body, dict):  # columnar: as many rows as a column
        body = next(iter(body.values()), [])
    return len(body) if isinstance(body, list) else 0


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1. Received: {args.batch_size}.")
    if not os.path.exists(args.model) and not args.model.startswith(HUB_PREFIXES):
        raise ValueError(f"--model {args.model!r} does not exist.{_interrupted_save_hint(args.model)}")
    _refuse_output_onto_input(args)
    numbered = _read_lines(args.input)
    import_tensorflow()
    from tqdm import tqdm  # lazy: only a run needs it, not --help (start-up time)

    from keras_bert_zoo.serving import client as export_client  # lazy: TensorFlow after argument checks (start-up time)

    function = export_client.serving_function(args.model, args.text_inputs)
    specs = export_client.input_specs(function)
    names = list(specs)
    lines = [line for _, line in numbered]
    requests = {i for i, line in enumerate(lines) if line is not BLANK and _is_request(line, names)}
    instances = [i for i in range(len(lines)) if i not in requests and lines[i] is not BLANK]
    rows = [lines[i] if isinstance(lines[i], dict) or len(names) != 1 else {names[0]: lines[i]} for i in instances]
    for i, row in zip(instances, rows):  # every line checked before any runs, each named by its line
        problem = export_client.row_problem(row, specs)
        if problem:
            raise ValueError(f"{args.input}:{numbered[i][0]}: the instance {problem}")
    total = len(rows) + sum(_request_rows(lines[i]) for i in requests)
    bar = tqdm(total=total, unit="row", disable=args.no_progress, file=sys.stderr)
    answers = dict(zip(instances, export_client.predict_rows(function, rows, args.batch_size, bar.update)))
    for i in sorted(requests):
        try:
            answers[i] = export_client.answer_request(function, lines[i], args.batch_size, bar.update)
        except ValueError as e:
            raise ValueError(f"{args.input}:{numbered[i][0]}: {e}") from None
    bar.close()
    answers.update({i: None for i, line in enumerate(lines) if line is BLANK})
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    try:
        for i in range(len(lines)):
            out.write(json.dumps(answers[i], ensure_ascii=False) + "\n")
    finally:
        if out is not sys.stdout:
            out.close()
    return [answers[i] for i in range(len(lines))]


def _interrupted_save_hint(model):
    """Names the copy a save killed between its two renames left of --model, if any."""
    from keras_bert_zoo.utils.files import interrupted_save_hint  # lazy: only this error needs the package

    return interrupted_save_hint(model)


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
