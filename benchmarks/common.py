"""What several benchmark sections share: the CPU line of each section's "Conditions", the switch of
the training lever."""

import os
import pathlib


def cpu_description():
    """The CPU's model name and its AVX-512 kinds (what decides our bf16 and int8 paths), one line."""
    try:
        info = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        return "CPU unknown"
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), [])
    kinds = [f for f in ("avx512f", "avx512_bf16", "avx512_vnni") if f in flags]
    return f"{model} ({', '.join(kinds) or 'no AVX-512'})"


def conditions_line(load_before, load_after, note):
    """A section's "Conditions:" line: the CPU, the load average at its start and end, the cores, `note`."""
    return (f"Conditions: {cpu_description()}; load average {' '.join(f'{v:.1f}' for v in load_before)} at the start, "
            f"{' '.join(f'{v:.1f}' for v in load_after)} at the end, on {os.cpu_count()} cores shared with other "
            f"jobs; {note}")


def method_line(doc):
    """A section's "Method:" line: the paragraph of its module docstring that starts "Measured: "."""
    return f"Method: {doc.split('Measured: ')[1].split(chr(10) + chr(10))[0].strip()}"


def set_lean_training(enabled):
    """Training attention that recomputes its probabilities and the GELU that keeps only its input
    (the defaults), or autodiff through both (`enabled=False`: what training kept before); for the
    whole worker process, before its model is traced."""
    from keras_bert_zoo.layers.bert_attention import BertAttention  # lazy: workers only (start-up time)
    from keras_bert_zoo.layers.transformer_encoder import TransformerEncoder  # lazy: workers only (start-up time)

    BertAttention.recompute_in_training = TransformerEncoder.lean_gelu_in_training = bool(enabled)


def set_scatter_real_tokens(enabled):
    """Puts the real tokens back into the padded layout by `ops.scatter` (TensorFlow's `ScatterNd`,
    before `layers/real_tokens.py`) instead of by gathers; for the whole worker process, before its
    model is traced. The gradients are autodiff's (a gather's `IndexedSlices`, a scatter's gather)."""
    if not enabled:
        return
    from keras import ops  # lazy: workers only (start-up time)

    from keras_bert_zoo.layers import real_tokens  # lazy: workers only (start-up time)

    def positions(padding_mask):
        flat = ops.reshape(padding_mask, (-1,))
        return ops.nonzero(flat > 0)[0], ops.shape(flat)[0]

    real_tokens.positions = positions
    real_tokens.pack = lambda rows, real, cells: ops.take(rows, real, axis=0)
    real_tokens.unpack = lambda tokens, real, cells: ops.scatter(
        real[:, None], tokens, (cells, ops.shape(tokens)[-1]))
