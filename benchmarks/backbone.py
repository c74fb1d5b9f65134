"""Section `backbone`: BERT-Base speed, ours vs keras-hub vs HF transformers (PyTorch).

Measures sequences/s of inference (batch 32, length 128) and of one training step
(batch 8, length 128, AdamW, loss = mean square of sequence and pooled outputs), in
float32 and mixed bfloat16, with and without XLA (`jit_compile`) for the Keras models.
Every configuration runs in its own process (`benchmarks._subprocess.run_config`),
warm-up excluded; peers run interleaved with ours so their ratios share the host's
conditions. The FLOP rate is compared with a 2048³ matmul measured in the same run.
"""

import importlib.util
import json
import os
import time

from benchmarks._subprocess import run_config, summarize, time_runs
from benchmarks.peak import measure_roof

MODULE = "benchmarks.backbone"
BASE = dict(vocabulary_size=30522, num_layers=12, num_heads=12, hidden_dim=768, intermediate_dim=3072)
SHAPES = {"inference": (32, 128), "training": (8, 128)}
IMPLS = ("ours", "ours_tanh", "keras_hub", "hf")
LABELS = {
    "ours": "keras_bert_zoo",
    "ours_tanh": "keras_bert_zoo, tanh GELU",
    "keras_hub": "keras-hub 0.32",
    "hf": "HF transformers (torch)",
}
# (mode, precision, jit) → implementations, run back to back in this order (alternating who
# goes first). XLA only for ours: PERFORMANCE.md already shows it brings nothing on this CPU
# for keras-hub, and each XLA training build costs minutes on the shared host. The tanh-GELU
# row is ours with keras-hub's activation (keras-hub's BERT uses the tanh approximation;
# ours defaults to the exact erf GELU of the released checkpoints).
PLAN = (
    (("inference", "float32", False), ("ours", "keras_hub", "hf")),
    (("inference", "bfloat16", False), ("ours", "keras_hub", "hf")),
    (("training", "float32", False), ("ours", "keras_hub", "hf")),
    (("training", "bfloat16", False), ("ours", "keras_hub", "hf")),
    (("inference", "float32", True), ("ours",)),
    (("inference", "bfloat16", True), ("ours",)),
    (("training", "float32", True), ("ours",)),
    (("training", "bfloat16", True), ("ours",)),
    (("inference", "bfloat16", False), ("ours_tanh",)),
)
# Optional wall-clock budget (seconds) for the whole section: configurations not started
# within it are listed as skipped instead of measured. Groups are ordered by importance.
BUDGET_ENV = "BENCH_BACKBONE_BUDGET_S"


def forward_gflop(seq=128, num_layers=12, hidden_dim=768, intermediate_dim=3072):
    """GFLOP of one sequence's forward pass: the dense matmuls plus attention (PERFORMANCE.md).

    Base at 128: 21.74 (dense) + 0.60 (scores and context) = 22.35; a training step is 3×.
    """
    dense = 2 * (4 * hidden_dim * hidden_dim + 2 * hidden_dim * intermediate_dim) * seq
    attention = 2 * 2 * seq * seq * hidden_dim
    return num_layers * (dense + attention) / 1e9


def _inputs(batch, seq):
    import numpy as np

    rng = np.random.default_rng(0)
    segment = np.zeros((batch, seq), "int32")
    segment[:, seq // 2:] = 1  # a sentence pair: the second half is segment B
    return {
        "token_ids": rng.integers(1000, BASE["vocabulary_size"], (batch, seq), dtype="int32"),
        "segment_ids": segment,
        "padding_mask": np.ones((batch, seq), "int32"),  # full length: no padding
    }


def _keras_backbone(impl, precision):
    policy = "mixed_bfloat16" if precision == "bfloat16" else "float32"
    if impl in ("ours", "ours_tanh"):
        import keras_bert_zoo

        activation = "gelu_approximate" if impl == "ours_tanh" else "gelu"
        return keras_bert_zoo.BertBackbone.from_preset(
            "bert_base_en_uncased", load_weights=False, dtype=policy, activation=activation
        )
    import keras_hub

    return keras_hub.models.BertBackbone(**BASE, max_sequence_length=512, num_segments=2, dtype=policy)


def _keras_step(impl, mode, precision, jit, batch, seq):
    import keras
    import tensorflow as tf

    model = _keras_backbone(impl, precision)
    x = {k: tf.constant(v) for k, v in _inputs(batch, seq).items()}
    if mode == "inference":

        @tf.function(jit_compile=jit)
        def infer(inputs):
            out = model(inputs, training=False)
            return out["sequence_output"], out["pooled_output"]

        return lambda: infer(x)[1].numpy()
    optimizer = keras.optimizers.AdamW(learning_rate=1e-5, weight_decay=0.01)
    variables = model.trainable_variables
    optimizer.build(variables)

    @tf.function(jit_compile=jit)
    def train(inputs):
        with tf.GradientTape() as tape:
            out = model(inputs, training=True)
            loss = tf.reduce_mean(tf.square(tf.cast(out["sequence_output"], "float32")))
            loss += tf.reduce_mean(tf.square(tf.cast(out["pooled_output"], "float32")))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return lambda: train(x).numpy()


def _torch_step(mode, precision, batch, seq):
    import torch
    from transformers import BertConfig, BertModel

    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = BertModel(BertConfig(**{"vocab_size": BASE["vocabulary_size"]}))
    x = {k: torch.from_numpy(v).long() for k, v in _inputs(batch, seq).items()}
    args = dict(input_ids=x["token_ids"], token_type_ids=x["segment_ids"], attention_mask=x["padding_mask"])
    autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16")  # noqa: E731
    if mode == "inference":
        model.eval()

        def infer():
            with torch.inference_mode(), autocast():
                return model(**args).pooler_output.float().sum().item()

        return infer
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.01)

    def train():
        with autocast():
            out = model(**args)
            loss = out.last_hidden_state.float().pow(2).mean() + out.pooler_output.float().pow(2).mean()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.item()

    return train


def measure(impl, mode, precision, jit=False, warmup=1, runs=3, max_runs=5, budget_s=60.0):
    """Worker (run in a subprocess): sequences/s of one configuration.

    Args:
        impl: str. `"ours"`, `"keras_hub"` or `"hf"`.
        mode: str. `"inference"` (batch 32) or `"training"` (batch 8), length 128.
        precision: str. `"float32"` or `"bfloat16"` (Keras `mixed_bfloat16`, torch autocast).
        jit: bool. XLA (`tf.function(jit_compile=True)`); Keras models only.
        warmup: int. Untimed calls first (the first one builds the graph). Defaults to 1.
        runs: int. Timed calls always made. Defaults to 3.
        max_runs: int. More timed calls are made, up to this many, while the timed
            calls so far took less than `budget_s` seconds. Defaults to 5.

    Returns:
        dict from `summarize` (`rate` = median sequences/s, `spread`, ...) plus `warmup_s`.
    """
    if impl not in IMPLS or mode not in SHAPES or precision not in ("float32", "bfloat16"):
        raise ValueError(f"Unknown configuration. Received: impl={impl!r}, mode={mode!r}, precision={precision!r}.")
    batch, seq = SHAPES[mode]
    step = _torch_step(mode, precision, batch, seq) if impl == "hf" else _keras_step(impl, mode, precision, jit, batch, seq)
    start = time.perf_counter()
    time_runs(step, 0, warmup)
    warmup_s = time.perf_counter() - start
    times = time_runs(step, 0, runs)
    while len(times) < max_runs and sum(times) < budget_s:
        times += time_runs(step, 0, 1)
    result = summarize(times, items_per_call=batch)
    result["warmup_s"] = warmup_s
    return result


def _available(impl):
    if impl == "keras_hub":
        return importlib.util.find_spec("keras_hub") is not None
    if impl == "hf":
        return all(importlib.util.find_spec(m) is not None for m in ("torch", "transformers"))
    return True


def _plan():
    """Groups of configurations; each group runs its implementations back to back."""
    groups = []
    for (mode, precision, jit), impls in PLAN:
        impls = [i for i in impls if _available(i)]
        if len(groups) % 2:
            impls.reverse()  # alternate who goes first, so drift favours nobody
        groups.append([(impl, mode, precision, jit) for impl in impls])
    return groups


def _fmt_ratio(value, other):
    if not value or not other or "rate" not in value or "rate" not in other:
        return "–"
    return f"{value['rate'] / other['rate']:.2f}×"


def _rows(results, roof):
    rows = []
    for (impl, mode, precision, jit), res in results.items():
        name = f"{LABELS[impl]} | {mode} | {precision}{' (autocast)' if impl == 'hf' and precision == 'bfloat16' else ''} | {'XLA' if jit else '–'}"
        if "rate" not in res:
            error = res.get("error", "?")
            rows.append(f"| {name} | {error[:80] if error.startswith('skipped') else 'failed: ' + error[:80]} | | | | |")
            continue
        flop = forward_gflop() * (3 if mode == "training" else 1)
        peak = roof.get(precision, {}).get("gflops")
        frac = f"{100 * res['rate'] * flop / peak:.0f}%" if peak else "–"
        kh = results.get(("keras_hub", mode, precision, jit))
        hf = results.get(("hf", mode, precision, False))
        rows.append(
            f"| {name} | {res['rate']:.2f} | {100 * res['spread']:.0f}% | "
            f"{_fmt_ratio(res, kh)} | {_fmt_ratio(res, hf)} | {frac} |"
        )
    return rows


def _verdict(results):
    lines = []
    for mode in SHAPES:
        for precision in ("float32", "bfloat16"):
            ours, kh = results.get(("ours", mode, precision, False)), results.get(("keras_hub", mode, precision, False))
            ratio = _fmt_ratio(ours, kh)
            if ratio != "–":
                ok = ours["rate"] / kh["rate"] >= 0.95
                lines.append(f"{mode} {precision}: {ratio} ({'meets' if ok else 'below'} the 0.95× bar)")
    return "; ".join(lines) or "no keras-hub result to compare with"


def run(args):
    """Runs the section and returns its Markdown (see module docstring)."""
    quick = bool(getattr(args, "quick", False))
    settings = dict(warmup=1, runs=2, max_runs=2) if quick else dict(warmup=1, runs=3, max_runs=5)
    load_before = os.getloadavg()[0]
    roof_before = measure_roof(quick=quick)
    results = {}
    budget = float(os.environ.get(BUDGET_ENV, "inf"))
    start = time.perf_counter()
    for group in _plan():
        for impl, mode, precision, jit in group:
            if time.perf_counter() - start > budget:
                results[(impl, mode, precision, jit)] = {"error": f"skipped: {BUDGET_ENV}={budget:.0f} s spent"}
                continue
            kwargs = dict(impl=impl, mode=mode, precision=precision, jit=jit, **settings)
            results[(impl, mode, precision, jit)] = run_config(MODULE, "measure", kwargs, timeout=1800)
            print(f"  {impl} {mode} {precision} jit={jit}: {json.dumps(results[(impl, mode, precision, jit)])}", flush=True)
    roof_after = measure_roof(quick=quick)
    load = f"host load average (1 min) {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on 2 cores"
    roof = {}
    for dtype in ("float32", "bfloat16"):
        values = [r[dtype]["gflops"] for r in (roof_before, roof_after) if "gflops" in r[dtype]]
        if values:
            roof[dtype] = {"gflops": max(values), "all": values}
    missing = [LABELS[i] for i in IMPLS if not _available(i)]
    return "\n".join(
        [
            "## Backbone: BERT-Base (L12 H768 A12), random weights",
            "",
            "| implementation | mode | precision | XLA | median seq/s | spread | ÷ keras-hub | ÷ HF | % of matmul roof |",
            "|---|---|---|---|---|---|---|---|---|",
            *_rows(results, roof),
            "",
            "Matmul roof (2048³ through TF, GFLOP/s, before / after the section): "
            + ", ".join(f"{d} {' / '.join(f'{v:.0f}' for v in r['all'])}" for d, r in roof.items())
            + f". The larger value is the roof used above. Conditions: {load}.",
            "",
            f"**Bar (ours ≥ 0.95× keras-hub, same run, no XLA):** {_verdict(results)}.",
            "",
            "Method: inference = batch 32 × length 128, `training=False`, in a `tf.function` "
            "(`jit_compile` as the XLA column says); training = one step at batch 8 × 128: "
            "forward with dropout 0.1, loss = mean square of sequence and pooled outputs, gradients, "
            "AdamW (`keras.optimizers.AdamW` / `torch.optim.AdamW`). Inputs are full length (no padding). "
            "Each row is its own process: "
            f"{settings['warmup']} warm-up call (graph building) excluded, then {settings['runs']} to "
            f"{settings['max_runs']} timed calls (more while they took < 60 s in all); "
            "median and spread = (max − min) / median. Peers run interleaved with ours (the first in each group "
            "alternates). HF: `BertModel(BertConfig())`, `torch.set_num_threads(2)`, bf16 through "
            "`torch.autocast`. FLOPs: forward 22.35 GFLOP per sequence (dense 21.74 + attention 0.60), "
            "training 3× forward; % of roof uses the fp32 roof for float32 rows and the bf16 roof for bfloat16 rows.",
            "",
            "What limits us: the dense matmuls are ~97% of the FLOPs, so throughput is bounded by the "
            "oneDNN matmul roof; the rest is memory-bound work (GELU, LayerNorm, softmax, dropout, "
            "casts, head transposes) on 2 cores shared with other jobs, which is why even the best row stays "
            "well under the roof. Noise: the host is shared; compare ratios within this table, not across runs."
            + (f" Not installed, so not measured: {', '.join(missing)}." if missing else ""),
        ]
    )
