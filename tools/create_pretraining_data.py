"""Writes masked-LM + next-sentence pretraining TFRecords from raw text (original flags).

Input: text files, one sentence per line, a blank line between documents. Each input
file is one shard, written to its own output file by one in-process `tf.data` pipeline
over all shards, `--threads` shards in flight at once (default: one per core), or by
`--num_workers` processes;
a report (`<output>.report.json` / `.report.txt`) is written next to the first output.

    python tools/create_pretraining_data.py --input_file "wiki/*.txt" \
        --output_file out/wiki.tfrecord --vocab_file vocab.txt --do_lower_case=True \
        --max_seq_length 128 --max_predictions_per_seq 20 --dupe_factor 10

Deviations from the original (stated in `keras_bert_zoo.data.nsp_instances`): the random
next document is drawn within a window of `--window_size` documents of the same shard,
and instances are shuffled within that window, not across the whole corpus.
"""

import argparse
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import import_tensorflow  # noqa: E402


def _bool(text):
    if text.lower() in ("1", "true", "yes", "y"):
        return True
    if text.lower() in ("0", "false", "no", "n"):
        return False
    raise argparse.ArgumentTypeError(f"expected true/false, got {text!r}")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--input_file", required=True, help="Input text files: paths/globs, comma-separated.")
    p.add_argument("--output_file", required=True, help="Output TFRecord path, prefix, or comma list (one per input).")
    vocab = p.add_mutually_exclusive_group(required=True)
    vocab.add_argument("--vocab_file", help="vocab.txt of the BERT model.")
    vocab.add_argument("--preset", help="A preset name or directory; its vocabulary is used.")
    p.add_argument("--do_lower_case", type=_bool, default=None,
                   help="Lower-case (uncased models). Default: true, or the preset's setting.")
    p.add_argument("--do_whole_word_mask", type=_bool, nargs="?", const=True, default=False)
    p.add_argument("--max_seq_length", type=int, default=128)
    p.add_argument("--max_predictions_per_seq", type=int, default=20)
    p.add_argument("--random_seed", type=int, default=12345)
    p.add_argument("--dupe_factor", type=int, default=10)
    p.add_argument("--masked_lm_prob", type=float, default=0.15)
    p.add_argument("--short_seq_prob", type=float, default=0.1)
    p.add_argument("--window_size", type=int, default=256, help="Documents among which the random next is drawn.")
    p.add_argument("--num_workers", type=int, default=1,
                   help="Worker processes (each pays TF start-up; --threads is usually faster).")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                   help="Shards in flight at once in this process's pipeline (with --num_workers 1).")
    p.add_argument("--no_progress", action="store_true", help="No progress line on stderr.")
    p.add_argument("--runner", choices=["DirectRunner", "DataflowRunner", "FlinkRunner", "SparkRunner"],
                   help="Run on Apache Beam (pip install 'keras-bert-zoo[beam]'): each input file is one "
                        "element, written by the same pipeline, byte-identical to the local writer. Beam's own "
                        "pipeline options (e.g. --direct_num_workers=2, --project, --region) pass through.")
    p.add_argument("--strict", action="store_true",
                   help="Exit with status 1 when the report warns (no instance, [UNK] > 1%%, invalid UTF-8 in "
                        "> 1%% of lines, > 10%% same-document 'random next' pairs, > 50%% single-sentence "
                        "documents, empty input files). The outputs are written either way.")
    args, beam_args = p.parse_known_args(argv)
    if beam_args and not args.runner:
        p.error(f"unrecognized arguments: {' '.join(beam_args)} (Beam options need --runner)")
    args.beam_args = beam_args
    return args


def main(argv=None):
    args = parse_args(argv)  # before TensorFlow (seconds): --help and bad flags answer at once
    import_tensorflow()
    from keras_bert_zoo.data.documents import resolve_files  # the package imports TensorFlow
    from keras_bert_zoo.data.pretraining_report import format_report
    from keras_bert_zoo.data.pretraining_writer import write_pretraining_tfrecords
    from keras_bert_zoo.data.beam_pipeline import write_pretraining_tfrecords_beam
    from keras_bert_zoo.presets.download import PresetNotAvailableError

    if args.vocab_file:
        if not os.path.isfile(args.vocab_file):
            sys.exit(f"error: --vocab_file {args.vocab_file!r} does not exist.")
        spec = {"vocabulary": args.vocab_file, "lowercase": True if args.do_lower_case is None else args.do_lower_case}
    else:
        spec = {"preset": args.preset, "lowercase": args.do_lower_case}
    options = dict(max_seq_length=args.max_seq_length, max_predictions_per_seq=args.max_predictions_per_seq,
                   random_seed=args.random_seed, dupe_factor=args.dupe_factor, masked_lm_prob=args.masked_lm_prob,
                   short_seq_prob=args.short_seq_prob, do_whole_word_mask=args.do_whole_word_mask,
                   window_size=args.window_size)
    try:
        if args.runner:
            report = write_pretraining_tfrecords_beam(args.input_file, args.output_file, spec, runner=args.runner,
                                                      pipeline_args=args.beam_args, **options)
        else:
            num_workers = max(1, min(args.num_workers, len(resolve_files(args.input_file))))
            report = write_pretraining_tfrecords(
                args.input_file, args.output_file, spec, num_workers=num_workers, threads=max(1, args.threads),
                progress=not args.no_progress, **options)
    except (ValueError, ImportError, PresetNotAvailableError) as e:
        sys.exit(f"error: {e}")
    print(format_report(report))
    print("Wrote " + ", ".join(report["outputs"]) + f" and {report['report_prefix']}.report.{{json,txt}}")
    for warning in report["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    if args.strict and report["warnings"]:
        sys.exit(f"error: --strict: the report has {len(report['warnings'])} warning(s), above.")


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
    # Every shard and the report are written, closed and renamed by now: skip the
    # interpreter's teardown (freeing TensorFlow's pipeline caches and thread pools
    # only costs time).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
