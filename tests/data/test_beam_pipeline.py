"""The Apache Beam writer equals the local writer byte for byte, on real news text.

The corpus is gensim's `lee_background.cor` (300 real news articles, shipped in the gensim
wheel that the `demo` extra installs), split into 3 shards of documents. The Beam pipeline
runs on the DirectRunner in process and with 2 worker processes; every output shard and the
merged report's counts must equal `write_pretraining_tfrecords`'s.
"""

import json
import os

import pytest

beam = pytest.importorskip("apache_beam", reason="pip install 'keras-bert-zoo[beam]' (apache-beam)")
gensim = pytest.importorskip("gensim", reason="pip install gensim (the demo extra)")

from keras_bert_zoo.data.beam_pipeline import write_pretraining_tfrecords_beam  # noqa: E402
from keras_bert_zoo.data.documents import write_documents  # noqa: E402
from keras_bert_zoo.data.pretraining_writer import write_pretraining_tfrecords  # noqa: E402
from keras_bert_zoo.text.vocabulary import learn_vocabulary  # noqa: E402

OPTIONS = dict(max_seq_length=64, max_predictions_per_seq=10, random_seed=7, dupe_factor=2, window_size=32)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("beam")
    source = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", "lee_background.cor")
    with open(source, encoding="latin-1") as f:
        articles = [line.strip() for line in f if line.strip()]
    paths = []
    for shard in range(3):
        path = str(root / f"news-{shard}.txt")
        write_documents(articles[shard::3], path)
        paths.append(path)
    vocab = learn_vocabulary(paths, 2000, min_count=2)
    vocab_path = str(root / "vocab.txt")
    with open(vocab_path, "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    spec = {"vocabulary": vocab_path, "lowercase": True}
    local = write_pretraining_tfrecords(paths, str(root / "local" / "out"), spec, **OPTIONS)
    return root, paths, spec, local


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _check_equal(local, beam_report, beam_outputs):
    assert len(beam_outputs) == len(local["outputs"]) == 3
    for ours, theirs in zip(local["outputs"], beam_outputs):
        assert _read(ours) == _read(theirs), f"{theirs} differs from the local writer's {ours}"
    assert beam_report["counts"] == local["counts"]
    assert beam_report["length_histogram"] == local["length_histogram"]
    assert local["counts"]["instances"] > 500  # real work was compared, not empty files


# In process (in_memory) is the CLI test below, byte-compared in `make test`; here two worker
# processes (pickling across processes; ~45 s of the suite): `make test-heavy`.
@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["multi_processing"])
def test_beam_direct_runner_is_byte_identical_to_the_local_writer(corpus, mode):
    root, paths, spec, local = corpus
    args = [f"--direct_running_mode={mode}"]
    if mode == "multi_processing":
        args.append("--direct_num_workers=2")
    prefix = str(root / mode / "out")
    report = write_pretraining_tfrecords_beam(paths, prefix, spec, runner="DirectRunner", pipeline_args=args,
                                              **OPTIONS)
    outputs = [f"{prefix}-{i:05d}-of-00003" for i in range(3)]
    _check_equal(local, report, outputs)
    with open(prefix + ".report.json", encoding="utf-8") as f:
        assert json.load(f)["counts"] == local["counts"]


def test_beam_refuses_bad_arguments(corpus):
    root, paths, spec, _ = corpus
    with pytest.raises(ValueError, match="runner"):
        write_pretraining_tfrecords_beam(paths, str(root / "x"), spec, runner="Direct")
    with pytest.raises(ValueError, match="JSON spec"):
        write_pretraining_tfrecords_beam(paths, str(root / "x"), object())
    with pytest.raises(ValueError, match="dupe_factor"):
        write_pretraining_tfrecords_beam(paths, str(root / "x"), spec, dupe_factor=0)


def test_beam_cli_runner_flag_passes_beam_options_through(corpus):
    import subprocess
    import sys

    root, paths, spec, local = corpus
    tool = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "create_pretraining_data.py")
    prefix = str(root / "cli" / "out")
    flags = ["--input_file", ",".join(paths), "--output_file", prefix, "--vocab_file", spec["vocabulary"],
             "--max_seq_length", "64", "--max_predictions_per_seq", "10", "--random_seed", "7", "--dupe_factor", "2",
             "--window_size", "32", "--runner", "DirectRunner", "--direct_running_mode=in_memory"]
    proc = subprocess.run([sys.executable, tool, *flags], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    outputs = [f"{prefix}-{i:05d}-of-00003" for i in range(3)]
    with open(prefix + ".report.json", encoding="utf-8") as f:
        _check_equal(local, json.load(f), outputs)
    # A Beam option without --runner is a typo, not silently ignored.
    bad = subprocess.run([sys.executable, tool, *flags[:-3], "--direct_num_workers=2"], capture_output=True,
                         text=True, timeout=60)
    assert bad.returncode == 2 and "need --runner" in bad.stderr
