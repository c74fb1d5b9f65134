"""Raw documents: grouping, streaming input, bad input, sentence splitting."""

import pytest

from keras_bert_zoo.data.documents import documents_dataset, resolve_files, split_sentences, write_documents


def _docs(pattern):
    return [([s.decode() for s in lines.numpy()], int(bad)) for lines, bad in documents_dataset(pattern)]


def test_documents_grouping_across_files(tmp_path):
    (tmp_path / "b.txt").write_bytes(b"Doc three one\n  \n\n\nx\nDoc4 last no newline")
    (tmp_path / "a.txt").write_bytes(b"\n\nHello world.\r\nSecond \xff\xfeline.\n\nDoc two.\n")
    (tmp_path / "c.txt").write_bytes(b"")
    docs = _docs(str(tmp_path / "*.txt"))
    assert docs == [
        (["Hello world.", "Second line."], 1),  # invalid bytes dropped, counted
        (["Doc two."], 0),
        (["Doc three one"], 0),  # whitespace-only line ends a document
        (["x", "Doc4 last no newline"], 0),  # a file's last document needs no blank line
    ]


def test_long_document_streams_in_blocks(tmp_path):
    lines = [f"line {i}" for i in range(9000)]  # crosses the 4096-line blocks
    (tmp_path / "big.txt").write_text("\n".join(lines[:5000]) + "\n\n" + "\n".join(lines[5000:]) + "\n")
    docs = _docs(str(tmp_path / "big.txt"))
    assert [len(d) for d, _ in docs] == [5000, 4000]
    assert docs[1][0][0] == "line 5000"


def test_missing_files_are_refused(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(ValueError, match="nope-\\*.txt"):
        resolve_files([str(tmp_path / "a.txt"), str(tmp_path / "nope-*.txt")])
    with pytest.raises(ValueError, match="missing.txt"):
        resolve_files(f"{tmp_path}/a.txt,{tmp_path}/missing.txt")
    with pytest.raises(ValueError, match="at least one"):
        resolve_files([])
    assert resolve_files(f"{tmp_path}/a.txt,{tmp_path}/*.txt") == [str(tmp_path / "a.txt")]


def test_split_sentences_and_write(tmp_path):
    text = 'He said "Hi." Then he left! Was it 3 p.m. then? 42 is the answer.  '
    assert split_sentences(text) == ['He said "Hi."', "Then he left!", "Was it 3 p.m. then?", "42 is the answer."]
    assert split_sentences("no end") == ["no end"]
    with pytest.raises(ValueError, match="text"):
        split_sentences(b"bytes")
    path = str(tmp_path / "out.txt")
    assert write_documents(["A b. C d.", "   ", "E f!"], path) == 2
    assert _docs(path) == [(["A b.", "C d."], 0), (["E f!"], 0)]
