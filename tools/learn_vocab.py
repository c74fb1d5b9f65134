"""Learns a WordPiece vocabulary (Google's layout) from text files.

    python tools/learn_vocab.py wiki.txt --vocabulary-size 8000 --output vocab.txt

Words are counted with the original BERT normalisation (`--cased` keeps case and
accents); specials come first as in Google's `vocab.txt` ([PAD]=0, [unused0..98],
[UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103 with the default `--num-unused 99`).
"""

import argparse
import os
import pathlib
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from tools._startup import import_tensorflow  # noqa: E402


def _count_lines(paths):
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    return total


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="Text files (one sentence or paragraph per line).")
    parser.add_argument("--output", required=True, help="Where to write vocab.txt (atomically).")
    parser.add_argument("--vocabulary-size", type=int, default=30522)
    parser.add_argument("--cased", action="store_true", help="Keep case and accents (cased vocabulary).")
    parser.add_argument("--num-unused", type=int, default=99)
    parser.add_argument("--min-count", type=int, default=2)
    parser.add_argument("--algorithm", default="auto", choices=("auto", "tokenizers", "tensorflow_text"))
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    missing = [f for f in args.files if not os.path.isfile(f)]
    if missing:
        parser.error(f"input files not found: {missing}")
    # The package imports TensorFlow (seconds): only after argparse, so --help answers at once.
    import_tensorflow()
    from keras_bert_zoo.text.vocabulary import learn_vocabulary, save_vocabulary
    bar = None
    if not args.no_progress:
        from tqdm import tqdm

        bar = tqdm(total=_count_lines(args.files), unit="line", desc="counting words")
    tokens = learn_vocabulary(
        args.files,
        args.vocabulary_size,
        lowercase=not args.cased,
        num_unused=args.num_unused,
        min_count=args.min_count,
        algorithm=args.algorithm,
        progress=bar.update if bar is not None else None,
    )
    if bar is not None:
        bar.close()
    save_vocabulary(tokens, args.output)
    print(f"Wrote {len(tokens)} tokens to {args.output}")


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
