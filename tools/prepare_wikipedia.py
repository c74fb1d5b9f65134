"""MediaWiki XML dump → BERT's input format (one sentence per line, blank line
between articles), as sharded text files.

    python tools/prepare_wikipedia.py --input enwiki-latest-pages-articles.xml.bz2 \\
        --output corpus/ --heldout-fraction 0.001

Without --input it converts the real English sample dump shipped inside gensim.
Streams the dump (bounded memory) and cleans markup in --workers processes.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import import_tensorflow  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", default=None,
                        help="A .xml.bz2 or .xml MediaWiki dump. Default: gensim's enwiki sample.")
    parser.add_argument("--output", required=True, help="Output directory for the shards.")
    parser.add_argument("--heldout-fraction", type=float, default=0.0,
                        help="Share of articles (by title hash) written to heldout-*.txt.")
    parser.add_argument("--workers", type=int, default=None, help="Processes (default: all cores).")
    parser.add_argument("--max-articles", type=int, default=None, help="Stop after N articles.")
    parser.add_argument("--shard-mb", type=int, default=128, help="Approximate shard size in MiB.")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    # The package imports TensorFlow (seconds): only after argparse, so --help answers at once.
    import_tensorflow()
    from keras_bert_zoo.data import wikipedia

    stats = wikipedia.prepare_wikipedia(
        args.input or wikipedia.sample_dump_path(),
        args.output,
        heldout_fraction=args.heldout_fraction,
        num_workers=args.workers,
        max_articles=args.max_articles,
        shard_bytes=args.shard_mb * 2**20,
    )
    print(json.dumps(stats, indent=1))
    print(f"prepared {stats.get('articles_kept', 0)} articles, {stats.get('sentences', 0)} "
          f"sentences, {stats.get('words', 0)} words into {args.output}")
    return stats


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
