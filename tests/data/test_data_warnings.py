"""R32: `create_pretraining_data` on data a user would not want to train on (issue 21).

An empty file, a binary file, a single sentence -> the report lists warnings (0 instances /
[UNK] and invalid UTF-8 / same-document pairs and single-sentence documents), the CLI prints
them on stderr, and `--strict` exits with status 1; a usable corpus gives no warning.
The counts below are what the pipeline reported for those inputs (vocabulary of
tests/data/pretraining_corpus.py, sequence length 32).
"""

import json

import numpy as np
import pytest

from keras_bert_zoo.data.pretraining_report import empty_totals, format_report, summarize

OPTIONS = {"masked_lm_prob": 0.15}
MEASURED = {
    "empty": {},
    "binary": dict(documents=1, segments=81, long_segments=49, tokens=4317, unknown_tokens=4130, instances=67,
                   random_next=56, same_document_fallbacks=56, single_segment_chunks=41, truncated=67,
                   invalid_utf8_lines=81, masked=335),
    "one_sentence": dict(documents=1, single_segment_documents=1, segments=1, tokens=8, instances=1, random_next=1,
                         same_document_fallbacks=1, single_segment_chunks=1, masked=3),
    "usable": dict(documents=53, single_segment_documents=2, segments=600, tokens=7595, unknown_tokens=40,
                   short_target_documents=3, instances=327, random_next=207, single_segment_chunks=54,
                   truncated=282, masked=1601),
}


def _report(name, empty_files=()):
    totals = empty_totals(32)
    totals.update(MEASURED[name])
    totals["length_histogram"] = np.bincount([31] * totals["instances"], minlength=33)
    return summarize(totals, OPTIONS, files=[f"{name}.txt"], empty_files=list(empty_files))


def test_r32_report_warns_past_each_threshold():
    empty = _report("empty", empty_files=["empty.txt"])["warnings"]
    assert len(empty) == 2
    assert empty[0].startswith("no training instance was generated")
    assert empty[1] == "1 input file(s) are empty: empty.txt."

    binary = _report("binary")["warnings"]
    assert [w.split(" (")[0] for w in binary] == [
        "[UNK] is 95.7% of the tokens", "81 lines held invalid UTF-8",
        "100.0% of the 'random next' segments came from the same document"]

    one = _report("one_sentence")
    assert [w.split(" (")[0] for w in one["warnings"]] == [
        "100.0% of the 'random next' segments came from the same document",
        "100.0% of the documents have a single sentence"]
    assert "WARNING: 100.0% of the documents have a single sentence" in format_report(one)

    assert _report("usable")["warnings"] == []  # 0.5% [UNK], no same-document pair, 4% single-sentence


@pytest.mark.filterwarnings("ignore")
def test_r32_cli_prints_the_warnings_and_strict_exits_1(tmp_path, capsys):
    from tools import create_pretraining_data as cli

    (tmp_path / "one.txt").write_text("the cat walked on the road.\n")
    (tmp_path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "walk",
                                                   "##ed", "on", "road", "."]) + "\n")
    out = str(tmp_path / "out.tfrecord")
    with pytest.raises(SystemExit, match="--strict: the report has 2 warning"):
        cli.main(["--input_file", str(tmp_path / "one.txt"), "--output_file", out, "--vocab_file",
                  str(tmp_path / "vocab.txt"), "--max_seq_length", "16", "--max_predictions_per_seq", "2",
                  "--dupe_factor", "1", "--no_progress", "--strict"])
    err = capsys.readouterr().err
    assert "warning: 100.0% of the 'random next' segments came from the same document" in err
    assert "warning: 100.0% of the documents have a single sentence" in err
    # The outputs are written either way; the report records the warnings.
    assert len(json.load(open(out + ".report.json"))["warnings"]) == 2
