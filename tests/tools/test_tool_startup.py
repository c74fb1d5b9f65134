"""R33, R34: tool start-up (issue 21, "--help takes ~11 s" and "every run prints error-level CUDA lines").

R33: `--help` of create_pretraining_data / learn_vocab / prepare_wikipedia / benchmark -> usage
printed without importing TensorFlow (was ~11 s: TensorFlow imported before argparse).
R34: a normal run with TF_CPP_MIN_LOG_LEVEL=2 on a CPU-only machine -> no TensorFlow log line,
absl banner or CUDA error on stderr (was: the absl banner and two INFO lines, each twice, and
an E-level cuInit line).
"""

import os
import re
import subprocess
import sys

import pytest

from tools._startup import startup_noise_filter

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = ["tools/create_pretraining_data.py", "tools/learn_vocab.py", "tools/prepare_wikipedia.py",
         "benchmarks/benchmark.py"]
# What TensorFlow 2.21 printed at the start of every run (CPU-only machine, level 2).
NOISE = """\
WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
I0000 00:00:1796046807.559036    9814 port.cc:153] oneDNN custom operations are on. You may see slightly different numerical results.
I0000 00:00:1796046807.559330    9814 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.
E0000 00:00:1796046840.579203   10408 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)
"""
ALARMING = re.compile(r"^[IWEF]\d{4} |absl::InitializeLog|cuInit|NodeDef|Traceback")


def _env():
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")


@pytest.mark.parametrize("tool", TOOLS)
def test_r33_help_does_not_import_tensorflow(tool):
    proc = subprocess.run([sys.executable, "-X", "importtime", tool, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("usage:")
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "tensorflow" not in imported and "keras_bert_zoo" not in imported


def test_r34_startup_noise_filter_drops_only_the_known_start_up_lines():
    ours = "Wrote out.tfrecord\nE0000 00:00:1796046840.579203   10408 other.cc:1] a real error\nTraceback (x)\n"
    assert startup_noise_filter(NOISE + ours, gpu_found=False, min_level=2) == ours
    # A machine with a GPU keeps the CUDA error: there it means something.
    kept = startup_noise_filter(NOISE, gpu_found=True, min_level=2)
    assert kept == NOISE.splitlines(keepends=True)[-1] and "cuInit" in kept
    # Level 0 asks for INFO lines: they stay (the absl banner never does).
    assert startup_noise_filter(NOISE, gpu_found=False, min_level=0).count("I0000") == 1


def test_r34_normal_run_has_no_alarming_line_on_stderr(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("".join(f"the cat sat on mat {i % 3} .\na big dog ran home .\nthe red cat .\n\n" for i in range(20)))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
                                "a", "big", "dog", "ran", "home", "red", ".", "0", "1", "2"]) + "\n")
    proc = subprocess.run(
        [sys.executable, "tools/create_pretraining_data.py", "--input_file", str(text), "--output_file",
         str(tmp_path / "out.tfrecord"), "--vocab_file", str(vocab), "--max_seq_length", "16",
         "--max_predictions_per_seq", "3", "--dupe_factor", "1", "--no_progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "instances: " in proc.stdout
    assert [line for line in proc.stderr.splitlines() if ALARMING.search(line)] == []


def test_r34_pretraining_run_has_no_alarming_line_on_stderr(tmp_path):
    """tools/pretrain.py: TensorFlow's runtime wrote two error-level lines in every run (a tf.data
    "NodeDef mentions attribute use_unbounded_threadpool" and a oneDNN int64 notice); they are
    filtered, everything else (progress, a traceback) still reaches stderr."""
    from tests.training.tiny import write_text_corpus

    corpus, vocab = write_text_corpus(tmp_path)
    size = ["--num-layers", "1", "--num-heads", "2", "--hidden-dim", "16", "--intermediate-dim", "32",
            "--max-sequence-length", "16", "--sequence-length", "16", "--max-predictions", "3"]
    args = [sys.executable, "tools/pretrain.py", "--train-files", corpus, "--vocabulary", vocab, *size,
            "--steps", "2", "--warmup-steps", "1", "--batch-size", "4", "--strategy", "cpu", "--no-progress",
            "--checkpoint-dir", str(tmp_path / "ckpt"), "--output-dir", str(tmp_path / "out")]
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Trained to step 2" in proc.stdout
    assert [line for line in proc.stderr.splitlines() if ALARMING.search(line)] == []
    # A failure still shows its error through the filter.
    bad = subprocess.run(args[:3] + [str(tmp_path / "missing.txt")] + args[4:-4] + [
        "--checkpoint-dir", str(tmp_path / "c2"), "--output-dir", str(tmp_path / "o2")],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=_env())
    assert bad.returncode != 0 and "missing.txt" in bad.stderr
