"""The main job (`make demo`): pretrain a small BERT on real text, then measure honestly whether it
helps: the fair protocol on two real tasks, real / ours / random / majority, and serve the best.

    python tools/quickstart.py                   # ~10 minutes on 2 cores
    python tools/quickstart.py --seed 1          # the same table with other seeds
    python tools/quickstart.py --steps 16000     # a point further along the transfer curve
    python tools/quickstart.py --stages finetune,serve   # on the preset of an earlier run

Stages (`--stages`, each a call into keras_bert_zoo):
1. pretrain: the English Wikipedia sample inside gensim plus the Rotten Tomatoes training movies'
   unlabelled text → a WordPiece vocabulary → MLM examples made on the fly (data report) →
   `tools/demo/recipe.py`'s recipe for `--steps` steps (no wall-clock stop) → held-out MLM
   accuracy against the unigram baseline → preset → reload, fill-mask.
2. finetune: the fair protocol (`keras_bert_zoo.finetuning.protocol`) on movie-review polarity
   and WordNet word-definition pairs: real pretrained weights (all-MiniLM-L6-v2, frozen), ours,
   random init of ours' architecture, the majority class; the same learning-rate grid for each
   start, the pick on dev, every seed on test; the table (mean ± std), a PNG, and where the
   transfer curve (docs/demo.md) says ours overtakes random, with the command.
3. serve: export the start with the best polarity dev score as a SavedModel on raw strings; a
   fresh process with only TensorFlow and tensorflow-text classifies held-out reviews.
Everything lands in `runs/<name>/`; `summary.json` holds every seed's number.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import import_tensorflow  # noqa: E402
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from tools.demo import recipe, stages  # noqa: E402

# Stage 1's budget: what fits 10 minutes on 2 cores with the protocol after it (docs/demo.md).
DEFAULT_STEPS = 1500
# A seconds-long run for the tests: the same stages on a few articles, rows and steps.
TINY = dict(max_articles=30, vocabulary_size=600, steps=60, task_rows=dict(train=48, dev=32, test=32),
            protocol=dict(learning_rates=(1e-3,), seeds=(0, 1), epochs=1, batch_size=16),
            serve_examples=3, throughput_examples=32)
STAGES = ("pretrain", "finetune", "serve")
PRECISIONS = ("auto", "float32", "mixed_bfloat16", "mixed_float16")


def _stages(value):
    stages = tuple(s.strip() for s in value.split(",") if s.strip())
    unknown = [s for s in stages if s not in STAGES]
    if unknown or not stages:
        raise argparse.ArgumentTypeError(f"--stages takes names from {','.join(STAGES)}. Received: {value!r}.")
    return stages


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", default="demo", help="Run name: outputs go to <runs-dir>/<name>/.")
    p.add_argument("--runs-dir", default="runs")
    p.add_argument("--seed", type=int, default=0, help="Pretraining seed (+12345) and the protocol's first "
                   "seed (seeds SEED, SEED+1, SEED+2); the rows of the tasks stay the same.")
    p.add_argument("--stages", type=_stages, default=STAGES, help="Comma-separated subset of "
                   f"{','.join(STAGES)}; finetune without pretrain uses the run's preset/ (or --our-preset).")
    r = p.add_argument_group("pretraining (stage 1): tools/demo/recipe.py's RECIPE unless given")
    r.add_argument("--input", default=None, help="A MediaWiki .xml.bz2 dump, or text files/globs in the original "
                   "format (one sentence per line, blank line between documents), instead of gensim's sample.")
    r.add_argument("--in-domain", action=argparse.BooleanOptionalAction, default=True, help="Add the Rotten "
                   "Tomatoes training movies' unlabelled plots and reviews to the corpus (no dev or test movie).")
    r.add_argument("--max-articles", type=int, default=None, help="Use at most N articles of a dump.")
    r.add_argument("--heldout-fraction", type=float, default=0.05)
    r.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="Pretraining steps (the schedule's length; "
                   f"default {DEFAULT_STEPS}, which fits the demo's 10 minutes).")
    for key, kind in (("learning_rate", float), ("masked_lm_prob", float), ("batch_size", int),
                      ("max_predictions", int), ("vocabulary_size", int), ("dropout", float)):
        r.add_argument(f"--{key.replace('_', '-')}", type=kind, default=None, help=f"default {recipe.RECIPE[key]}")
    r.add_argument("--seq-length", type=int, default=None, help=f"default {recipe.RECIPE['sequence_length']}")
    r.add_argument("--size", default=None, help="A registry preset whose architecture to train (the vocabulary "
                   "is learned). Default: the recipe's (2 layers, hidden 128).")
    r.add_argument("--nsp", action=argparse.BooleanOptionalAction, default=None,
                   help="Next-sentence prediction (default off: at the demo's budgets it stays at chance).")
    r.add_argument("--precision", choices=PRECISIONS, help="Float policy of pretraining (float32 unless asked).")
    f = p.add_argument_group("comparison (stage 2)")
    f.add_argument("--real-preset", default=None, help="Real pretrained weights (default all-MiniLM-L6-v2 as "
                   "`make install` installs it), used as frozen features.")
    f.add_argument("--our-preset", default=None, help="Stage 2 without stage 1: the pretrained preset to compare "
                   "(default <runs-dir>/<name>/preset).")
    f.add_argument("--serve-examples", type=int, default=5, help="Held-out reviews the served model classifies.")
    f.add_argument("--throughput-examples", type=int, default=256, help="Held-out reviews (batches of 32) timed "
                   "for the served throughput.")
    p.add_argument("--tiny", action="store_true", help="A seconds-long run (for tests): a few articles, rows and "
                   "steps; explicit flags still override.")
    p.add_argument("--no-progress", action="store_true", help="No progress bars or per-run lines.")
    args = p.parse_args(argv)
    args.task_rows, args.protocol = dict(recipe.TASK_ROWS), dict(recipe.PROTOCOL)
    if args.tiny:
        defaults = p.parse_args([])
        for key, value in TINY.items():
            if key in ("task_rows", "protocol") or getattr(args, key) == getattr(defaults, key):
                setattr(args, key, value)
    for name in ("steps", "serve_examples", "throughput_examples"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1. Received: {getattr(args, name)}.")
    args.finetune_seq_length = args.seq_length or recipe.SEQUENCE_LENGTH
    return args


def recipe_overrides(args):
    """The RECIPE keys the flags set (`--size`: a registry preset's architecture)."""
    overrides = {key: getattr(args, key) for key in ("learning_rate", "masked_lm_prob", "batch_size",
                                                     "max_predictions", "vocabulary_size", "dropout", "nsp")
                 if getattr(args, key) is not None}
    if args.seq_length is not None:
        overrides["sequence_length"] = args.seq_length
    if args.size is not None:
        from keras_bert_zoo.presets.config import get_preset_config  # lazy: loads TensorFlow (start-up time)

        config = get_preset_config(args.size)
        overrides.update({k: config[k] for k in ("num_layers", "num_heads", "hidden_dim", "intermediate_dim")})
    return overrides


def pretrain_stage(args, run):
    """Stage 1: the summary's pretraining fields; the preset directory."""
    corpus = stages.prepare_corpus(args, run)
    vocab_path = stages.learn_vocab(args, run, corpus)
    data = stages.make_examples(args, run, corpus, vocab_path)
    model, training, result = stages.pretrain(args, run, corpus, vocab_path)
    evaluation = stages.evaluate(args, run, data, training, result)
    preset_dir = stages.report_preset(run, result)
    samples = stages.reload_and_fill_mask(args, run, model, preset_dir, corpus, result["held_out_batches"])
    return stages.pretraining_summary(run, corpus, data, training, evaluation, preset_dir, samples)


def _cpu_seconds():
    """User + system CPU time of this process and the processes it waited for (the serving client)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv=None):
    args = parse_args(argv)
    started, cpu_started, load = time.perf_counter(), _cpu_seconds(), os.getloadavg()[0]
    import_tensorflow()  # TensorFlow without its start-up noise on stderr (tools/_startup.py)
    from keras_bert_zoo.utils.precision import precision_line, resolve_precision

    asked = args.precision
    args.precision = resolve_precision(args.precision)  # None: float32, every command's default
    args.recipe = dict(recipe.RECIPE, **recipe_overrides(args))
    cpu = stages.cpu_kind()
    stages.say("setup", f"pretraining {precision_line(args.precision, asked)}; {args.steps:,} steps of the recipe "
               f"(tools/demo/recipe.py; flags override): {args.recipe['num_layers']} layers, hidden "
               f"{args.recipe['hidden_dim']}, {'MLM+NSP' if args.recipe['nsp'] else 'MLM only'}, "
               f"{args.recipe['masked_lm_prob']:g} of tokens masked, peak learning rate {args.recipe['learning_rate']:g}; "
               f"{cpu}, {os.cpu_count()} cores, load average {load:.1f}")
    run = stages.RunDir(os.path.join(args.runs_dir, args.name))
    summary = {}
    if set(args.stages) != set(STAGES) and os.path.isfile(run("summary.json")):
        # A subset of the stages: the figures of the stages not run stay from the run before.
        with open(run("summary.json"), encoding="utf-8") as f:
            summary = json.load(f)
    summary.update({"args": {k: v for k, v in vars(args).items()}, "stages": list(args.stages),
                    "seconds": dict(summary.get("seconds", {})), "cpu_seconds": dict(summary.get("cpu_seconds", {})),
                    "load_average_start": load, "cpu": cpu, "cores": os.cpu_count()})
    client = None  # the serving process, started with stage 2: its import overlaps the fine-tunes
    try:
        for name in STAGES:
            if name not in args.stages:
                continue
            begin, cpu = time.perf_counter(), _cpu_seconds()
            if name == "pretrain":
                summary.update(pretrain_stage(args, run))
            elif name == "finetune":
                from tools.demo.compare import compare

                if "serve" in args.stages:
                    from tools.demo.serve import start_client

                    client = start_client()
                ours = summary.get("preset_dir") if "pretrain" in args.stages else args.our_preset or run("preset")
                summary["finetuning"] = compare(args, run, ours)
            else:
                from tools.demo.serve import serve

                summary["serving"] = serve(args, run, summary.get("finetuning"), client)
            summary["seconds"][name] = time.perf_counter() - begin
            summary["cpu_seconds"][name] = _cpu_seconds() - cpu
    finally:
        if client is not None and client.poll() is None:
            client.kill()  # stage 2 or 3 failed: the serving process is not left waiting
            client.communicate()
    summary.update(cpu_seconds_total=_cpu_seconds() - cpu_started, load_average_end=os.getloadavg()[0])
    return stages.write_summary(run, summary, seconds=time.perf_counter() - started)


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
