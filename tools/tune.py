"""The paper's fine-tuning search (§A.3): a grid of learning rate × batch size × epochs, random restarts.

    python tools/tune.py --task mrpc --train-file glue_data/MRPC/train.tsv \
        --dev-file glue_data/MRPC/dev.tsv --preset bert_base_en_uncased --output-dir runs/mrpc-search \
        --grid paper --restarts 3

Same flags as tools/finetune.py (its --learning-rate, --batch-size, --epochs are the grid's here), plus
--grid paper|small|JSON (paper: lr {5e-5, 4e-5, 3e-5, 2e-5} × batch {16, 32} × epochs {2, 3, 4}),
--restarts N (each restart its own seed for head initialisation and shuffling; the best restart counts)
--tuner-dir D (keras-tuner's files; default OUTPUT_DIR/tuner) and --export DIR (the best model as a
SavedModel on raw strings, keras_bert_zoo.serving.export; finetune.py's --export-dir means the same here).
Kill it and run the same command: finished trials are not run again. Writes OUTPUT_DIR/results.md, heatmap.png, results.json and preset/
(the best trial's model). A trial is scored by the task's official dev metric at the end of its run.

A rerun resumes only the same experiment: the tuner folder's experiment.json (and results.json)
record the task, the preset's content (each file's sha256: a --preset folder replaced under the same
name is another experiment), the data files' names and sha256, every setting that changes a score, the grid,
restarts and objective; a rerun that changes any is refused before the data is read, naming each
change, and so is an output folder holding a fine-tuning run or files no run recorded. --overwrite
starts a new search instead (the old search's recorded files are removed; files no run recorded
never are). A bad flag, file or folder prints one line, `tune.py: error: ...`, and exits 2
(--debug: the traceback too).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import import_tensorflow, run_main  # noqa: E402

from tools.finetune import build_parser as finetune_parser  # noqa: E402

GRID_FLAGS = ("learning_rate", "batch_size", "epochs")


def build_parser():
    p = finetune_parser()
    p.description = __doc__.splitlines()[0]
    p.add_argument("--grid", default="paper", help="paper, small, or a JSON object of lists "
                   '(e.g. \'{"learning_rate": [5e-5, 3e-5], "batch_size": [32], "epochs": [2]}\')')
    p.add_argument("--restarts", type=int, default=1, help="random restarts per grid point (the best counts)")
    p.add_argument("--tuner-dir", help="keras-tuner's directory; default OUTPUT_DIR/tuner")
    p.add_argument("--export", help="also export the best model as a SavedModel on raw strings to this directory "
                   "(keras_bert_zoo.serving.export; written at the end of the search)")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    import_tensorflow()  # TensorFlow without its start-up noise on stderr (tools/_startup.py)
    given = [f"--{k.replace('_', '-')}" for k in GRID_FLAGS if getattr(args, k) is not None]
    if given:
        parser.error(f"{', '.join(given)}: the grid sets these; put the values in --grid.")
    # TensorFlow is imported only now, after the flags parsed.
    from keras_bert_zoo.finetuning.config import FinetuningConfig  # lazy: TensorFlow after the flags (start-up time)
    from keras_bert_zoo.finetuning.search.run import run_tuning  # lazy: TensorFlow after the flags (start-up time)
    from keras_bert_zoo.finetuning.search.tuner import resolve_grid  # lazy: keras-tuner after the flags
    from keras_bert_zoo.utils.precision import precision_line  # lazy: TensorFlow after the flags (start-up time)

    try:
        grid = resolve_grid(args.grid)
    except ValueError as e:
        parser.error(f"--grid: {e}")
    if args.export_dir is not None and args.export not in (None, args.export_dir):
        parser.error("--export-dir and --export name the same thing here (the best model's export); give one.")
    export = args.export or args.export_dir  # finetune.py's flag: here, the best trial's export
    skip = ("no_progress", "skip_malformed", "grid", "restarts", "tuner_dir", "export", "export_dir", "overwrite",
            "debug")
    given = {k: v for k, v in vars(args).items() if v is not None and k not in skip}
    config = FinetuningConfig(**given, skip_malformed=args.skip_malformed, progress=not args.no_progress)
    print(precision_line(config.precision, args.precision), flush=True)
    result = run_tuning(config, grid=grid, restarts=args.restarts, tuner_dir=args.tuner_dir,
                        export=export, overwrite=args.overwrite)
    best = result["best"]
    print(f"best: learning rate {best['learning_rate']:g}, batch {best['batch_size']}, {best['epochs']} epochs, "
          f"restart {best['restart']}: dev {result['objective']} {best[result['objective']]:.4f}; "
          f"{len(result['trials'])} trials; written to {args.output_dir}"
          + (f"; exported to {result['export']}" if result["export"] else ""))
    return result


if __name__ == "__main__":
    run_main(main)
