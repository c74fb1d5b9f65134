"""What several benchmark sections share: the CPU line of each section's "Conditions"."""

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
