"""Export a fine-tuned task (a preset directory or a .keras file) as a SavedModel that answers raw strings.

    python tools/export.py --model runs/sst2/preset --output served/sst2/1
    python tools/export.py --model runs/stsb/preset --output served/stsb/1 --text-inputs text_a text_b
    python tools/export.py --model runs/sst2/preset --output served/sst2_int8/1 --quantize int8

The SavedModel's `serving_default` takes UTF-8 strings (`text`, or the names given to
--text-inputs) and returns the task's answers (a classifier: `label`, `label_id`,
`probabilities`; regression: `score`); `ids` takes packed ids; `examples` takes
serialized tf.train.Examples (TF Serving's classify/regress). It loads with
`tf.saved_model.load` once `tensorflow_text` is imported, and serves unchanged in TF
Serving's model server (which includes the tensorflow-text ops). It writes only its own
SavedModel: --output must be new or empty, or a TF Serving model folder (numbered version
folders: the export becomes the next version; --version N or --version next picks the version
folder under --output and leaves the rest of it alone). An earlier export is replaced only with
--overwrite, and atomically. A folder holding anything else is refused before the model
loads. Each string input is read up to --max-input-chars characters (bounded memory for any
request). --quantize int8 exports the
task with its Dense layers in int8 (`task.quantize("int8")`: oneDNN's VNNI int8 matmul; a
model saved quantised is exported quantised without the flag).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tools._startup import HUB_PREFIXES, import_tensorflow  # noqa: E402

SIGNATURES = ("text", "ids", "examples")
PRECISION_CHOICES = ("auto", "float32", "mixed_bfloat16", "mixed_float16")  # utils.precision (a test keeps them equal)
QUANTIZE_MODES = ("int8",)  # keras_bert_zoo.utils.quantization.MODES (a test keeps them equal)
TOOL_OPTIONS = {"version": "--version N or --version next", "overwrite": "--overwrite"}



def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True, help="task preset directory (save_to_preset) or a .keras file")
    p.add_argument("--output", required=True, help="SavedModel directory to write (e.g. served/NAME/1)")
    p.add_argument("--signatures", nargs="+", choices=SIGNATURES, default=list(SIGNATURES))
    p.add_argument("--text-inputs", nargs="+", metavar="NAME",
                   help="classifier input names: one (default: text) or two for pairs (text_a text_b)")
    # float32 by default, as every command and `keras_bert_zoo.export`: a SavedModel's graph keeps its
    # precision, and bf16 graphs run slower than float32 on a serving CPU without native bf16 (and
    # no faster at batch 1 on one with it).
    p.add_argument("--precision", choices=PRECISION_CHOICES,
                   help="float policy of the exported graph (default float32, portable; a .keras file saved "
                   "with a policy keeps it); auto: mixed_bfloat16 where this machine has native bf16 "
                   "(AVX512-BF16/AMX) or a GPU/TPU. Printed, and recorded in the SavedModel's `precision` variable")
    p.add_argument("--quantize", choices=QUANTIZE_MODES,
                   help="quantise the task before exporting (int8 weights and activations)")
    p.add_argument("--version", type=_version, metavar="N|next",
                   help="write --output/N (TF Serving's MODEL/<version>/), leaving the other versions alone; "
                   "next: the next free number (the default when --output holds only version folders)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export at the target")
    p.add_argument("--max-input-chars", type=_positive, default=100_000, metavar="N",
                   help="characters of each string input the graph reads (default 100000: a request's memory "
                   "stays bounded; offsets index the kept prefix)")
    return p


def _version(value):
    if value == "next" or (value.isdigit() and value.isascii()):
        return value if value == "next" else int(value)
    raise argparse.ArgumentTypeError(f"must be a version number (0, 1, 2, ...) or 'next', not {value!r}")


def _positive(value):
    if not (value.isdigit() and value.isascii() and int(value) > 0):
        raise argparse.ArgumentTypeError(f"must be a positive whole number, not {value!r}")
    return int(value)


def missing_model(model):
    """The message for a --model that is not there; it names the copy an interrupted save left."""
    from keras_bert_zoo.utils.files import interrupted_save_hint  # lazy: only this error needs the package

    return (f"--model {model!r} does not exist. Pass a task preset directory or a .keras file."
            f"{interrupted_save_hint(model)}")


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not os.path.exists(args.model) and not args.model.startswith(HUB_PREFIXES):
        raise ValueError(missing_model(args.model))
    import_tensorflow()
    from keras_bert_zoo.serving.client import load_task  # lazy: TensorFlow after argument checks (start-up time)
    from keras_bert_zoo.serving.export import export, export_target, exported_precision  # lazy: as above
    from keras_bert_zoo.utils.disk_space import check_free_space  # lazy: as above
    from keras_bert_zoo.utils.precision import precision_line  # lazy: as above

    try:  # before the model loads: a refused folder costs no time
        export_target(args.output, args.version, args.overwrite, TOOL_OPTIONS)
    except ValueError as e:
        raise ValueError(f"--output: {e}") from e
    task = load_task(args.model, dtype=args.precision)
    # Room for the variables (float32: 4 bytes a parameter) before the graph is traced and written.
    check_free_space([("--output", args.output, 4 * task.count_params(), "the SavedModel's variables")])
    print(precision_line(exported_precision(task), args.precision), flush=True)
    if args.quantize:
        task.quantize(args.quantize)
    # The folder as given: a model folder's next version is taken when the export is published
    # (another export may have taken the one export_target saw).
    path = export(task, args.output, signatures=tuple(args.signatures), text_inputs=args.text_inputs,
                  version=args.version, overwrite=args.overwrite, max_input_chars=args.max_input_chars)
    print(f"Exported {type(task).__name__} to {path} (signatures: {', '.join(args.signatures)})")
    return path


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
