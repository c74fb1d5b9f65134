"""Workers of the `finetuning` section: one epoch of `fit` on raw labelled text, one process each.

Every worker builds a BERT-Base-shaped classifier (random weights, seeded; the
all-MiniLM-L6-v2 `vocab.txt`), trains one epoch on the seeded sample of polarity rows that
`train_rows` gives, and returns its step timings (`_rates`) and peak resident memory.
"""

import os
import resource
import time

from benchmarks.serving import minilm_dir

BASE = dict(num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072)
WARMUP_STEPS = 1  # steps of each epoch left out of the rate (graph building, allocator warm-up)


def train_rows(count, seed=0):
    """`count` (text, label) rows of the polarity train split, a seeded sample."""
    import numpy as np

    texts, labels = read_polarity("train")
    pick = np.random.default_rng(seed).permutation(len(texts))[:count]
    return [str(texts[i]) for i in pick], [int(labels[i]) for i in pick]


def read_polarity(split):
    """`keras_bert_zoo.data.polarity.read_polarity(split)`, loaded from its file alone: the peers'
    processes read the same rows without importing our package (and TensorFlow with it)."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "keras_bert_zoo", "data", "polarity.py")
    spec = importlib.util.spec_from_file_location("_bench_polarity", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.read_polarity(split)


def _vocab():
    return os.path.join(minilm_dir(), "vocab.txt")


def _peak_rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rates(step_ends, start, batch_size, rows):
    """Warm-up seconds and examples/s after it, from the end times of each step."""
    steps = len(step_ends)
    warm = min(WARMUP_STEPS, steps - 1)
    timed_rows = rows - warm * batch_size
    boundary = step_ends[warm - 1] if warm else start
    return {"warmup_s": boundary - start, "epoch_s": step_ends[-1] - boundary, "steps": steps,
            "timed_rows": timed_rows, "rate": timed_rows / (step_ends[-1] - boundary)}


def _keras_timer():
    import keras

    class StepTimer(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.start, self.ends = time.perf_counter(), []

        def on_train_batch_end(self, batch, logs=None):
            self.ends.append(time.perf_counter())

    return StepTimer()


def measure_ours(rows, batch_size, precision=None, length_buckets=None, pad_full=False, padded_dense=False,
                 ops_optimizer=False, profile=False):
    """Worker: ours, `BertClassifier.fit` on raw strings, one epoch. `precision`: the backbone's
    `dtype` (None: the default, float32 unless Keras' global policy says otherwise). `padded_dense`: the encoder's
    dense layers train on the padded batch (a backbone built with `skip_padding="inference"`, not the
    classifier's "always" on a CPU); `ops_optimizer`: `BertAdamW`'s update in `keras.ops`, not TF's fused
    Adam kernel. `profile`: a second epoch under TensorFlow's profiler gives the train step's time op by op
    (`categories_ms`, per epoch)."""
    import keras
    import numpy as np

    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    keras.utils.set_random_seed(0)
    texts, labels = train_rows(rows)
    setup = time.perf_counter()
    backbone = BertBackbone(vocabulary_size=30522, dtype=precision, skip_padding="inference" if padded_dense else None,
                            **BASE)
    policy = backbone.dtype_policy.name
    preprocessor = BertPreprocessor(BertTokenizer(_vocab(), lowercase=True), sequence_length=128)
    model = BertClassifier(backbone, num_classes=2, preprocessor=preprocessor)
    model.compile()
    if ops_optimizer:
        model.optimizer.update_step = model.optimizer._update_step_ops
    x, kwargs = texts, {}
    if pad_full:  # packed ids at the full 128: Keras gets them as they are, no per-batch cut
        x = {k: v.numpy() for k, v in preprocessor(texts).items()}
    if length_buckets:
        kwargs["length_buckets"] = length_buckets
    setup = time.perf_counter() - setup
    timer, traces, train_step = _keras_timer(), [0], model.train_step

    def counted_step(data):  # runs in Python only while the train function is being traced
        traces[0] += 1
        return train_step(data)

    model.train_step = counted_step
    model.fit(x, np.asarray(labels), batch_size=batch_size, epochs=1, verbose=0, callbacks=[timer], **kwargs)
    result = _rates(timer.ends, timer.start, batch_size, rows)
    traced = traces[0]  # before the profiled epoch, which may trace again
    lengths = preprocessor.tokenizer.tokenize(texts).row_lengths().numpy() + 2
    if profile:
        result["categories_ms"], result["other_ms"], result["profiled_s"] = profile_epoch(
            model, x, labels, batch_size, kwargs)
    return {**result, "setup_s": setup, "policy": policy, "traces": traced, "peak_rss_mb": _peak_rss_mb(),
            "mean_tokens": float(lengths.mean()), "max_tokens": int(lengths.max()),
            "trainable_params": int(sum(np.prod(w.shape) for w in model.trainable_weights))}


def profile_epoch(model, x, labels, batch_size, kwargs):
    """One more epoch of `fit` under TensorFlow's profiler: {op category: ms}, the largest op types
    of "other" {type: ms}, and the epoch's seconds."""
    import tempfile

    import numpy as np
    import tensorflow as tf

    from benchmarks.classification.profile import op_times, summarize

    with tempfile.TemporaryDirectory(prefix="kbz_profile_") as logdir:
        start = time.perf_counter()
        tf.profiler.experimental.start(logdir)
        model.fit(x, np.asarray(labels), batch_size=batch_size, epochs=1, verbose=0, **kwargs)
        tf.profiler.experimental.stop()
        seconds = time.perf_counter() - start
        totals = op_times(logdir)
    categories, other = summarize(totals)
    return categories, other, seconds


def measure_keras_hub(rows, batch_size, sequence_length=512, precision="float32"):
    """Worker: keras-hub 0.32, `BertTextClassifier.fit` on raw strings, one epoch."""
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    texts, labels = train_rows(rows)
    setup = time.perf_counter()
    policy = "mixed_bfloat16" if precision == "bfloat16" else "float32"
    backbone = keras_hub.models.BertBackbone(vocabulary_size=30522, max_sequence_length=512, num_segments=2,
                                             dtype=policy, **BASE)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=_vocab(), lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=sequence_length)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=preprocessor)
    setup = time.perf_counter() - setup
    timer = _keras_timer()
    model.fit(texts, labels, batch_size=batch_size, epochs=1, verbose=0, callbacks=[timer])
    return {**_rates(timer.ends, timer.start, batch_size, rows), "setup_s": setup, "peak_rss_mb": _peak_rss_mb()}


def measure_hf(rows, batch_size, bf16=False):
    """Worker: HF transformers 5 `Trainer`, default `DataCollatorWithPadding`, one epoch."""
    import tempfile

    import torch
    from transformers import (BertConfig, BertForSequenceClassification, BertTokenizerFast, Trainer,
                              TrainerCallback, TrainingArguments)

    torch.manual_seed(0)
    texts, labels = train_rows(rows)
    setup = time.perf_counter()
    tokenizer = BertTokenizerFast.from_pretrained(minilm_dir())
    config = BertConfig(vocab_size=30522, num_hidden_layers=BASE["num_layers"], hidden_size=BASE["hidden_dim"],
                        num_attention_heads=BASE["num_heads"], intermediate_size=BASE["intermediate_dim"],
                        num_labels=2)
    model = BertForSequenceClassification(config)
    setup = time.perf_counter() - setup
    start = time.perf_counter()
    encoded = tokenizer(texts, truncation=True, max_length=128)
    dataset = [{"input_ids": encoded["input_ids"][i], "token_type_ids": encoded["token_type_ids"][i],
                "attention_mask": encoded["attention_mask"][i], "labels": labels[i]} for i in range(rows)]
    tokenize_s = time.perf_counter() - start

    class StepTimer(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.start, self.ends = time.perf_counter(), []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

    timer = StepTimer()
    with tempfile.TemporaryDirectory(prefix="kbz_bench_hf_") as out:
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=batch_size, num_train_epochs=1,
                                 bf16=bf16, use_cpu=True, report_to=[], save_strategy="no",
                                 logging_strategy="no", seed=0, dataloader_num_workers=0,
                                 disable_tqdm=True)
        trainer = Trainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                          callbacks=[timer])
        trainer.train()
    return {**_rates(timer.ends, timer.start, batch_size, rows), "setup_s": setup, "tokenize_s": tokenize_s,
            "threads": torch.get_num_threads(), "peak_rss_mb": _peak_rss_mb()}


def padding_stats(rows, batch_size, length_buckets=8, seed=0):
    """Worker: the share of the padded cells that hold real tokens, over one epoch's batches.

    Load-independent view of the padding levers: at the full 128; cut per batch to its longest
    row (rounded up to 8, as `trim_to_longest`) with random batches; and with length buckets
    (the batches `bucketed_dataset` makes). Returns `{name: real tokens / padded cells}`.
    """
    import keras
    import numpy as np

    from keras_bert_zoo.models import task_inputs
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    texts, labels = train_rows(rows)
    tokenizer = BertTokenizer(_vocab(), lowercase=True)
    length = dict(zip(texts, np.minimum(tokenizer.tokenize(texts).row_lengths().numpy() + 2, 128)))
    real = sum(length[t] for t in texts)

    def cells(batches):
        return sum(len(b) * min(128, -(-max(length[t] for t in b) // 8) * 8) for b in batches)

    keras.utils.set_random_seed(seed)
    order = np.random.default_rng(seed).permutation(rows)
    random_batches = [[texts[i] for i in order[s : s + batch_size]] for s in range(0, rows, batch_size)]
    bucketed = task_inputs.bucketed_dataset(np.array(texts), np.array(labels), batch_size=batch_size,
                                            window_batches=length_buckets)
    bucket_batches = [[t.decode() for t in x.numpy()] for x, _ in bucketed]
    return {"full_128": real / (128 * rows), "per_batch": real / cells(random_batches),
            "buckets": real / cells(bucket_batches)}
