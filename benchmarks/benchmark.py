"""Runs the speed benchmarks and writes `docs/benchmarks.md`.

Each section lives in `benchmarks/<section>.py` and exposes
`run(args) -> str` returning a Markdown section (table + notes). A run replaces only
the sections it ran, between `<!-- section:NAME -->` markers, so sections can be
re-measured one at a time:

    python benchmarks/benchmark.py                      # every section
    python benchmarks/benchmark.py --only tokenizer     # one section
    python benchmarks/benchmark.py --quick              # fewer repetitions (smoke run)

Method (../shared/PERFORMANCE.md): each measured configuration in its own process,
warm-up first, then >= 3 timed runs; medians, spreads and ratios within one run.
"""

import argparse
import datetime
import importlib
import os
import pathlib
import platform
import re
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools._startup import import_tensorflow  # noqa: E402

SECTIONS = ("backbone", "tokenizer", "pretraining_data", "pretraining", "serving", "qa", "quantization",
            "classification", "finetuning", "serving_load", "finetuning_memory", "serving_overhead", "slow_loris",
            "encoder_paths")
DOC = ROOT / "docs" / "benchmarks.md"
HEADER = """# Benchmarks

Written by `benchmarks/benchmark.py` (`make bench`). Machine: 2 AMD EPYC Zen 4 cores (AVX-512,
bf16), 24 GiB, shared and noisy host: compare ratios measured in the same run, not absolute
times across runs. Method: `../shared/PERFORMANCE.md`. Rows name their precision: float32 is every
model's and command's default, bf16 (`mixed_bfloat16`) the opt-in, measured in rows of its own.
"""


def replace_section(text, name, body):
    """Replaces (or appends) the `name` section of the document text."""
    start, end = f"<!-- section:{name} -->", f"<!-- /section:{name} -->"
    block = f"{start}\n{body.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text)
    return text.rstrip() + "\n\n" + block + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=SECTIONS, help="Run only this section (repeatable).")
    parser.add_argument("--quick", action="store_true", help="Fewer repetitions; for smoke runs.")
    parser.add_argument("--no-write", action="store_true", help="Print only; leave docs/benchmarks.md alone.")
    args = parser.parse_args(argv)
    import_tensorflow()  # the sections import it; here, without its start-up noise
    for name in args.only or SECTIONS:
        module = importlib.import_module(f"benchmarks.{name}")
        stamp = f"_Measured {datetime.date.today().isoformat()} on {platform.machine()}, Python {platform.python_version()}._"
        body = module.run(args).strip() + "\n\n" + stamp
        print(body, flush=True)
        # Re-read just before writing: another section may have been written meanwhile.
        text = DOC.read_text(encoding="utf-8") if DOC.exists() else HEADER
        text = replace_section(text, name, body)
        if not args.no_write:
            DOC.parent.mkdir(exist_ok=True)
            tmp = DOC.with_suffix(".md.tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, DOC)  # atomic: a failed run never leaves a half-written file


if __name__ == "__main__":
    from tools._startup import run_main

    run_main(main)  # a user error: one line, exit 2 (--debug: the traceback)
