"""The levers of `BertClassifier.predict` on raw strings, each switched off alone (classification notes).

One process, our float32 BERT-Base classifier, the section's throughput rows; each
variant runs `task_pipeline.predict_sorted` (what `Task.predict` runs on raw in-memory
text) or the pieces it is made of, one warm-up pass and then `runs` timed passes:

- `as_is`: `task.predict(rows)` (sorted by length, each batch cut to its longest row
  rounded up to 8, the truncation count in the same pass);
- `no_sort`: one `predict` call per 32 rows in input order (no sort across batches:
  each batch padded to its own longest row);
- `pad_to_128`: sorted, but every batch padded to `sequence_length` (128), as a fixed-shape
  preprocessor does;
- `multiple_32`: the cut rounded to 32 instead of 8 (fewer shapes, more padding);
- `no_count`: without the truncation count (a second tokenizing pass per batch);
- `padded_dense` and `no_sort_padded_dense`: `as_is` and `no_sort` on a second classifier from the
  same preset whose encoder runs every position (`skip_padding="never"`, the encoder's former way).

Also the number of distinct padded widths the pass runs (each a new input shape for the
model's predict function, which Keras traces with `reduce_retracing=True`).
"""

import json
import statistics

from benchmarks._subprocess import time_runs


def _model_and_texts(preset, rows, throughput_rows, **kwargs):
    """Our float32 classifier from `preset` (levers against float32, on every CPU) and the throughput rows."""
    import numpy as np

    from keras_bert_zoo.models.bert_classifier import BertClassifier

    model = BertClassifier.from_preset(preset, dtype="float32", **kwargs)
    with open(rows, encoding="utf-8") as f:
        return model, np.asarray(json.load(f)["throughput"][:throughput_rows])


def measure_levers(preset, rows, throughput_rows, batch_size=32, runs=2):
    """Worker: sentences/s of each variant (median of `runs` passes) and the padded widths."""
    import numpy as np

    from keras_bert_zoo.models import task_inputs, task_pipeline

    model, texts = _model_and_texts(preset, rows, throughput_rows)
    n = len(texts)

    def sorted_pass(prepare, count):
        return lambda: task_pipeline.predict_sorted(model, texts, prepare, count, batch_size)

    def functions(multiple):
        saved, task_pipeline.PAD_MULTIPLE = task_pipeline.PAD_MULTIPLE, multiple
        try:
            prepare, count = task_pipeline.pipeline_functions(model.preprocessor)
            prepare((texts[:2],))  # traced under this multiple
            return prepare, count
        finally:
            task_pipeline.PAD_MULTIPLE = saved

    def no_sort():
        for i in range(0, n, batch_size):
            model.predict(texts[i : i + batch_size], batch_size=batch_size, verbose=0)

    def padded():  # the preprocessor's fixed length, no cut
        order = task_inputs.length_order(texts)
        for i in range(0, n, batch_size):
            x = model.preprocessor(texts[order[i : i + batch_size]])
            np.asarray(model.predict_on_batch({k: v.numpy() for k, v in x.items()}))

    prepare8, count8 = functions(8)
    variants = {
        "as_is": lambda: model.predict(texts, batch_size=batch_size, verbose=0),
        "no_sort": no_sort,
        "pad_to_128": padded,
        "multiple_32": sorted_pass(*functions(32)),
        "no_count": sorted_pass(prepare8, None),
    }
    rates = {}
    for name, step in variants.items():
        times = time_runs(step, warmup=1, runs=runs)
        rates[name] = n / statistics.median(times)

    # A second classifier from the same preset, every position computed; the variants read `model` as they run.
    model, _ = _model_and_texts(preset, rows, 0, skip_padding="never")
    for name in ("as_is", "no_sort"):
        key = "padded_dense" if name == "as_is" else "no_sort_padded_dense"
        rates[key] = n / statistics.median(time_runs(variants[name], warmup=1, runs=runs))
    order = task_inputs.length_order(texts)
    widths = []
    for i in range(0, n, batch_size):
        packed = prepare8((texts[order[i : i + batch_size]],))
        width = int((packed[0] if isinstance(packed, tuple) else packed)["token_ids"].shape[-1])
        widths.append(width)
    return {"rates": rates, "rows": n, "widths": sorted(set(widths)),
            "sequence_length": model.preprocessor.sequence_length}
