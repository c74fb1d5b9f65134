"""GLUE and SWAG readers on fixture files in the distributed layouts."""

import logging

import numpy as np
import pytest

from keras_bert_zoo.data.glue import GLUE_TASKS, glue_labels, read_glue, write_glue_submission
from keras_bert_zoo.data.swag import read_swag
from tests.data import glue_fixtures
from tests.data.glue_fixtures import GLUE


def test_every_task_and_split_reads_its_columns_and_labels(tmp_path):
    # One test over all 19 files: the autouse Keras reset costs more than reading them.
    for task in GLUE_TASKS:
        for split, (_, expected_x, expected_y) in GLUE[task].items():
            x, y = read_glue(task, glue_fixtures.write(tmp_path, task, split))
            if isinstance(expected_x, tuple):
                assert isinstance(x, tuple) and [list(c) for c in x] == [list(c) for c in expected_x], task
            else:
                assert x == expected_x, task
            if expected_y is None:
                assert y is None, (task, split)
            else:
                assert y.dtype == ("float32" if task == "stsb" else "int32"), task
                np.testing.assert_allclose(y, expected_y, err_msg=f"{task} {split}")


def test_label_ids_follow_the_original_processors():
    assert glue_labels("mnli") == ["contradiction", "entailment", "neutral"]
    assert glue_labels("rte") == ["entailment", "not_entailment"]
    assert glue_labels("cola") == ["unacceptable", "acceptable"]
    assert glue_labels("stsb") is None


def test_test_file_ids_come_from_its_index_column(tmp_path):
    path = glue_fixtures.write(tmp_path, "qqp", "test", "id\tquestion1\tquestion2\n7\ta?\tb?\n3\tc?\td?\n")
    x, y, ids = read_glue("qqp", path, with_ids=True)
    assert ids == ["7", "3"] and x == (["a?", "c?"], ["b?", "d?"]) and y is None


@pytest.mark.parametrize(
    "task,text,message",
    [
        ("sst2", "sentence\tlabel\ngood\t1\nbad\t0\textra\n", r"sst2_train.tsv, line 3: 3 columns"),
        ("cola", "gj04\t1\t\tfine.\ngj04\t1\tbroken\n", r"cola_train.tsv, line 2: 3 columns"),
        ("rte", "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tneutral\n",
         r"line 2, column 4 \('label'\): label 'neutral' is not one of \['entailment', 'not_entailment'\]"),
        ("stsb", "index\tsentence1\tsentence2\tscore\n0\ta\tb\t5.5\n", r"line 2, column 4 \('score'\)"),
        ("mrpc", "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\t \tb\n",
         r"line 2, column 4 \('#1 String'\): empty sentence"),
        ("qnli", "index\tsentence1\tsentence2\tlabel\n", r"lacks the column\(s\) \['question', 'sentence'\]"),
    ],
)
def test_malformed_rows_raise_naming_file_line_and_column(tmp_path, task, text, message):
    with pytest.raises(ValueError, match=message):
        read_glue(task, glue_fixtures.write(tmp_path, task, "train", text))


def test_skipped_rows_are_counted_in_the_log(tmp_path, caplog):
    text = "sentence\tlabel\ngood\t1\nbad\t2\n\t0\nfine\t0\n"
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.data"):
        x, y = read_glue("sst2", glue_fixtures.write(tmp_path, "sst2", "train", text), errors="skip")
    assert x == ["good", "fine"] and y.tolist() == [1, 0]
    assert "skipped 2 malformed row(s) of 4" in caplog.text and "line 3" in caplog.text


def test_snli_rows_without_a_gold_label_are_dropped_keeping_the_others_ids(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.data"):
        x, y, ids = read_glue("snli", glue_fixtures.write(tmp_path, "snli", "train"), with_ids=True)
    assert x[1] == ["A person is training his horse for a competition.",
                    "A person is at a diner, ordering an omelette.", "A person is outdoors, on a horse."]
    assert y.tolist() == [2, 0, 1] and ids == ["0", "1", "3"]  # neutral, contradiction, entailment: MNLI's ids
    assert "dropped 1 row(s) without a gold label (-), first at lines 4" in caplog.text
    assert glue_labels("snli") == glue_labels("mnli")


def test_unknown_task_and_missing_file_are_refused(tmp_path):
    with pytest.raises(ValueError, match="task='sst'"):
        read_glue("sst", "x.tsv")
    with pytest.raises(ValueError, match="Cannot read GLUE file"):
        read_glue("sst2", str(tmp_path / "missing.tsv"))


def test_submission_files_use_glue_names_and_label_tokens(tmp_path):
    path = write_glue_submission("mnli", str(tmp_path), ["0", "1"], np.array([[0.1, 0.2, 3.0], [5.0, 0, 0]]))
    assert path.endswith("MNLI-m.tsv")
    assert open(path).read() == "index\tprediction\n0\tneutral\n1\tcontradiction\n"
    path = write_glue_submission("stsb", str(tmp_path), ["0", "1", "2"], np.array([[5.7], [-0.2], [2.5]]))
    assert open(path).read() == "index\tprediction\n0\t5.000\n1\t0.000\n2\t2.500\n"
    path = write_glue_submission("cola", str(tmp_path / "c.tsv"), ["4"], [1])
    assert open(path).read() == "index\tprediction\n4\t1\n"


def test_swag_reads_contexts_endings_and_labels(tmp_path):
    (contexts, endings), y = read_swag(glue_fixtures.write(tmp_path, "swag", "train"))
    assert contexts == [
        "Members of the procession walk down the street holding small horn brass instruments.",
        "He rides a bike, then jumps.",
    ]
    assert endings[0][0] == "A drum line passes by walking down the street playing their instruments."
    assert endings[1] == ["Someone looks at him, grinning.", "Someone walks away.", "Someone smiles.",
                          'Someone leans in, "ok".']
    assert y.dtype == "int32" and y.tolist() == [0, 3]


def test_swag_test_file_and_malformed_rows(tmp_path):
    header = "sent1,sent2,ending0,ending1,ending2,ending3"
    (contexts, endings), y = read_swag(glue_fixtures.write(tmp_path, "swag", "test", f"{header}\na,b,c,d,e,f\n"))
    assert y is None and endings == [["b c", "b d", "b e", "b f"]]
    bad = glue_fixtures.write(tmp_path, "swag", "bad", f"{header},label\n\"x\ny\",b,c,d,e,f,0\na,b,c,d,e,f,4\n")
    with pytest.raises(ValueError, match=r"swag_bad.csv, line 4, column 7 \('label'\): label '4' is not one of \['0', '1', '2', '3'\]"):
        read_swag(bad)
