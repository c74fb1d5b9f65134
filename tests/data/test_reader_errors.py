"""GLUE, SWAG and SQuAD readers on broken files: each fault named at its own place, and
`errors="skip"` / `skip_bad_answers=True` (the CLI's --skip-malformed) dropping and counting
it without renumbering the rows after it."""

import json

import pytest

from keras_bert_zoo.data.glue import read_glue
from keras_bert_zoo.data.squad import read_squad
from keras_bert_zoo.data.swag import read_swag

FIELD_LIMIT = 128 * 1024  # keras_bert_zoo.data.glue.FIELD_LIMIT, csv's default field_size_limit
SWAG_HEADER = b",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _swag_row(index, sent1=b"He sits."):
    return b"%d,v,1,x,%s,He,gold,eats.,runs.,sleeps.,sings.,1\n" % (index, sent1)


def test_glue_bad_utf8_and_long_field_are_named_at_their_own_line(tmp_path):
    # A text-mode file fails at its first buffer, which blamed line 1.
    path = _write(tmp_path, "dev.tsv", b"sentence\tlabel\ngood\t1\nbad \xff\t0\n")
    with pytest.raises(ValueError, match=r"dev.tsv, line 3, character 5 \(byte 5 of the line\): not UTF-8.*"
                                         r"--skip-malformed"):
        read_glue("sst2", path)
    # csv's field size limit raised a bare _csv.Error, without file or line.
    path = _write(tmp_path, "long.tsv", b"sentence\tlabel\ngood\t1\n" + b"x" * (FIELD_LIMIT + 1) + b"\t0\n")
    with pytest.raises(ValueError, match=r"long.tsv, line 3, column 1 \('sentence'\): a field of 131073 "
                                         r"characters, over the 131072-character limit.*--skip-malformed"):
        read_glue("sst2", path)


def test_glue_skip_drops_and_counts_them_and_keeps_the_rows_own_ids(tmp_path):
    text = (b"sentence\tlabel\ngood\t1\nbad \xff\t0\n" + b"x" * (FIELD_LIMIT + 1) + b"\t0\nfine\t0\n")
    skipped = []
    x, y, ids = read_glue("sst2", _write(tmp_path, "dev.tsv", text), errors="skip", with_ids=True, skipped=skipped)
    assert x == ["good", "fine"] and y.tolist() == [1, 0]
    assert ids == ["0", "3"]  # the file's data rows 0 and 3, not renumbered 0, 1
    assert [line for line, _ in skipped] == [3, 4] and "not UTF-8" in skipped[0][1]


def test_swag_bad_utf8_long_field_and_skip_keep_lines_and_ids(tmp_path):
    rows = [_swag_row(0), _swag_row(1, b"He \xff sits."), _swag_row(2, b'"' + b"x" * (FIELD_LIMIT + 1) + b'"'),
            _swag_row(3)]
    path = _write(tmp_path, "val.csv", SWAG_HEADER + b"".join(rows[:2]))
    with pytest.raises(ValueError, match=r"val.csv, line 3, character 12 .*not UTF-8"):
        read_swag(path)
    path = _write(tmp_path, "long.csv", SWAG_HEADER + rows[0] + rows[2])
    with pytest.raises(ValueError, match=r"long.csv, line 3: field larger than field limit .*--skip-malformed"):
        read_swag(path)
    skipped = []
    (contexts, _), y, ids = read_swag(_write(tmp_path, "all.csv", SWAG_HEADER + b"".join(rows)), errors="skip",
                                      with_ids=True, skipped=skipped)
    assert contexts == ["He sits.", "He sits."] and y.tolist() == [1, 1]
    assert ids == ["0", "3"] and [line for line, _ in skipped] == [3, 4]


def test_swag_without_an_index_column_numbers_rows_by_their_place(tmp_path):
    text = b"sent1,sent2,ending0,ending1,ending2,ending3\na,b,c,d,e,f\n,b,c,d,e,f\na,b,c,d,e,f\n"
    _, y, ids = read_swag(_write(tmp_path, "test.csv", text), errors="skip", with_ids=True)
    assert y is None and ids == ["0", "2"]


def test_swag_header_missing_an_ending_is_named_before_training(tmp_path):
    # It read as 3 choices: a misleading "not a choice index" on label 3, or a crash in a reshape later.
    path = _write(tmp_path, "train.csv", b"sent1,sent2,ending0,ending1,ending2,label\na,b,c,d,e,0\n")
    with pytest.raises(ValueError, match=r"train.csv, line 1: the SWAG header lacks the column\(s\) \['ending3'\]"):
        read_swag(path)


CONTEXT = "Ann wrote the story in 1990."


def _squad(tmp_path, qas, paragraph=None):
    paragraph = {"context": CONTEXT, "qas": qas} if paragraph is None else paragraph
    path = tmp_path / "dev.json"
    path.write_text(json.dumps({"version": "1.1", "data": [{"title": "T", "paragraphs": [paragraph]}]}))
    return str(path)


def _qa(qid, **changes):
    return dict({"id": qid, "question": "Who?", "answers": [{"text": "Ann", "answer_start": 0}]}, **changes)


def test_squad_misaligned_answer_names_the_command_line_flag(tmp_path):
    path = _squad(tmp_path, [_qa("q1", answers=[{"text": "Ann", "answer_start": 1}])])
    with pytest.raises(ValueError, match=r"pass --skip-malformed \(skip_bad_answers=True in Python\)"):
        read_squad(path)


@pytest.mark.parametrize("qa,paragraph,message", [
    ({"question": "Who?", "answers": []}, None, r"qas\[1\]: no 'id' key"),
    (_qa("q2", question=None), None, r"qas\[1\] \(question 'q2'\): 'question' is None, where a non-empty string"),
    ({"id": "q2", "answers": []}, None, r"qas\[1\] \(question 'q2'\): no 'question' key"),
    (_qa("q2"), "no context", r"qas\[0\] \(question 'q1'\): its paragraph data\[0\].paragraphs\[0\] has no "
                              r"'context' key"),
])
def test_squad_broken_question_names_file_place_id_and_key(tmp_path, qa, paragraph, message):
    # These were a bare KeyError, or a tensor conversion error for a null question.
    qas = [_qa("q1"), qa]
    path = _squad(tmp_path, qas, None if paragraph is None else {"qas": qas})
    with pytest.raises(ValueError, match=r"dev.json, data\[0\].paragraphs\[0\]." + message + ".*--skip-malformed"):
        read_squad(path)
    data = read_squad(path, skip_bad_answers=True)
    assert len(data) + len(data.dropped) == 2 and "q2" not in data.ids


def test_squad_repeated_question_id_is_refused_or_dropped(tmp_path):
    # It collapsed silently: 14 questions read, 13 predictions written.
    path = _squad(tmp_path, [_qa("q1"), _qa("q2"), _qa("q1", question="Who else?")])
    with pytest.raises(ValueError, match=r"question id 'q1' appears twice, at data\[0\].paragraphs\[0\].qas\[0\] "
                                         r"and at data\[0\].paragraphs\[0\].qas\[2\].*--skip-malformed"):
        read_squad(path)
    data = read_squad(path, skip_bad_answers=True)
    assert data.ids == ["q1", "q2"] and data.questions == ["Who?", "Who?"]
    assert [qid for qid, _ in data.dropped] == ["q1"]
