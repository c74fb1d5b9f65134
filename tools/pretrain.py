"""Pretrain BERT (MLM + NSP) from text files or TFRecords; resumable; writes a preset.

    python tools/pretrain.py --train-files "corpus/*.txt" --vocabulary vocab.txt \
        --num-layers 2 --hidden-dim 128 --num-heads 2 --intermediate-dim 512 \
        --steps 10000 --warmup-steps 1000 --batch-size 32 --learning-rate 1e-4 \
        --checkpoint-dir runs/tiny/ckpt --output-dir runs/tiny/preset --log-dir runs/tiny/logs \
        --eval-every 500

Run the same command again after a crash: it resumes from --checkpoint-dir exactly.
On a cluster set TF_CONFIG on every worker (--strategy multi_worker, or auto); on a
TPU VM pass --strategy tpu --tpu local.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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
    p.add_argument("--precision", default="float32", choices=["float32", "mixed_bfloat16", "mixed_float16"])
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=32, help="global batch size")
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--sequence-length", type=int, default=128)
    p.add_argument("--max-predictions", type=int, default=20)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--save-every", type=int, default=100)
    p.add_argument("--output-dir", required=True, help="preset directory written at the end")
    p.add_argument("--log-dir", help="TensorBoard logs")
    p.add_argument("--eval-every", type=int, default=0, help="held-out MLM/NSP accuracy every N steps")
    p.add_argument("--eval-batches", type=int, default=4)
    p.add_argument("--eval-files", help="held-out text files / TFRecords")
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.tpu:
        os.environ["TPU_NAME"] = args.tpu
    from keras_bert_zoo.training.pretraining_run import run_pretraining

    size = {k: getattr(args, k) for k in ("num_layers", "num_heads", "hidden_dim", "intermediate_dim",
                                          "max_sequence_length", "dropout") if getattr(args, k) is not None}
    result = run_pretraining(
        args.output_dir, args.checkpoint_dir, train_files=args.train_files, tfrecords=args.tfrecords,
        vocabulary=args.vocabulary, preset=args.preset, size=size, load_weights=args.load_weights,
        strategy=args.strategy, precision=args.precision, steps=args.steps, warmup_steps=args.warmup_steps,
        batch_size=args.batch_size, learning_rate=args.learning_rate, sequence_length=args.sequence_length,
        max_predictions=args.max_predictions, save_every=args.save_every, log_dir=args.log_dir,
        eval_every=args.eval_every, eval_batches=args.eval_batches, eval_files=args.eval_files,
        seed=args.seed, progress=not args.no_progress)
    for record in result["held_out"]:
        print(f"held-out step {record['step']}: MLM accuracy {record['mlm_accuracy']:.4f}"
              + (f", NSP accuracy {record['nsp_accuracy']:.4f}" if record["nsp_accuracy"] is not None else ""))
    print(f"Trained to step {result['step']} (resumed from {result['resumed_from']}); "
          f"preset written to {result['output_dir']}")
    return result


if __name__ == "__main__":
    main()
