"""The transfer curve: at what pretraining compute does our own pretraining beat random init?

Our pretraining (`tools/demo/recipe.py`'s recipe, the one `make demo` runs) at fixed step
budgets, each a run of its own with its own warm-up and decay (no wall-clock stops), each
checkpoint fine-tuned by the fair protocol (`keras_bert_zoo.finetuning.protocol`) on the demo's
two tasks, against random init (the same architecture and vocabulary) and real pretrained
weights (all-MiniLM-L6-v2). Everything is resumable: pretraining runs resume from their
checkpoints, finished fine-tuning runs are kept in `<output-dir>/ledger-<rows>-<epochs>.jsonl`.

    python benchmarks/transfer/curve.py --output-dir runs/transfer --steps 500,1000,2000,4000,8000,16000,48000
    python benchmarks/transfer/curve.py --output-dir runs/transfer_levers --steps 4000 \\
        --lever masked_lm_prob=0.4 --name mask-0.4        # one lever row (any RECIPE key)

Writes `<output-dir>/curve.json` (every seed's number, the pretraining seconds and load, the
CPU kind); `report.py` turns it into docs/demo.md's table and PNG.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


# The recipe keys that change what random init is (so a lever on them gets its own random row); the
# encoder fine-tunes with the dropout it was pretrained with, so that is one too.
ARCHITECTURE = ("num_layers", "num_heads", "hidden_dim", "intermediate_dim", "vocabulary_size", "sequence_length",
                "dropout")


def _value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--output-dir", required=True)
    p.add_argument("--steps", default="500,1000,2000,4000,8000,16000,48000",
                   help="Comma-separated pretraining budgets in steps (each a run of its own).")
    p.add_argument("--lever", action="append", default=[], help="KEY=VALUE: a RECIPE setting changed (repeatable).")
    p.add_argument("--name", default="recipe", help="Name of this recipe's rows (levers: what changed).")
    p.add_argument("--baselines", action=argparse.BooleanOptionalAction, default=True,
                   help="Also run the random-init and real-weights starts (once per output dir).")
    p.add_argument("--tasks", default="polarity,definitions")
    p.add_argument("--learning-rates", help="The protocol's grid (default: tools/demo/recipe.py's PROTOCOL).")
    p.add_argument("--seeds", help="Default: PROTOCOL's.")
    p.add_argument("--epochs", type=int, help="Default: PROTOCOL's.")
    p.add_argument("--seed", type=int, default=12345, help="Pretraining seed.")
    args = p.parse_args(argv)
    args.steps = [int(s) for s in args.steps.split(",") if s.strip()]
    args.levers = dict((k, _value(v)) for k, v in (item.split("=", 1) for item in args.lever))
    return args


def pretrain(args, corpus, vocab, steps):
    """One budget's pretraining (resumed if interrupted); returns its record."""
    from keras_bert_zoo.pretraining.run import run_pretraining
    from tools.demo.recipe import pretraining_config

    directory = os.path.join(args.output_dir, "pretraining", f"{args.name}-{steps}")
    preset = os.path.join(directory, "preset")
    record_path = os.path.join(directory, "record.json")
    if os.path.isfile(record_path):
        with open(record_path, encoding="utf-8") as f:
            return json.load(f)
    load, started = os.getloadavg()[0], time.perf_counter()
    result = run_pretraining(pretraining_config(corpus, vocab, preset, os.path.join(directory, "checkpoints"), steps,
                                                seed=args.seed, **args.levers))
    record = {"steps": steps, "preset": preset, "seconds": time.perf_counter() - started,
              "load_average": [load, os.getloadavg()[0]], "resumed_from": result["resumed_from"],
              "held_out": [{k: v for k, v in h.items() if k != "seconds"} for h in result["held_out"]],
              "baselines": {k: float(v) for k, v in (result["baselines"] or {}).items()},
              "parameters": int(result["model"].backbone.count_params())}
    with open(record_path, "w", encoding="utf-8") as f:
        json.dump(record, f, indent=1)
    print(f"[pretrain] {args.name} {steps} steps in {record['seconds']:.0f}s: held-out MLM "
          f"{record['held_out'][-1]['mlm_accuracy']:.3f}", flush=True)
    return record


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.output_dir, exist_ok=True)
    from keras_bert_zoo.finetuning.protocol import Ledger, ProtocolConfig, deterministic, majority_accuracy, run_protocol
    from tools.demo import recipe
    from tools.demo.stages import cpu_kind

    corpus_dir = os.path.join(args.output_dir, "corpus")
    corpus = recipe.prepare_corpus(corpus_dir)
    vocabulary_size = args.levers.get("vocabulary_size", recipe.RECIPE["vocabulary_size"])
    vocab = os.path.join(args.output_dir, f"vocab-{vocabulary_size}.txt")
    if not os.path.isfile(vocab):
        recipe.learn_vocab(corpus, vocab, vocabulary_size)
    settings = dict(recipe.PROTOCOL)
    if args.learning_rates:
        settings["learning_rates"] = tuple(float(r) for r in args.learning_rates.split(","))
    if args.seeds:
        settings["seeds"] = tuple(int(s) for s in args.seeds.split(","))
    if args.epochs:
        settings["epochs"] = args.epochs
    config = ProtocolConfig(**settings)
    tasks = {name: recipe.task_data(name) for name in args.tasks.split(",")}
    # Runs of another protocol (rows, epochs) are another ledger: nothing is reused across them.
    signature = "-".join(str(v) for v in (*recipe.TASK_ROWS.values(), config.epochs, config.batch_size))
    ledger = Ledger(os.path.join(args.output_dir, f"ledger-{signature}.jsonl"))
    sequence_length = args.levers.get("sequence_length", recipe.SEQUENCE_LENGTH)
    results_path = os.path.join(args.output_dir, "curve.json")
    results = {}
    if os.path.isfile(results_path):
        with open(results_path, encoding="utf-8") as f:
            results = json.load(f)
    results["ours"] = {}  # this run's rows; save() merges them with the file's
    results.update(cpu=cpu_kind(), protocol=vars(config), task_rows=recipe.TASK_ROWS, recipe=recipe.RECIPE)
    results.setdefault("majority", {t: majority_accuracy(d["train"][1], d["test"][1]) for t, d in tasks.items()})
    deterministic()

    def save():
        """Merges this run's results into curve.json under a lock: lever runs may share the folder."""
        import fcntl

        from keras_bert_zoo.finetuning.protocol import write_json

        with open(results_path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            on_disk = {}
            if os.path.isfile(results_path):
                with open(results_path, encoding="utf-8") as f:
                    on_disk = json.load(f)
            ours = dict(on_disk.get("ours", {}), **results.get("ours", {}))
            on_disk.update(results)
            on_disk["ours"] = ours
            results.update(on_disk)
            write_json(results_path, on_disk)

    def protocol(start, build):
        out = {}
        for task, data in tasks.items():
            out[task] = run_protocol(start, task, build, data, config, ledger=ledger,
                                     log=lambda line: print(line, flush=True))
            print(f"[protocol] {start} on {task}: test {out[task]['test_mean']:.3f} ± {out[task]['test_std']:.3f}"
                  f" (lr {out[task]['learning_rate']:g})", flush=True)
        return out

    for steps in args.steps:
        record = pretrain(args, corpus, vocab, steps)
        builders = recipe.start_builders(ours=record["preset"], sequence_length=sequence_length)
        # Random init of the same architecture and vocabulary: one per architecture the levers make.
        shape = {k: v for k, v in args.levers.items() if k in ARCHITECTURE}
        random_key = "random" if not shape else f"random-{args.name}"
        if args.baselines and random_key not in results:
            results[random_key] = dict(protocol(random_key, builders["random"]), architecture=shape)
            save()
        if args.baselines and "real" not in results:
            real = recipe.start_builders(real=recipe.real_preset_path(), sequence_length=sequence_length)["real"]
            results["real"] = protocol("real", real)
            save()
        key = f"{args.name}-{steps}"
        results.setdefault("ours", {})[key] = dict(protocol(key, builders["ours"]), pretraining=record,
                                                   name=args.name, levers=args.levers, random=random_key)
        save()
    return results


if __name__ == "__main__":
    main()
