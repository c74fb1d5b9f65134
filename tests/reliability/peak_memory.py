"""`python tests/reliability/peak_memory.py TOOL ARGS...`: runs tools/TOOL.py's main as the tool does,
then prints this process's peak resident memory ("peak RSS N MB"): what a test bounds."""

import os
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

if __name__ == "__main__":
    import importlib

    from tools._startup import run_main

    name = sys.argv.pop(1)
    run_main(importlib.import_module(f"tools.{name}").main, prog=f"{name}.py")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024} MB", flush=True)
