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
of the model's inputs stops the run with its file and line number. The input is streamed,
`CHUNK_LINES` lines answered at a time: memory stays bounded whatever the file's length. `-`
reads stdin (spooled to a temporary file, as the checks read the input before answering it) /
writes stdout. An existing --output is replaced only with --overwrite (never the --input file);
the answers go to a temporary file beside it, renamed over it once every line is answered, so
a failed run leaves an existing --output as it was.
"""

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile

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
    p.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    return p


CHUNK_LINES = 4096
"""Input lines answered at a time (each chunk sorted by length into batches): a chunk's lines and
answers are all the tool holds."""


BLANK = object()
"""A blank input line: answered by a `null` line, so that output line N answers input line N."""


def _numbered_values(path, label):
    """Yields `(line number, JSON value or BLANK)` for each line of `path`, streaming; a line that is
    not UTF-8 or not JSON stops the run with a message naming the input (`label`) and the line."""
    with open(path, "rb") as stream:
        for number, raw in enumerate(stream, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{label}:{number} is not valid UTF-8 (byte {e.start + 1} of the line, "
                                 f"{raw[e.start:e.start + 1]!r}). JSON Lines are UTF-8: re-encode the file, "
                                 "e.g. iconv -f latin1 -t utf-8.") from None
            if not line.strip():
                yield number, BLANK
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{label}:{number} is not JSON ({e}). Each line must be one JSON value.") from None


def _chunks(path, label):
    """`_numbered_values` in lists of at most `CHUNK_LINES` (read at each call)."""
    chunk = []
    for item in _numbered_values(path, label):
        chunk.append(item)
        if len(chunk) == CHUNK_LINES:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _check_output(args):
    """--output: not the --input file; an existing file only with --overwrite; its folder must exist."""
    if args.output == "-":
        return
    if os.path.exists(args.output):
        if args.input != "-" and os.path.exists(args.input) and os.path.samefile(args.input, args.output):
            raise ValueError(f"--output {args.output!r} is the --input file; writing the answers would overwrite "
                             "the input. Pass another --output file.")
        if os.path.isdir(args.output):
            raise ValueError(f"--output {args.output!r} is a folder. Name a file to write the answers to.")
        if not args.overwrite:
            raise ValueError(f"--output {args.output!r} exists. Pass --overwrite to replace it, or another --output.")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise ValueError(f"--output {args.output!r}: the folder {folder!r} does not exist. Create it first.")


@contextlib.contextmanager
def _input_file(path):
    """The input as a file path: stdin is spooled to a temporary file (read more than once)."""
    if path != "-":
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="kbz_predict_stdin_", suffix=".jsonl") as spool:
        shutil.copyfileobj(sys.stdin.buffer, spool)
        spool.flush()
        yield spool.name


@contextlib.contextmanager
def _output_stream(path):
    """Stdout, or a temporary file beside `path` renamed over it when the block succeeds (removed if not)."""
    if path == "-":
        yield sys.stdout
        return
    folder = os.path.dirname(os.path.abspath(path))
    fd, partial = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.partial-", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            yield out
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def _is_request(line, names):
    return isinstance(line, dict) and len(line) == 1 and set(line) <= {"instances", "inputs"} and set(line) != set(names)


def _request_rows(request):
    body = next(iter(request.values()))
    if isinstance(body, dict):  # columnar: as many rows as a column
        body = next(iter(body.values()), [])
    return len(body) if isinstance(body, list) else 0


def _instance_row(line, names):
    return line if isinstance(line, dict) or len(names) != 1 else {names[0]: line}


def main(argv=None):
    """Answers the input; returns the number of lines written."""
    args = build_parser().parse_args(argv)
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1. Received: {args.batch_size}.")
    if not os.path.exists(args.model) and not args.model.startswith(HUB_PREFIXES):
        raise ValueError(f"--model {args.model!r} does not exist.{_interrupted_save_hint(args.model)}")
    _check_output(args)
    with _input_file(args.input) as path:
        label = args.input  # `-` for stdin, not the spool file
        for _ in _numbered_values(path, label):  # every line UTF-8 JSON, before TensorFlow loads
            pass
        import_tensorflow()
        from tqdm import tqdm  # lazy: only a run needs it, not --help (start-up time)

        from keras_bert_zoo.serving import client as export_client  # lazy: TensorFlow after argument checks (start-up time)

        function = export_client.serving_function(args.model, args.text_inputs)
        specs = export_client.input_specs(function)
        names = list(specs)
        total = 0
        for number, line in _numbered_values(path, label):  # every instance checked before any runs
            if line is BLANK:
                continue
            if _is_request(line, names):
                total += _request_rows(line)
                continue
            problem = export_client.row_problem(_instance_row(line, names), specs)
            if problem:
                raise ValueError(f"{label}:{number}: the instance {problem}")
            total += 1
        bar = tqdm(total=total, unit="row", disable=args.no_progress, file=sys.stderr)
        written = 0
        with _output_stream(args.output) as out:
            for chunk in _chunks(path, label):
                instances = [i for i, (_, line) in enumerate(chunk) if line is not BLANK and not _is_request(line, names)]
                rows = [_instance_row(chunk[i][1], names) for i in instances]
                answers = dict(zip(instances, export_client.predict_rows(function, rows, args.batch_size, bar.update)))
                for i, (number, line) in enumerate(chunk):
                    if line is BLANK:
                        answers[i] = None
                    elif i not in answers:
                        try:
                            answers[i] = export_client.answer_request(function, line, args.batch_size, bar.update)
                        except ValueError as e:
                            raise ValueError(f"{label}:{number}: {e}") from None
                    out.write(json.dumps(answers[i], ensure_ascii=False) + "\n")
                written += len(chunk)
        bar.close()
    return written


def _interrupted_save_hint(model):
    """Names the copy a save killed between its two renames left of --model, if any."""
    from keras_bert_zoo.utils.files import interrupted_save_hint  # lazy: only this error needs the package

    return interrupted_save_hint(model)


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
