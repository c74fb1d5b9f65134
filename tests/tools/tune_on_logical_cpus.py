"""`tools/tune.py` in a process whose CPU is split into logical devices (for `--strategy mirrored`).

    python tune_on_logical_cpus.py N TUNE_FLAGS...

Logical devices must be configured before TensorFlow initialises its devices, hence a
process of its own. Prints `RESULT <json>` (the search's `results.json` fields) at the end.
"""

import json
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import tensorflow as tf  # noqa: E402


def main(count, argv):
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    from tools import tune

    result = tune.main(argv)
    print("RESULT " + json.dumps({"best": result["best"], "objective": result["objective"],
                                  "devices": len(tf.config.list_logical_devices("CPU"))}), flush=True)


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2:])
