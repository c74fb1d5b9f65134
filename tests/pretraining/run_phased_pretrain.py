"""Subprocess entry point for the two-phase kill/resume test: `tools/pretrain.py` with a kill.

    python tests/pretraining/run_phased_pretrain.py --kill-in-phase2-after K -- <pretrain.py args>

SIGKILLs the process right after phase-2 step K (phase-local, before any save of a
later step), once: a marker file next to the checkpoint directory makes the re-run
(the same command) go through.
"""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _install_kill(after_step, marker):
    from keras_bert_zoo.training.callbacks import StepCheckpointer

    original = StepCheckpointer.on_train_batch_end

    def on_train_batch_end(self, batch, logs=None):
        original(self, batch, logs)
        in_phase2 = os.path.basename(self.checkpoint.directory.rstrip("/")) == "phase2"
        if in_phase2 and int(self.checkpoint.step.numpy()) == after_step and not os.path.exists(marker):
            open(marker, "w").close()
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    StepCheckpointer.on_train_batch_end = on_train_batch_end


def main():
    argv = sys.argv[1:]
    split = argv.index("--")
    own, rest = argv[:split], argv[split + 1:]
    if own and own[0] == "--kill-in-phase2-after":
        directory = rest[rest.index("--checkpoint-dir") + 1]
        _install_kill(int(own[1]), directory.rstrip("/") + ".killed")
    from tools import pretrain

    result = pretrain.main(rest)
    print("done", result["step"], result["resumed_from"], flush=True)


if __name__ == "__main__":
    main()
