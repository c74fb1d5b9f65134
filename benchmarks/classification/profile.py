"""Where our forward pass spends its time, op by op (TensorFlow's profiler), and what that leaves
of the roof: the measured limits of #49's goals 1 (float32) and 3 (bf16).

One process, our BERT-Base classifier in `dtype`, the section's throughput rows packed as
`predict` packs them (sorted by length, batches of 32, each cut to its longest row rounded up
to 8); after a warm-up pass, one timed pass of `predict_on_batch` over the packed batches (the
forward, no tokenization) and one pass under `tf.profiler.experimental`, whose trace
(`*.xplane.pb`) gives each executed op's duration. Ops are grouped by what they compute
(`CATEGORIES`, by op type and name scope); control-flow ops that wrap others (the
per-sequence attention's `While`) are left out so nothing counts twice. The 2 inter-op threads
may overlap ops, so the sum can differ from the wall time a little.
"""

import collections
import glob
import json
import os
import re
import statistics
import tempfile
import time

WRAPPERS = ("While", "StatelessWhile", "If", "StatelessIf", "PartitionedCall", "StatefulPartitionedCall")
# (category, test on (scope, op type)), first match wins.
CATEGORIES = (
    ("optimizer update (and the gradients' global norm)",
     lambda scope, kind: "Apply" in kind or "adam" in scope.lower() or "optimizer" in scope.lower()),
    ("layer norms", lambda scope, kind: "layer_norm" in scope),
    ("embeddings (lookups, sum, layer norm)", lambda scope, kind: "embeddings" in scope),
    ("dense matmuls (Q, K, V, output, FFN, pooler, head)", lambda scope, kind: "MatMul" in kind and "Batch" not in kind),
    ("attention matmuls (q·kᵀ, p·v)", lambda scope, kind: "BatchMatMul" in kind),
    ("softmax", lambda scope, kind: "Softmax" in kind),
    ("GELU's erf", lambda scope, kind: kind == "Erf"),
    ("element-wise (GELU's products, scaling, residual adds, bias adds)",
     lambda scope, kind: kind.removeprefix("_Mkl") in ("Mul", "AddV2", "Add", "Sub", "RealDiv", "BiasAdd", "Cast",
                                                  "Maximum", "Minimum", "Neg")),
    ("transposes (heads split and merged)", lambda scope, kind: "Transpose" in kind),
    ("gathers, scatters, slices (the real tokens)",
     lambda scope, kind: any(k in kind for k in ("Gather", "Scatter", "Slice", "Where", "Cumsum", "Pad", "Tile",
                                                "Range", "Repeat", "TensorList", "Reshape", "ConcatV2", "Pack"))),
)


# Keras casts a float32 kernel to the compute dtype as its dense layer reads it (mixed precision).
KERNEL_CAST = re.compile(r"/(query|key|value|attention_output|intermediate|output)(_\d+)?/Cast/Cast$")


def categorize(scope, kind):
    # Grappler names the nodes it rewrites after itself (`.../ArithmeticOptimizer/AddOpsRewrite_add_2`):
    # those segments say nothing about what the node computes.
    scope = "/".join(part for part in scope.split("/") if not part.endswith("Optimizer")
                     and not part.startswith(("AddOpsRewrite", "FoldTranspose")))
    for name, test in CATEGORIES:
        if test(scope, kind):
            return name
    return "other"


def op_times(logdir):
    """{(op name, op type): total µs} from the profiler trace under `logdir` (TF's compute threads)."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    totals = collections.Counter()
    for path in glob.glob(os.path.join(logdir, "**", "*.xplane.pb"), recursive=True):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            for line in plane.lines:
                if not line.name.startswith("tf_Compute"):  # the executor's threads; not Python's
                    continue
                for event in line.events:
                    name = plane.event_metadata[event.metadata_id].name
                    if ":" not in name or "::" in name:
                        continue  # executor bookkeeping, not an op
                    scope, kind = name.rsplit(":", 1)
                    if kind not in WRAPPERS:
                        totals[(scope, kind)] += event.duration_ps / 1e6
    return totals


def summarize(totals, top=5):
    """`op_times`' totals -> ({category: ms}, {op type: ms} of the `top` largest types in "other")."""
    categories, other = collections.Counter(), collections.Counter()
    for (scope, kind), us in totals.items():
        category = categorize(scope, kind)
        categories[category] += us / 1e3
        if category == "other":
            other[kind] += us / 1e3
    return dict(categories), dict(other.most_common(top))


def measure_profile(preset, rows, throughput_rows, batch_size=32, dtype="float32"):
    """Worker: the forward pass's wall time and its ops' time by category, per pass."""
    import numpy as np
    import tensorflow as tf

    from keras_bert_zoo.models import task_inputs, task_pipeline
    from keras_bert_zoo.models.bert_classifier import BertClassifier

    model = BertClassifier.from_preset(preset, dtype=dtype)
    with open(rows, encoding="utf-8") as f:
        texts = np.asarray(json.load(f)["throughput"][:throughput_rows])
    prepare, _ = task_pipeline.pipeline_functions(model.preprocessor)
    order = task_inputs.length_order(texts)
    batches = []
    for i in range(0, len(texts), batch_size):
        packed = prepare((texts[order[i : i + batch_size]],))
        packed = packed[0] if isinstance(packed, tuple) else packed
        batches.append({k: v.numpy() for k, v in packed.items()})
    task_pipeline.trace_any_shape(model, batches[0])

    def forward():
        for x in batches:
            np.asarray(model.predict_on_batch(x))

    forward()  # warm-up
    walls = []
    for _ in range(2):
        start = time.perf_counter()
        forward()
        walls.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory(prefix="kbz_profile_") as logdir:
        tf.profiler.experimental.start(logdir)
        forward()
        tf.profiler.experimental.stop()
        totals = op_times(logdir)
    by_category, other = summarize(totals)
    casts = {scope: us for (scope, kind), us in totals.items() if kind == "Cast"}
    real_tokens = int(sum(int(x["padding_mask"].sum()) for x in batches))
    padded_cells = int(sum(x["padding_mask"].size for x in batches))
    return {"wall_ms": 1e3 * statistics.median(walls), "categories_ms": by_category,
            "other_ms": other, "real_tokens": real_tokens, "padded_cells": padded_cells,
            "rows": len(texts), "dtype": model.backbone.dtype_policy.name,
            "casts_ms": sum(casts.values()) / 1e3,
            "kernel_casts_ms": sum(us for scope, us in casts.items() if KERNEL_CAST.search(scope)) / 1e3}
