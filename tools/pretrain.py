"""Pretrain BERT (MLM + NSP) from text files or TFRecords; resumable; writes a preset.

    python tools/pretrain.py --train-files "corpus/*.txt" --vocabulary vocab.txt \
        --num-layers 2 --hidden-dim 128 --num-heads 2 --intermediate-dim 512 \
        --steps 10000 --warmup-steps 1000 --batch-size 32 --learning-rate 1e-4 \
        --checkpoint-dir runs/tiny/ckpt --output-dir runs/tiny/preset --log-dir runs/tiny/logs \
        --eval-every 500

Run the same command again after a crash: it resumes from --checkpoint-dir exactly
(`--steps` may grow; a changed model or data flag such as --hidden-dim or
--sequence-length is refused, naming it: the directory stores the run's settings).
`--time-budget SECONDS` stops early, checkpointed; the same command continues.
Output paths and the corpus (at least one batch) are checked before the first step.

Two phases, as the paper (90% of the steps at length 128, 10% at 512): `--steps` counts
both, `--phase2-steps` the last ones, which run at `--phase2-sequence-length`:

    python tools/pretrain.py --train-files "corpus/*.txt" --preset bert_base_en_uncased \
        --steps 1000000 --warmup-steps 10000 --batch-size 256 \
        --sequence-length 128 --max-predictions 20 \
        --phase2-steps 100000 --phase2-sequence-length 512 --phase2-max-predictions 80 \
        --checkpoint-dir runs/base/ckpt --output-dir runs/base/preset

Phase 2 continues phase 1's model (backbone, MLM and NSP heads, the one 512-row
position table; rows past 128 get only weight decay in phase 1), its optimizer state
and ONE learning-rate schedule over all `--steps` (warm-up once, linear decay to 0),
with its own data pipeline at the new length (`--phase2-batch-size`, default
`--batch-size`; TFRecord input needs `--phase2-tfrecords` written at that length).
Phase 2 checkpoints in <checkpoint-dir>/phase2; killing the run anywhere (phase 1,
between phases, phase 2) and re-running the same command ends with the same weights.
The original instead ran phase 2 as a separate run with a new warm-up; for that, run
a second command with `--preset <phase-1 output dir> --load-weights` (backbone AND
heads are loaded; a preset without heads starts them randomly, logged).

Ablations (§5.1): `--no-nsp` (MLM only); `--objective ltr` (left-to-right LM, causal
backbone, unmasked inputs, implies --no-nsp; no held-out evaluation).
On a cluster set TF_CONFIG on every worker (--strategy multi_worker, or auto); on a
TPU VM pass --strategy tpu --tpu local.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import import_tensorflow  # noqa: E402


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--train-files", help="text files/globs, comma-separated (one sentence per line)")
    src.add_argument("--tfrecords", help="pretraining TFRecords (files/globs)")
    p.add_argument("--vocabulary", help="vocab.txt (defaults to the preset's)")
    p.add_argument("--preset", help="architecture to start from (name or directory)")
    p.add_argument("--load-weights", action="store_true", help="start from the preset's weights")
    for name in ("num-layers", "num-heads", "hidden-dim", "intermediate-dim", "max-sequence-length"):
        p.add_argument(f"--{name}", type=int, help="custom size (overrides the preset)")
    p.add_argument("--dropout", type=float)
    p.add_argument("--strategy", default="auto", choices=["auto", "cpu", "mirrored", "multi_worker", "tpu"])
    p.add_argument("--tpu", help="TPU name or address (sets TPU_NAME)")
    p.add_argument("--precision", choices=["auto", "float32", "mixed_bfloat16", "mixed_float16"],
                   help="default float32, as every command and the Python API; auto: mixed_bfloat16 where bf16 is "
                   "native (AVX512-BF16/AMX, GPU/TPU), else float32. Printed at the start, recorded in "
                   "run_settings.json and the preset's config.json (a resumed run must keep it)")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=32, help="global batch size")
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--sequence-length", type=int, default=128)
    p.add_argument("--max-predictions", type=int, default=20)
    p.add_argument("--masked-lm-prob", type=float, default=0.15, help="share of each sequence's tokens masked "
                   "(text input; at most --max-predictions)")
    p.add_argument("--whole-word-masking", action="store_true", help="mask all pieces of a chosen word (text input)")
    p.add_argument("--no-bias-correction", action="store_true", help="the original's AdamW without Adam's bias "
                   "correction (early updates 3-6x the rate: only with a long warm-up, as the paper's 10,000 steps)")
    p.add_argument("--phase2-steps", type=int, default=0,
                   help="steps of phase 2, counted inside --steps (0: one phase)")
    p.add_argument("--phase2-sequence-length", type=int,
                   help="phase-2 length (text input; default the model's max sequence length)")
    p.add_argument("--phase2-max-predictions", type=int,
                   help="default: --max-predictions scaled with the length (20 at 128 -> 80 at 512)")
    p.add_argument("--phase2-batch-size", type=int, help="global; default --batch-size")
    p.add_argument("--phase2-tfrecords", help="TFRecords at the phase-2 length (TFRecord input)")
    p.add_argument("--no-nsp", action="store_true", help="ablation: MLM only, no next-sentence task")
    p.add_argument("--objective", default="mlm", choices=["mlm", "ltr"],
                   help="ltr: left-to-right LM ablation (implies --no-nsp)")
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--save-every", type=int, default=100)
    p.add_argument("--output-dir", required=True, help="preset directory written at the end")
    p.add_argument("--log-dir", help="TensorBoard logs")
    p.add_argument("--eval-every", type=int, default=0, help="held-out MLM/NSP accuracy every N steps")
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--eval-files", help="held-out text files / TFRecords")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--time-budget", type=float, help="seconds of training after which the run stops early "
                   "(checkpointed; the same command continues); default: run to --steps")
    p.add_argument("--data-service", help="tf.data service dispatcher (host:port): the input pipeline runs on "
                   "its workers, each input file read by one worker per epoch. A resumed run restores the "
                   "model, optimizer and step; its input starts afresh (the service's position is not saved)")
    p.add_argument("--no-progress", action="store_true")
    return p


def build_config(args):
    """The `PretrainingConfig` of parsed flags (imports the package: call after parsing)."""
    from keras_bert_zoo.pretraining.config import PretrainingConfig

    size = {k: getattr(args, k) for k in ("num_layers", "num_heads", "hidden_dim", "intermediate_dim",
                                          "max_sequence_length", "dropout") if getattr(args, k) is not None}
    return PretrainingConfig(
        args.output_dir, args.checkpoint_dir, train_files=args.train_files, tfrecords=args.tfrecords,
        vocabulary=args.vocabulary, preset=args.preset, size=size, load_weights=args.load_weights,
        strategy=args.strategy, precision=args.precision or "float32", steps=args.steps, warmup_steps=args.warmup_steps,
        batch_size=args.batch_size, learning_rate=args.learning_rate, sequence_length=args.sequence_length,
        max_predictions=args.max_predictions, masked_lm_prob=args.masked_lm_prob,
        whole_word_masking=args.whole_word_masking, bias_correction=not args.no_bias_correction,
        save_every=args.save_every, log_dir=args.log_dir,
        eval_every=args.eval_every, eval_batches=args.eval_batches, eval_files=args.eval_files,
        seed=args.seed, progress=not args.no_progress, time_budget=args.time_budget,
        phase2_steps=args.phase2_steps, phase2_sequence_length=args.phase2_sequence_length,
        phase2_max_predictions=args.phase2_max_predictions, phase2_batch_size=args.phase2_batch_size,
        phase2_tfrecords=args.phase2_tfrecords, nsp=not args.no_nsp and args.objective == "mlm",
        objective=args.objective, data_service=args.data_service)


def main(argv=None):
    args = build_parser().parse_args(argv)  # before any TensorFlow import: --help and typos are instant
    import_tensorflow()  # TensorFlow without its start-up noise on stderr (tools/_startup.py)
    if args.tpu:
        os.environ["TPU_NAME"] = args.tpu
    config = build_config(args)
    from keras_bert_zoo.pretraining.run import run_pretraining
    from keras_bert_zoo.utils.precision import precision_line  # lazy: TensorFlow after the flags (start-up time)

    print(precision_line(config.precision, args.precision), flush=True)

    result = run_pretraining(config)
    if args.preset and args.load_weights:
        heads = result["heads_loaded"]
        print(f"Started from {args.preset}: backbone" + "".join(f" + {h.upper()} head" for h in heads)
              + ("" if len(heads) == 1 + config.nsp else "; the other head(s) randomly initialised"))
    for record in result["held_out"]:
        print(f"held-out step {record['step']}: MLM accuracy {record['mlm_accuracy']:.4f}"
              + (f", NSP accuracy {record['nsp_accuracy']:.4f}" if record["nsp_accuracy"] is not None else ""))
    if result["baselines"]:
        print(f"baselines: unigram MLM accuracy {result['baselines']['unigram_accuracy']:.4f}, "
              f"NSP majority {result['baselines']['nsp_majority_accuracy']:.4f}")
    stopped = f" (time budget reached before step {config.steps})" if result["stopped_early"] else ""
    print(f"Trained to step {result['step']}{stopped} (resumed from {result['resumed_from']}); "
          f"preset written to {result['output_dir']}")
    return result


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
