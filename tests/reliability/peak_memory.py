"""`python tests/reliability/peak_memory.py TOOL ARGS...`: runs tools/TOOL.py's main as the tool does,
then prints this process's peak resident memory ("peak RSS N MB"): what a test bounds.

The peak is /proc/self/status's VmHWM, the high-water mark of this process's own memory: Linux
carries the forking parent's peak into a child's `ru_maxrss` across exec, so under pytest-xdist
`ru_maxrss` read the worker's peak (every test it ran before), not the tool's."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

if __name__ == "__main__":
    import importlib

    from tools._startup import run_main

    name = sys.argv.pop(1)
    run_main(importlib.import_module(f"tools.{name}").main, prog=f"{name}.py")
    with open("/proc/self/status", encoding="ascii") as status:
        peak_kb = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    print(f"peak RSS {peak_kb // 1024} MB", flush=True)
