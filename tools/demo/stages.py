"""The stages of `tools/quickstart.py`: each one a call into keras_bert_zoo, a progress
bar and a one-line summary. Kept apart from the argument parsing to stay readable.
Training is the library's driver, `run_pretraining` (the one `tools/pretrain.py` runs)."""

import glob
import os
import platform
import time
import zlib

import numpy as np


class RunDir:
    """`runs/<name>/`: where every artifact of a quickstart run goes."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        os.makedirs(self.path, exist_ok=True)

    def __call__(self, *parts):
        return os.path.join(self.path, *parts)


def cpu_kind():
    """The CPU's matrix-unit kind, as docs/benchmarks.md names it (every measured figure names it)."""
    from keras_bert_zoo.utils.precision import cpu_flags  # lazy: loads TensorFlow (start-up time)

    flags = cpu_flags()
    if not flags:  # /proc/cpuinfo unreadable
        return platform.processor() or "unknown"
    if "amx_bf16" in flags:
        return "Intel Xeon with AMX (amx_bf16)"
    if "avx512_bf16" in flags:
        return "AMD Zen 4 kind (avx512_bf16)"
    return "AVX2-only kind"


def say(stage, message):
    print(f"[{stage}] {message}", flush=True)


def _is_dump(path):
    return path.endswith((".xml.bz2", ".xml", ".bz2"))


def _split_text_corpus(files, out_dir, heldout_fraction):
    """Copies text files (original format) into train/held-out files, by document hash."""
    os.makedirs(out_dir, exist_ok=True)
    outs = {False: open(os.path.join(out_dir, "train-00000.txt"), "w", encoding="utf-8"),
            True: open(os.path.join(out_dir, "heldout-00000.txt"), "w", encoding="utf-8")}
    stats = {"articles_kept": 0, "sentences": 0, "words": 0}

    def flush(doc):
        if doc:
            key = zlib.crc32(doc[0].encode("utf-8")) % 10_000 < round(heldout_fraction * 10_000)
            outs[key].write("\n".join(doc) + "\n\n")
            stats["articles_kept"] += 1
            stats["sentences"] += len(doc)
            stats["words"] += sum(len(s.split()) for s in doc)

    for path in files:
        doc = []
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    doc.append(line.strip())
                else:
                    flush(doc)
                    doc = []
        flush(doc)
    for f in outs.values():
        f.close()
    stats["train_files"] = [outs[False].name]
    stats["heldout_files"] = [outs[True].name]
    return stats


def prepare_corpus(args, run):
    """Stage 1: the Wikipedia sample (or `--input`: a MediaWiki dump or text files) → train/held-out
    text in the input format, plus (`--in-domain`) the Rotten Tomatoes training movies' text."""
    from tools.demo import recipe

    start = time.perf_counter()
    source = args.input
    if source is None:
        corpus = recipe.prepare_corpus(run("corpus"), in_domain=args.in_domain, heldout_fraction=args.heldout_fraction,
                                       max_articles=args.max_articles, progress=not args.no_progress)
        wiki = corpus.stats["wikipedia"]
        stats = dict(wiki, train_files=list(corpus.train_files), heldout_files=list(corpus.heldout_files),
                     source="the English Wikipedia sample inside gensim", in_domain=corpus.stats.get("reviews"))
    else:
        if _is_dump(source):
            from keras_bert_zoo.data import wikipedia  # gensim's import (slow) only where a dump is read

            stats = wikipedia.prepare_wikipedia(
                source, run("corpus"), heldout_fraction=args.heldout_fraction, num_workers=None,
                max_articles=args.max_articles, progress=not args.no_progress)
        else:
            files = sorted(p for pattern in source.split(",") for p in glob.glob(pattern))
            if not files:
                raise ValueError(f"`--input` matches no file. Received: --input={source!r}.")
            stats = _split_text_corpus(files, run("corpus"), args.heldout_fraction)
        stats = dict(stats, source=os.path.basename(source), in_domain=None)
        if args.in_domain:
            path, stats["in_domain"] = recipe.in_domain_text(run("corpus"))
            stats["train_files"] = list(stats["train_files"]) + [path]
    if not stats["train_files"] or not stats["heldout_files"]:
        raise ValueError(
            f"The corpus has no {'training' if not stats['train_files'] else 'held-out'} article "
            f"(kept {stats.get('articles_kept', 0)}). Use more articles or change --heldout-fraction."
        )
    stats["seconds"] = time.perf_counter() - start
    extra = stats["in_domain"]
    say("corpus", f"{stats['articles_kept']} articles, {stats['sentences']} sentences, {stats['words']} words from "
        f"{stats['source']}" + (f", and {extra['words']} words of {extra['documents']} training movies' plots and "
                                "reviews (labels dropped)" if extra else "") + f" in {stats['seconds']:.1f}s")
    return stats


def learn_vocab(args, run, corpus):
    """Stage 2: learn a WordPiece vocabulary on the training text; writes `vocab.txt`."""
    from keras_bert_zoo.text import vocabulary

    start = time.perf_counter()
    path = run("vocab.txt")
    from tqdm.auto import tqdm

    with tqdm(total=corpus["sentences"], desc="learn vocab", unit="line",
              disable=args.no_progress) as bar:
        tokens = vocabulary.learn_vocabulary(
            corpus["train_files"], vocabulary_size=args.recipe["vocabulary_size"], lowercase=True,
            progress=bar.update)
    vocabulary.save_vocabulary(tokens, path)
    say("vocab", f"{len(tokens)} word pieces learned in {time.perf_counter() - start:.1f}s → {path}")
    return path


def make_examples(args, run, corpus, vocab_path):
    """Stage 3: the tokenizer and the data report of the MLM+NSP examples made on the fly."""
    from keras_bert_zoo.data import pretraining
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    start = time.perf_counter()
    tokenizer = BertTokenizer(vocab_path, lowercase=True)
    report = _data_report(pretraining, corpus, tokenizer, args, run)
    say("examples", f"data report in {time.perf_counter() - start:.1f}s → {report['path']}")
    return dict(tokenizer=tokenizer, report=report)


def _data_report(pretraining, corpus, tokenizer, args, run):
    """Stage 3's report: the library's pretraining-data report over one epoch of the
    training files (documents, instances, tokens, NSP balance, mask and cap rates,
    truncation, [UNK] rate, length histogram), printed and saved next to the run."""
    from keras_bert_zoo.data.pretraining_report import format_report, pretraining_report, write_report

    report = pretraining_report(corpus["train_files"], tokenizer, sequence_length=args.recipe["sequence_length"],
                                max_predictions=args.recipe["max_predictions"], seed=args.seed,
                                masked_lm_prob=args.recipe["masked_lm_prob"])
    print(format_report(report), flush=True)
    json_path, _ = write_report(report, run("data"))
    return {"path": json_path, "figures": report}


def pretrain(args, run, corpus, vocab_path):
    """Stage 4: the library's pretraining driver with the recipe (`tools/demo/recipe.py`, flags
    override) for `--steps` steps; it writes the preset."""
    import shutil

    from keras_bert_zoo.pretraining.run import run_pretraining
    from tools.demo import recipe

    # Each demo run starts over (its vocabulary is learned again); tools/pretrain.py resumes.
    shutil.rmtree(run("checkpoints"), ignore_errors=True)
    overrides = {k: v for k, v in args.recipe.items() if recipe.RECIPE.get(k) != v}
    config = recipe.pretraining_config(
        recipe.Corpus(tuple(corpus["train_files"]), tuple(corpus["heldout_files"]), {}), vocab_path, run("preset"),
        run("checkpoints"), args.steps, seed=12345 + args.seed, log_dir=run("tensorboard"),
        eval_every=max(1, args.steps // 10), precision=args.precision, **overrides)
    bar = progress_bar_callback(args.steps, enabled=not args.no_progress)
    start = time.perf_counter()
    result = run_pretraining(config, callbacks=[bar])
    bar.close()
    seconds = time.perf_counter() - start
    model, steps = result["model"], result["step"]
    parameters = int(model.backbone.count_params())
    say("train", f"{steps} steps of a {parameters:,}-parameter BERT in {seconds:.0f}s "
        f"({steps * config.batch_size / max(seconds, 1e-9):.1f} sequences/s, data checks and graph building "
        "included)")
    training = {"history": result["held_out"], "steps": steps, "seconds": seconds, "parameters": parameters,
                "config": {k: v for k, v in vars(config).items() if isinstance(v, (int, float, str, bool, type(None)))}}
    return model, training, result


def progress_bar_callback(total, enabled):
    """A Keras callback that draws a tqdm bar of training steps (`.close()` it after)."""
    import keras

    class TqdmSteps(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="pretrain", unit="step", disable=not enabled)

        def on_train_batch_end(self, batch, logs=None):
            self.bar.update(1)
            if logs and "loss" in logs:
                self.bar.set_postfix(loss=f"{float(logs['loss']):.3f}", refresh=False)

        def close(self):
            self.bar.close()

    return TqdmSteps()


def evaluate(args, run, data, training, result):
    """Stage 5: the last held-out MLM/NSP accuracy vs the unigram and majority baselines; the plot."""
    from keras_bert_zoo.utils.plotting import plot_pretraining_curves

    baselines = result["baselines"]
    evaluation = {k: v for k, v in training["history"][-1].items() if k not in ("step", "loss", "seconds")}
    evaluation.update(baselines, unigram_token=data["tokenizer"].id_to_token(baselines["unigram_id"]))
    evaluation["plot"] = plot_pretraining_curves(
        training["history"], run("training_curves.png"), baselines=baselines,
        title=f"BERT pretraining on {os.path.basename(args.input or 'the gensim enwiki sample')}")
    nsp = ("no NSP head" if evaluation.get("nsp_accuracy") is None else
           f"NSP accuracy {evaluation['nsp_accuracy']:.3f} vs majority {evaluation['nsp_majority_accuracy']:.3f}")
    say("eval", f"held-out MLM accuracy {evaluation['mlm_accuracy']:.3f} vs unigram baseline "
        f"{evaluation['unigram_accuracy']:.3f} ({evaluation['unigram_token']!r}); {nsp}; "
        f"{evaluation['predictions']} masked predictions; plot → {evaluation['plot']}")
    return evaluation


def report_preset(run, result):
    """Stage 6: the preset the driver wrote (backbone + heads + vocabulary)."""
    directory = result["output_dir"]
    size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
    say("preset", f"saved {len(os.listdir(directory))} files ({size / 2**20:.1f} MiB) → {directory}")
    return directory


def _heldout_sentences(corpus, tokenizer, count):
    from keras_bert_zoo.pretraining.fill_mask import mask_one_word

    samples = []
    with open(corpus["heldout_files"][0], encoding="utf-8") as f:
        for line in f:
            words = line.split()
            if 8 <= len(words) <= 25:
                masked = mask_one_word(tokenizer, line.strip())
                if masked:
                    samples.append(masked)
            if len(samples) == count:
                break
    return samples


def reload_and_fill_mask(args, run, model, preset_dir, corpus, held_out_batches, count=5):
    """Stage 7: `BertPretrainer.from_preset(dir)`; same outputs; fill-mask on held-out text."""
    from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
    from keras_bert_zoo.pretraining.fill_mask import fill_mask

    reloaded = BertPretrainer.from_preset(preset_dir, dtype=args.precision, nsp=args.recipe["nsp"])  # as trained
    x = held_out_batches[0][0]
    diff = float(np.max(np.abs(model.predict_on_batch(x)["mlm_logits"]
                               - reloaded.predict_on_batch(x)["mlm_logits"])))
    tokenizer = BertTokenizer(os.path.join(preset_dir, "vocab.txt"), lowercase=True)
    samples = []
    for masked, word in _heldout_sentences(corpus, tokenizer, count):
        top = fill_mask(reloaded.backbone, reloaded.mlm_head, tokenizer, masked, top_k=5,
                        sequence_length=args.recipe["sequence_length"])[0]
        samples.append({"text": masked, "answer": word.lower(), "predictions": top})
        print(f"  {masked}\n    answer {word.lower()!r}; top-5: "
              + ", ".join(f"{t} {p:.2f}" for t, p in top), flush=True)
    hits = sum(s["answer"] == s["predictions"][0][0] for s in samples)
    say("fill-mask", f"reloaded from {preset_dir} (max |Δ logits| {diff:.2e}); top-1 right on "
        f"{hits}/{len(samples)} held-out sentences")
    return {"max_abs_logit_difference": diff, "samples": samples, "top1_hits": hits}


def pretraining_summary(run, corpus, data, training, evaluation, preset_dir, samples):
    """Stage 1's fields of `summary.json`."""
    return {
        "corpus": {k: v for k, v in corpus.items()},
        "vocabulary_size": int(data["tokenizer"].vocabulary_size()),
        "training": training,
        "heldout": evaluation,
        "preset_dir": preset_dir,
        "reload": samples,
        "data_report": data["report"]["path"],
        "tensorboard": run("tensorboard"),
    }


def write_summary(run, summary, seconds):
    """The end: `summary.json` with every figure the run printed (written atomically)."""
    from keras_bert_zoo.utils.files import atomic_write_json

    summary = dict(summary, total_seconds=seconds)
    atomic_write_json(run("summary.json"), summary)
    parts = [f"{seconds:.0f}s in total ({summary['cpu_seconds_total']:.0f} CPU-seconds; load average "
             f"{summary['load_average_start']:.1f} at the start, {summary['load_average_end']:.1f} at the end)"]
    if "heldout" in summary:
        parts.append(f"MLM {summary['heldout']['mlm_accuracy']:.3f} vs unigram "
                     f"{summary['heldout']['unigram_accuracy']:.3f}")
    if "finetuning" in summary:
        f = summary["finetuning"]
        parts += [f"{task} test accuracy real/ours/random " + "/".join(
            f"{f[task][start]['test_mean']:.3f}" for start in ("real", "ours", "random"))
            + f" vs majority {f[task]['majority']:.3f}" for task in f["tasks"]]
    if "serving" in summary:
        parts.append(f"served {summary['serving']['sentences_per_second']:.1f} sentences/s")
    say("done", "; ".join(parts) + f"; summary → {run('summary.json')}")
    return summary
