"""Where the time of one `task.predict` call on raw text goes (the serving section's note).

`Task.predict` on raw strings builds a tf.data pipeline per call (models/task.py,
models/task_inputs.py); the exported SavedModel is one function call. This worker times
the pipeline's pieces on one row of a classifier, in the serving section's own process.
"""

import json
import statistics

from tools.bench._subprocess import time_runs


def predict_breakdown(preset, rows, calls=7):
    """Worker: where one `task.predict` call on one row of a classifier goes (median ms of `calls`).

    The pieces are those `Task.predict` runs for raw text (models/task.py, task_inputs.py):
    building the tf.data pipeline, counting truncated rows (a pass of its own), creating an
    iterator (Keras' predict creates them; counted), Keras' predict over the pipeline, and the
    model alone on the packed row. The SavedModel runs none of these.
    """
    import keras
    from tensorflow.python.data.ops import dataset_ops

    from keras_bert_zoo.models import task_inputs as inputs_lib
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    model = BertClassifier.from_preset(preset)
    row = [json.load(open(rows, encoding="utf-8"))[0]["text"]]

    def median_ms(step):
        return 1e3 * statistics.median(time_runs(step, warmup=1, runs=calls))

    iterators, make = [], dataset_ops.DatasetV2.__iter__
    dataset_ops.DatasetV2.__iter__ = lambda self: iterators.append(1) or make(self)
    try:
        model.predict(row, verbose=0)
    finally:
        dataset_ops.DatasetV2.__iter__ = make
    prepare, count = inputs_lib.pipeline_functions(model.preprocessor)
    columns = inputs_lib.as_columns(row)

    def raw():
        return inputs_lib.in_memory_dataset(columns, None, None, None, False, None)

    dataset = inputs_lib.preprocess(raw(), prepare)
    packed = next(iter(dataset))

    def keras_predict(data, verbose):  # Keras' own, on the built pipeline
        return keras.Model.predict(model, data, verbose=verbose)

    return {
        "predict_ms": median_ms(lambda: model.predict(row, verbose=0)),
        "iterators_per_predict": len(iterators),
        "build_pipeline_ms": median_ms(lambda: inputs_lib.preprocess(raw(), prepare)),
        "count_truncated_ms": median_ms(lambda: inputs_lib.report_truncated(raw(), model.preprocessor, count)),
        "iterator_ms": median_ms(lambda: iter(dataset)),
        "keras_predict_on_pipeline_ms": median_ms(lambda: keras_predict(dataset, verbose=0)),
        "model_ms": median_ms(lambda: model.predict_on_batch(packed)),  # NumPy out: waits for the result
    }


def breakdown_note(breakdown):
    """The Markdown note on `predict_breakdown`'s result (or why there is none)."""
    if not breakdown or "error" in breakdown:
        return f"Where `task.predict`'s time goes: not measured ({(breakdown or {}).get('error', 'skipped')})."
    b = breakdown
    return (
        f"Where a one-row `task.predict` call of the classifier goes (median ms, own process): the call "
        f"{b['predict_ms']:.0f}; in it, building the tf.data pipeline {b['build_pipeline_ms']:.0f}, counting the "
        f"truncated rows (a pass of its own over the data) {b['count_truncated_ms']:.0f}, and Keras' predict over "
        f"the built pipeline {b['keras_predict_on_pipeline_ms']:.0f}, which creates {b['iterators_per_predict']} "
        f"iterators of {b['iterator_ms']:.0f} each (instantiating and graph-optimising the tokenizer's map function); the model "
        f"alone on the packed row {b['model_ms']:.1f}. The exported SavedModel runs none of the tf.data steps: "
        "one function call per request."
    )
