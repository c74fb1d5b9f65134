"""tools/finetune.py whose file system fills up while it trains: the run trains as usual, then the
file system of FILL_DIR (a real, small one) is filled to its last byte before the model is saved.
Used by test_disk_and_exports.py in a subprocess: what a user meets when another process takes the
disk during a run."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.reliability.conftest import fill  # noqa: E402
from tools import finetune  # noqa: E402
from tools._startup import import_tensorflow, run_main  # noqa: E402

if __name__ == "__main__":
    import_tensorflow()
    from keras_bert_zoo.finetuning import run as finetuning_run

    task_kind = finetuning_run.task_kind

    def filling_kind(*args):
        kind = task_kind(*args)
        fit = kind.fit

        def fit_then_fill(task):
            seconds = fit(task)
            fill(os.environ["FILL_DIR"])
            return seconds

        kind.fit = fit_then_fill
        return kind

    finetuning_run.task_kind = filling_kind
    run_main(finetune.main, prog="finetune.py")
