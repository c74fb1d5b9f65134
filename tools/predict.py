"""Answer JSON Lines with an exported SavedModel, a task preset or a .keras file; JSON Lines out, in order.

    python tools/predict.py --model served/sst2/1 --input reviews.jsonl --output answers.jsonl

Each input line is either one instance, an object with the model's named inputs
(`{"text": "a gripping film"}`; with a single input a bare JSON string will do), answered
by one object of outputs (`{"input_truncated": false, "label": "positive", "label_id": 1,
"probabilities": [...]}`),
or a whole TF Serving REST request, answered as TF Serving's REST API answers it:
`{"instances": [...]}` -> `{"predictions": [...]}`, `{"inputs": {...}}` -> `{"outputs": {...}}`.
Instances are run in batches of similar length (sorted by characters) and written in the
input's order, one output line per input line: a blank input line is answered by `null`.

A bad line never costs the others their answers: a line that is not UTF-8 JSON, not an instance
of the model's inputs or not a request the model takes is answered by TF Serving's error object,
`{"error": "FILE:LINE: what is wrong"}`, and every other line by its answer. The run then ends with
one line on stderr (how many lines failed, and the first) and exit status 1; 0 when every line was
answered. (An input where no line is JSON at all is refused before the model loads, exit 2.)

The input is streamed, `CHUNK_LINES` lines answered at a time: memory stays bounded whatever the
file's length. `-` reads stdin (spooled to a temporary file, as it is read twice) / writes stdout.
An existing --output is replaced only with --overwrite (never the --input file); the answers go to
a temporary file beside it, renamed over it once every line is answered, so a run that fails (the
model, the disk) leaves an existing --output as it was.
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


class BadLine:
    """An input line that cannot be answered: its `{"error": ...}` object is written in its place."""

    def __init__(self, message):
        self.message = message

    def answer(self):
        return {"error": self.message}


def _numbered_values(path, label):
    """Yields `(line number, JSON value, BLANK or BadLine)` for each line of `path`, streaming; a
    line that is not UTF-8 or not JSON is a `BadLine` naming the input (`label`) and the line."""
    with open(path, "rb") as stream:
        for number, raw in enumerate(stream, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield number, BadLine(f"{label}:{number} is not valid UTF-8 (byte {e.start + 1} of the line, "
                                      f"{raw[e.start:e.start + 1]!r}). JSON Lines are UTF-8: re-encode the file, "
                                      "e.g. iconv -f latin1 -t utf-8.")
                continue
            if not line.strip():
                yield number, BLANK
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as e:
                yield number, BadLine(f"{label}:{number} is not JSON ({e}). Each line must be one JSON value.")


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


def _answer_chunk(chunk, names, specs, function, args, label, update):
    """One answer (or error object) per line of `chunk`, in its order."""
    import tensorflow as tf  # lazy: TensorFlow after argument checks (start-up time)

    from keras_bert_zoo.serving import client as export_client  # lazy: as above

    answers = {}
    for i, (number, line) in enumerate(chunk):
        if line is BLANK:
            answers[i] = None
        elif isinstance(line, BadLine):
            answers[i] = line.answer()
        elif not _is_request(line, names):
            problem = export_client.row_problem(_instance_row(line, names), specs)
            if problem:
                answers[i] = BadLine(f"{label}:{number}: the instance {problem}").answer()
    instances = [i for i, (_, line) in enumerate(chunk) if i not in answers and not _is_request(line, names)]
    rows = [_instance_row(chunk[i][1], names) for i in instances]
    try:
        answers.update(zip(instances, export_client.predict_rows(function, rows, args.batch_size, update)))
    except (ValueError, tf.errors.InvalidArgumentError):
        for i, row in zip(instances, rows):  # the batch failed: each row alone, so only the bad one fails
            answers[i] = _answer_alone(function, row, args, f"{label}:{chunk[i][0]}")
    for i, (number, line) in enumerate(chunk):
        if i not in answers:
            answers[i] = _answer_alone(function, line, args, f"{label}:{number}", request=True)
    return [answers[i] for i in range(len(chunk))]


def _answer_alone(function, value, args, where, request=False):
    """One instance (or, with `request`, a whole REST request) answered alone, or its error object."""
    import tensorflow as tf  # lazy: TensorFlow after argument checks (start-up time)

    from keras_bert_zoo.serving import client as export_client  # lazy: as above

    try:
        if request:
            return export_client.answer_request(function, value, args.batch_size)
        return export_client.predict_rows(function, [value], args.batch_size)[0]
    except (ValueError, tf.errors.InvalidArgumentError) as e:
        return BadLine(f"{where}: {' '.join(str(e).split())[:1000]}").answer()


def main(argv=None):
    """Answers the input; returns `(lines written, lines answered by an error object)`."""
    args = build_parser().parse_args(argv)
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1. Received: {args.batch_size}.")
    if not os.path.exists(args.model) and not args.model.startswith(HUB_PREFIXES):
        raise ValueError(f"--model {args.model!r} does not exist.{_interrupted_save_hint(args.model)}")
    _check_output(args)
    with _input_file(args.input) as path:
        label = args.input  # `-` for stdin, not the spool file
        first_bad, lines, good = None, 0, 0  # before TensorFlow loads: an input of no JSON at all is refused
        for _, line in _numbered_values(path, label):
            lines += 1
            good += not isinstance(line, BadLine)
            first_bad = first_bad or (line.message if isinstance(line, BadLine) else None)
        if lines and not good:
            raise ValueError(f"no line of {label} is UTF-8 JSON; the first: {first_bad}")
        import_tensorflow()
        from tqdm import tqdm  # lazy: only a run needs it, not --help (start-up time)

        from keras_bert_zoo.serving import client as export_client  # lazy: TensorFlow after argument checks (start-up time)

        function = export_client.serving_function(args.model, args.text_inputs)
        specs = export_client.input_specs(function)
        names = list(specs)
        bar = tqdm(total=good, unit="line", disable=args.no_progress, file=sys.stderr)
        written, failed, first = 0, 0, None
        with _output_stream(args.output) as out:
            for chunk in _chunks(path, label):
                for answer in _answer_chunk(chunk, names, specs, function, args, label, lambda n: None):
                    if isinstance(answer, dict) and set(answer) == {"error"}:
                        failed, first = failed + 1, first or answer["error"]
                    out.write(json.dumps(answer, ensure_ascii=False) + "\n")
                written += len(chunk)
                bar.update(sum(1 for _, line in chunk if not isinstance(line, BadLine)))
        bar.close()
    if failed:
        sys.stderr.write(f"predict.py: {failed} of {written} lines could not be answered; each has an {{\"error\": ...}} "
                         f"line in {args.output} where its answer would be, every other line is answered. The first: "
                         f"{first}\n")
    return written, failed


def exit_status(result):
    """The tool's exit status: 1 where some lines were answered by an error object, else 0."""
    return 1 if result and result[1] else 0


def _interrupted_save_hint(model):
    """Names the copy a save killed between its two renames left of --model, if any."""
    from keras_bert_zoo.utils.files import interrupted_save_hint  # lazy: only this error needs the package

    return interrupted_save_hint(model)


if __name__ == "__main__":
    from tools._startup import run_main

    sys.exit(exit_status(run_main(main)))  # a user error: one line, exit 2 (--debug: the traceback)
