"""Export a fine-tuned task (a preset directory or a .keras file) as a SavedModel that answers raw strings.

    python tools/export.py --model runs/sst2/preset --output served/sst2/1
    python tools/export.py --model runs/stsb/preset --output served/stsb/1 --text-inputs text_a text_b
    python tools/export.py --model runs/sst2/preset --output served/sst2_int8/1 --quantize int8

The SavedModel's `serving_default` takes UTF-8 strings (`text`, or the names given to
--text-inputs) and returns the task's answers (a classifier: `label`, `label_id`,
`probabilities`; regression: `score`); `ids` takes packed ids; `examples` takes
serialized tf.train.Examples (TF Serving's classify/regress). It loads with
`tf.saved_model.load` once `tensorflow_text` is imported, and serves unchanged in TF
Serving's model server (which includes the tensorflow-text ops). The write is atomic:
an existing export at --output is replaced only by a complete one. --quantize int8 exports the
task with its Dense layers in int8 (`task.quantize("int8")`: oneDNN's VNNI int8 matmul; a
model saved quantised is exported quantised without the flag).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import import_tensorflow  # noqa: E402

SIGNATURES = ("text", "ids", "examples")
PRECISION_CHOICES = ("auto", "float32", "mixed_bfloat16", "mixed_float16")  # utils.precision (a test keeps them equal)
QUANTIZE_MODES = ("int8",)  # keras_bert_zoo.utils.quantization.MODES (a test keeps them equal)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="task preset directory (save_to_preset) or a .keras file")
    p.add_argument("--output", required=True, help="SavedModel directory to write (e.g. served/NAME/1)")
    p.add_argument("--signatures", nargs="+", choices=SIGNATURES, default=list(SIGNATURES))
    p.add_argument("--text-inputs", nargs="+", metavar="NAME",
                   help="classifier input names: one (default: text) or two for pairs (text_a text_b)")
    # float32 by default: a SavedModel's graph keeps its precision, and bf16 graphs run slower than
    # float32 on a serving CPU without native bf16 (and no faster at batch 1 on one with it).
    p.add_argument("--precision", choices=PRECISION_CHOICES, default="float32",
                   help="float policy of the exported graph (default float32, portable); auto: mixed_bfloat16 "
                   "where this machine has native bf16 (AVX512-BF16/AMX) or a GPU/TPU")
    p.add_argument("--quantize", choices=QUANTIZE_MODES,
                   help="quantise the task before exporting (int8 weights and activations)")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not os.path.exists(args.model):
        raise SystemExit(f"--model {args.model!r} does not exist. Pass a task preset directory or a .keras file.")
    import_tensorflow()
    from keras_bert_zoo.serving.client import load_task  # lazy: TensorFlow after argument checks (start-up time)
    from keras_bert_zoo.serving.export import export  # lazy: as above

    task = load_task(args.model, dtype=args.precision)
    if args.quantize:
        task.quantize(args.quantize)
    path = export(task, args.output, signatures=tuple(args.signatures), text_inputs=args.text_inputs)
    print(f"Exported {type(task).__name__} to {path} (signatures: {', '.join(args.signatures)})")
    return path


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
