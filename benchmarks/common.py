"""What several benchmark sections share: the CPU line of each section's "Conditions" and "Method"."""

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
