"""Quoref and Disfl-QA (BIG-bench) as SQuAD JSON, and the tool that fetches them.

The real-data tests skip, naming the command, when `tools/fetch_bigbench_qa.py` has not run.
"""

import hashlib
import io
import json
import os
import tarfile

import pytest

from keras_bert_zoo.data import bigbench_qa
from keras_bert_zoo.data.squad import read_squad
from tools import fetch_bigbench_qa as fetch


def real_data_or_skip():
    try:
        bigbench_qa.task_path(bigbench_qa.QUOREF)
        bigbench_qa.task_path(bigbench_qa.DISFL_QA)
    except FileNotFoundError as e:
        pytest.skip(str(e))


def test_find_answer_prefers_whole_words_then_ignores_spaces():
    context = "Anne met Ann . In 1466 , perhaps 40 , 000 people died ; 40,000 more later ."
    assert bigbench_qa.find_answer(context, "Ann") == (9, 12)  # not inside "Anne"
    assert bigbench_qa.find_answer(context, "Anne") == (0, 4)
    # An exact occurrence wins over a whitespace-free one, even a later one.
    assert context[slice(*bigbench_qa.find_answer(context, "40,000"))] == "40,000"
    assert bigbench_qa.find_answer("perhaps 40 , 000 people", "40,000") == (8, 16)
    assert bigbench_qa.find_answer("design - build , partnering", "design-build, partnering") == (0, 27)
    assert bigbench_qa.find_answer("the Ugandan roads", "Uganda") == (4, 10)  # only inside a word: taken
    assert bigbench_qa.find_answer(context, "Bob") is None
    assert bigbench_qa.find_answer(context, "") is None


def _write_tasks(data_dir):
    """Tiny task files in the two tasks' real layouts."""
    passages = ["Anne Lee met Bob. Later Bob left Anne and Ann stayed.", "Carl painted the barn red in 1990."]
    quoref = {"examples": [
        {"input": f"Passage: {passages[0]} \nQuestion: Who stayed?", "target": ["Ann."]},
        {"input": f"Passage: {passages[0]} \nQuestion: Who met?", "target": ["Anne Lee.", "Bob."]},
        {"input": f"Passage: {passages[1]} \nQuestion: What colour?", "target": ["red."]},
        {"input": f"Passage: {passages[1]} \nQuestion: Who sang?", "target": ["Dora."]},
    ]}
    disfl = {"examples": [
        {"input": "When was the barn no what colour ?  \ncontext: Carl painted the barn red in 1 , 990 . ",
         "target": "1,990"},
        {"input": "Who sang ?  \ncontext: Carl painted the barn red in 1 , 990 . ", "target": "unknown"},
    ]}
    for member, task in ((bigbench_qa.QUOREF, quoref), (bigbench_qa.DISFL_QA, disfl)):
        os.makedirs(os.path.dirname(os.path.join(data_dir, member)), exist_ok=True)
        with open(os.path.join(data_dir, member), "w", encoding="utf-8") as f:
            json.dump(task, f)
    return passages


def test_conversion_of_both_layouts(tmp_path):
    data_dir = str(tmp_path / "bigbench")
    passages = _write_tasks(data_dir)
    out = str(tmp_path / "out")
    written = bigbench_qa.write_quoref_squad(out, data_dir=data_dir, dev_fraction=0.5)
    assert written["skipped"] == {"multi_span": 1, "not_in_context": 1, "empty_question": 0}
    assert written["train"][1] + written["dev"][1] == 2
    by_id = {}
    for split in ("train", "dev"):
        data = read_squad(written[split][0])
        assert len(data) == written[split][1]
        by_id.update({q: (c, a, s) for q, c, a, s in zip(data.ids, data.contexts, data.answers, data.answer_starts)})
    # "Ann" at its first whole-word occurrence, not inside "Anne"; the trailing "." dropped.
    assert by_id == {"quoref-00000": (passages[0], ["Ann"], [42]), "quoref-00002": (passages[1], ["red"], [22])}

    written = bigbench_qa.write_disfl_qa_squad(out, data_dir=data_dir, dev_fraction=0.5)
    assert written["skipped"] == {"multi_span": 0, "not_in_context": 0, "empty_question": 0}
    (path, count), = [written[s] for s in ("train", "dev") if written[s][1]]  # one paragraph: one split
    with open(path, encoding="utf-8") as f:
        document = json.load(f)
    assert document["version"] == "v2.0" and count == 2
    (qa1, qa2), = [p["qas"] for p in document["data"][0]["paragraphs"]]
    # The gold text is the context's own tokenized span.
    assert qa1["answers"] == [{"text": "1 , 990", "answer_start": 29}] and not qa1["is_impossible"]
    assert qa2 == {"id": "disfl_qa-00001", "question": "Who sang ?", "answers": [], "is_impossible": True}
    assert read_squad(path).is_impossible.tolist() == [False, True]


def test_missing_data_names_the_fetch_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="python tools/fetch_bigbench_qa.py --output"):
        bigbench_qa.write_quoref_squad(str(tmp_path / "out"), data_dir=str(tmp_path / "none"))
    _write_tasks(str(tmp_path / "bb"))
    with pytest.raises(ValueError, match="dev_fraction=1.0"):
        bigbench_qa.write_disfl_qa_squad(str(tmp_path / "out"), data_dir=str(tmp_path / "bb"), dev_fraction=1.0)


def _tarball(path, members):
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_fetch_checks_the_hash_extracts_two_members_and_deletes_the_download(tmp_path):
    members = {fetch.PREFIX + m: m.encode() * 3 for m in fetch.MEMBERS}
    members["bigbench-1.0.0/bigbench/benchmark_tasks/other/task.json"] = b"{}"
    sha = _tarball(str(tmp_path / "bb.tar.gz"), members)
    url = (tmp_path / "bb.tar.gz").as_uri()
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="expected 00"):
        fetch.fetch(str(out), url=url, sha256="00" * 32)
    assert os.listdir(out) == []  # nothing extracted, the download removed
    assert fetch.main(["--output", str(out), "--url", url, "--sha256", sha]) == 0
    for member in fetch.MEMBERS:
        assert (out / member).read_bytes() == member.encode() * 3
    assert sorted(os.listdir(out)) == ["disfl_qa", "natural_instructions"]  # no tarball, no temporary files
    assert fetch.fetch(str(out), tarball="/nonexistent") == [str(out / m) for m in fetch.MEMBERS]  # already there

    del members[fetch.PREFIX + fetch.MEMBERS[0]]
    sha = _tarball(str(tmp_path / "partial.tar.gz"), members)
    with pytest.raises(ValueError, match="has no .*disfl_qa/task.json"):
        fetch.fetch(str(tmp_path / "out2"), tarball=str(tmp_path / "partial.tar.gz"), sha256=sha)
    assert os.listdir(tmp_path / "out2") == []
    assert fetch.main(["--output", str(tmp_path / "out3"), "--tarball", str(tmp_path / "partial.tar.gz")]) == 1
    assert (fetch.default_output(), fetch.MEMBERS) == (bigbench_qa.default_data_dir(),
                                                       (bigbench_qa.DISFL_QA, bigbench_qa.QUOREF))


def test_real_quoref_and_disfl_qa_as_squad(tmp_path):
    real_data_or_skip()
    quoref = bigbench_qa.write_quoref_squad(str(tmp_path))
    disfl = bigbench_qa.write_disfl_qa_squad(str(tmp_path))
    # 6,500 Quoref questions: 680 need several spans; 8,000 Disfl-QA questions: one has no text.
    assert quoref["skipped"] == {"multi_span": 680, "not_in_context": 0, "empty_question": 0}
    assert (quoref["train"][1], quoref["dev"][1]) == (5273, 547)
    assert disfl["skipped"] == {"multi_span": 0, "not_in_context": 0, "empty_question": 1}
    assert (disfl["train"][1], disfl["dev"][1]) == (7144, 855)
    data = {}
    for name, written in (("quoref", quoref), ("disfl", disfl)):
        for split in ("train", "dev"):
            data[name, split] = read_squad(written[split][0])  # checks every answer_start against its text
            assert len(data[name, split]) == written[split][1]
        assert not set(data[name, "train"].contexts) & set(data[name, "dev"].contexts)
    assert sum(int(data["disfl", s].is_impossible.sum()) for s in ("train", "dev")) == 2107
    # 2,942 passages, 191 of them with multi-span questions only.
    assert len(set(data["quoref", "train"].contexts)) + len(set(data["quoref", "dev"].contexts)) == 2751
    first = data["quoref", "train"]
    assert first.ids[0] == "quoref-00000" and first.answers[0] == ["Catherine"]
    assert first.contexts[0][first.answer_starts[0][0]:].startswith("Catherine Hickson, who was part")
    disfl_all = {q: a for s in ("train", "dev") for q, a in zip(data["disfl", s].ids, data["disfl", s].answers)}
    assert disfl_all["disfl_qa-00017"] == ["40 , 000"]  # the file's "40,000", as the tokenized context has it


def test_a_registry_that_refuses_the_sdist_is_named_with_its_words_and_nothing_is_written(tmp_path, capsys):
    import http.server
    import threading

    class Refusing(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"This package version is not available."
            self.send_response(403)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/bigbench-1.0.0.tar.gz"
        assert fetch.main(["--output", str(tmp_path / "out"), "--url", url]) == 1
    finally:
        server.shutdown()
    err = capsys.readouterr().err
    assert f"{url} answered HTTP 403 (This package version is not available.); nothing was written" in err
    assert os.listdir(tmp_path / "out") == []
