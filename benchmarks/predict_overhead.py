"""Where the time of one `task.predict` call on raw text goes (the serving section's note).

`Task.predict` on raw strings builds a tf.data pipeline per call (models/task.py,
models/task_pipeline.py); the exported SavedModel is one function call. This worker times
the pipeline's pieces on one row of a classifier, in the serving section's own process.
"""

import json
import statistics

from benchmarks._subprocess import time_runs


def predict_breakdown(preset, rows, calls=7):
    """Worker: where one `task.predict` call on one row of a classifier goes (median ms of `calls`).

    The pieces `Task.predict` runs for raw in-memory text (`task_pipeline.predict_sorted`):
    the traced tokenize-and-pack function, the truncation count (a second tokenizing pass)
    and the model on the packed batch (`predict_on_batch`). For the lever's gain, also the
    tf.data path it replaced: Keras' predict over the preprocessing pipeline, with the
    iterators that creates and what one costs. The SavedModel runs none of these in Python.
    """
    import keras
    from tensorflow.python.data.ops import dataset_ops

    from keras_bert_zoo.models import task_inputs as inputs_lib
    from keras_bert_zoo.models import task_pipeline
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    model = BertClassifier.from_preset(preset)
    row = [json.load(open(rows, encoding="utf-8"))[0]["text"]]

    def median_ms(step):
        return 1e3 * statistics.median(time_runs(step, warmup=1, runs=calls))

    prepare, count = task_pipeline.pipeline_functions(model.preprocessor)
    columns = inputs_lib.as_columns(row)
    packed = prepare((columns,))
    dataset = task_pipeline.preprocess(inputs_lib.in_memory_dataset(columns), prepare)

    def keras_predict():  # Keras' own predict over the tf.data pipeline: the path Task.predict used before
        return keras.Model.predict(model, dataset, verbose=0)

    iterators, make = [], dataset_ops.DatasetV2.__iter__
    dataset_ops.DatasetV2.__iter__ = lambda self: iterators.append(1) or make(self)
    try:
        keras_predict()
    finally:
        dataset_ops.DatasetV2.__iter__ = make
    return {
        "predict_ms": median_ms(lambda: model.predict(row, verbose=0)),
        "prepare_ms": median_ms(lambda: keras.tree.map_structure(lambda t: t.numpy(), prepare((columns,)))),
        "count_truncated_ms": median_ms(lambda: count((columns,)).numpy()),
        "model_ms": median_ms(lambda: model.predict_on_batch(packed)),  # NumPy out: waits for the result
        "tf_data_predict_ms": median_ms(keras_predict),
        "iterators_per_tf_data_predict": len(iterators),
        "iterator_ms": median_ms(lambda: iter(dataset)),
    }


def breakdown_note(breakdown):
    """The Markdown note on `predict_breakdown`'s result (or why there is none)."""
    if not breakdown or "error" in breakdown:
        return f"Where `task.predict`'s time goes: not measured ({(breakdown or {}).get('error', 'skipped')})."
    b = breakdown
    return (
        f"Where a one-row `task.predict` call of the classifier goes (median ms, own process): the call "
        f"{b['predict_ms']:.0f}; in it, tokenizing and packing {b['prepare_ms']:.1f}, counting the truncated rows "
        f"(a second tokenizing pass) {b['count_truncated_ms']:.1f}, and the model on the packed row "
        f"{b['model_ms']:.1f}. The tf.data path it replaced (Keras' predict over the preprocessing pipeline) "
        f"takes {b['tf_data_predict_ms']:.0f}: it creates {b['iterators_per_tf_data_predict']} iterators of "
        f"{b['iterator_ms']:.0f} each (instantiating and graph-optimising the tokenizer's map function). "
        "The exported SavedModel is one function call per request."
    )
