"""The encoder's paths, each built at construction, against each other: does each one pay?

`TransformerEncoder` has the padded path and one real-token path (`skip_padding`), which at
inference attends rows longer than `per_sequence_above` one sequence at a time. A `Task` on a
CPU picks the real-token path as far as it may and `per_sequence_above=128`; each
row here is a second model from the same weights built the other way (`BertBackbone(...)`
arguments), so the A/B reads no switch. Model: a seeded random encoder of all-MiniLM-L6-v2's
shape (L6 H384 A12, I1536), float32, token ids drawn at random (the paths' cost depends on
shapes, not on the words). Inputs: QA windows of 384 (64 windows; 60% full, the rest 150 to
384 real tokens, as SQuAD-style windows of long contexts run) through `BertSpanExtractor`
under each decoding rule; classification rows (256 rows of 5 to 64 pieces, mean ~27, sorted
and padded per batch of 32 to their longest, as `predict` does) through `BertClassifier`.

Measured: each configuration in a process of its own, in 3 rounds whose order is reversed in
the second; one warm-up `predict` over all rows (graph building), then 3 timed passes, median;
rows/s is the median of the rounds. "vs default" divides by the default configuration of the
same inputs in the same run.
"""

import os
import statistics

from benchmarks._subprocess import run_config, time_runs
from benchmarks.common import conditions_line, method_line

MODULE = "benchmarks.encoder_paths"
SHAPE = dict(vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=384, intermediate_dim=1536,
             max_sequence_length=512)
# (inputs, label, task arguments, backbone arguments); the first of each inputs is the default.
CONFIGS = [
    ("qa_hf", "`rules=\"hf_pipeline\"`: default (real tokens; rows > 128 one at a time, packed)",
     {"rules": "hf_pipeline"}, {}),
    ("qa_hf", "`rules=\"hf_pipeline\"`: real tokens, attention in one batched call in the padded layout",
     {"rules": "hf_pipeline"}, {"per_sequence_above": 512}),
    ("qa_hf", "`rules=\"hf_pipeline\"`: every position (`skip_padding=\"never\"`)",
     {"rules": "hf_pipeline"}, {"skip_padding": "never"}),
    ("classification", "default (real tokens in `fit` and `predict`; rows <= 128 attend in one batched call)", {}, {}),
    ("classification", "attention one sequence at a time at every length (`per_sequence_above=0`)", {},
     {"per_sequence_above": 0}),
    ("classification", "every position (`skip_padding=\"never\"`)", {}, {"skip_padding": "never"}),
]


def _inputs(kind, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    if kind.startswith("qa"):
        n, width = 64, 384
        lengths = np.where(rng.random(n) < 0.6, width, rng.integers(150, width + 1, n))
    else:
        n = 256
        lengths = np.clip(rng.normal(27, 10, n).astype(int), 5, 64)
        width = 64
    ids = rng.integers(1000, 30000, (n, width)).astype("int32")
    mask = (np.arange(width)[None] < lengths[:, None]).astype("int32")
    order = np.argsort(lengths, kind="stable")
    batches = []
    for i in range(0, n, 32):
        rows = order[i:i + 32]
        cut = int(lengths[rows].max())  # each batch padded to its longest row
        padding_mask = mask[rows, :cut]
        batches.append({"token_ids": ids[rows, :cut] * padding_mask, "segment_ids": np.zeros_like(padding_mask),
                        "padding_mask": padding_mask})
    return batches, n


def measure(index, runs=3):
    """Worker: rows/s of configuration `index` of `CONFIGS`."""
    import keras

    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    kind, _, task_args, backbone_args = CONFIGS[index]
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(**SHAPE, dtype="float32", **backbone_args)
    if kind.startswith("qa"):
        task = BertSpanExtractor(backbone, **task_args)
    else:
        task = BertClassifier(backbone, num_classes=2, **task_args)
    batches, n = _inputs(kind)

    def one_pass():
        for batch in batches:
            task.predict_on_batch(batch)

    times = time_runs(one_pass, warmup=1, runs=runs)
    return {"rows_per_s": n / statistics.median(times), "skip_padding": backbone.skip_padding,
            "per_sequence_above": backbone.per_sequence_above}


def run(args=None):
    load_before = os.getloadavg()
    order = list(range(len(CONFIGS)))
    rates = {i: [] for i in order}
    built = {}
    for round_ in (order, order[::-1], order):
        for i in round_:
            result = run_config(MODULE, "measure", {"index": i})
            if "error" in result:
                raise RuntimeError(f"encoder_paths configuration {i}: {result['error']}")
            rates[i].append(result["rows_per_s"])
            built[i] = (result["skip_padding"], result["per_sequence_above"])
    load_after = os.getloadavg()
    default = {}
    names = {"qa": "QA windows of 384 (MiniLM shape)", "qa_hf": "QA windows of 384 (MiniLM shape)",
             "classification": "classification rows, ~27 pieces (MiniLM shape)"}
    lines = ["## The encoder's paths: each against the default a `Task` builds on a CPU",
             "",
             "| inputs | configuration | built as (`skip_padding`, `per_sequence_above`) | rows/s | vs default |",
             "|---|---|---|---|---|"]
    for i, (kind, label, _, _) in enumerate(CONFIGS):
        rate = statistics.median(rates[i])
        default.setdefault(kind, rate)
        lines.append(f"| {names[kind]} | {label} | {built[i]} | {rate:.1f} | {rate / default[kind]:.2f}× |")
    lines += ["", conditions_line(load_before, load_after, "float32."), "", method_line(__doc__), "",
              "The model and inputs: " + __doc__.split("Model: ")[1].split("\n\n")[0].replace("\n", " ")]
    return "\n".join(lines)

