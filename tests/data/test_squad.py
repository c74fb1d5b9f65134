"""SQuAD JSON files as distributed and tfds's squad/v1.1, squad/v2.0 built locally, offline."""

import json
import logging

import numpy as np
import pytest

from keras_bert_zoo.data.squad import load_squad_tfds, read_squad

CONTEXT = ("Super Bowl 50 was played on February 7, 2016, at Levi's Stadium in Santa Clara. "
           "Zürich's 北京 fans watched in the 49ers' home.")


def _answer(text, occurrence=0, context=CONTEXT):
    start = -1
    for _ in range(occurrence + 1):
        start = context.index(text, start + 1)
    return {"text": text, "answer_start": start}


def _squad_file(tmp_path, qas, version="1.1", name="dev.json"):
    document = {"version": version, "data": [
        {"title": "Super_Bowl_50", "paragraphs": [{"context": CONTEXT, "qas": qas[:2]}]},
        {"title": "Other", "paragraphs": [{"context": CONTEXT, "qas": qas[2:]}]},
    ]}
    path = tmp_path / name
    path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    return str(path)


def test_v1_dev_file_with_several_gold_answers(tmp_path):
    qas = [
        {"id": "q1", "question": "Where?", "answers": [_answer("Levi's Stadium"), _answer("Santa Clara"),
                                                       _answer("Levi's Stadium")]},
        {"id": "q2", "question": "When?", "answers": [_answer("February 7, 2016")]},
        {"id": "q3", "question": "Whose home?", "answers": [_answer("49ers"), _answer("北京")]},
    ]
    data = read_squad(_squad_file(tmp_path, qas))
    assert data.ids == ["q1", "q2", "q3"] and len(data) == 3
    questions, contexts = data.x
    assert questions == ["Where?", "When?", "Whose home?"] and contexts == [CONTEXT] * 3
    assert data.gold_answers() == {"q1": ["Levi's Stadium", "Santa Clara", "Levi's Stadium"],
                                   "q2": ["February 7, 2016"], "q3": ["49ers", "北京"]}
    # y: the first answer's character span (Python str indices, after "Zürich" and CJK).
    assert data.y.dtype == np.int32
    assert [CONTEXT[s:e] for s, e in data.y] == ["Levi's Stadium", "February 7, 2016", "49ers"]
    assert not data.is_impossible.any()


def test_v2_unanswerable_questions(tmp_path):
    qas = [
        {"id": "a", "question": "Where?", "answers": [_answer("Santa Clara")], "is_impossible": False},
        {"id": "b", "question": "Who lost?", "answers": [], "is_impossible": True,
         "plausible_answers": [_answer("49ers")]},
    ]
    data = read_squad(_squad_file(tmp_path, qas, "v2.0"))
    assert data.y.tolist() == [[CONTEXT.index("Santa Clara"), CONTEXT.index("Santa Clara") + 11], [-1, -1]]
    assert data.is_impossible.tolist() == [False, True]
    assert data.gold_answers() == {"a": ["Santa Clara"], "b": []}


def test_misaligned_answer_names_the_question_or_is_skipped_and_counted(tmp_path, caplog):
    bad = dict(_answer("Santa Clara"), answer_start=CONTEXT.index("Santa Clara") + 1)
    qas = [
        {"id": "ok", "question": "Where?", "answers": [_answer("Santa Clara")]},
        {"id": "half", "question": "Where?", "answers": [bad, _answer("Santa Clara")]},
        {"id": "off-by-one", "question": "Where?", "answers": [bad]},
    ]
    path = _squad_file(tmp_path, qas)
    with pytest.raises(ValueError, match="question 'half': answer_start=.* 'Santa Clara'.*skip_bad_answers"):
        read_squad(path)
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.data"):
        data = read_squad(path, skip_bad_answers=True)
    assert data.ids == ["ok", "half"] and data.skipped == 2
    assert data.gold_answers()["half"] == ["Santa Clara"]
    assert "skipped 2 misaligned answer(s); dropped 1 question(s)" in caplog.text
    assert [qid for qid, _ in data.dropped] == ["off-by-one"]


def test_malformed_files_are_refused(tmp_path):
    (tmp_path / "bad.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_squad(str(tmp_path / "bad.json"))
    (tmp_path / "list.json").write_text("[]", encoding="utf-8")
    with pytest.raises(ValueError, match="'data'"):
        read_squad(str(tmp_path / "list.json"))
    path = _squad_file(tmp_path, [{"id": "x", "question": "?", "answers": []}])
    with pytest.raises(ValueError, match="question 'x' has no answers"):
        read_squad(path)


def _store(data_dir, config, rows, v2):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    answers = tfds.features.Sequence({"text": tfds.features.Text(), "answer_start": tf.int32})
    features = {"id": tfds.features.Text(), "title": tfds.features.Text(), "context": tfds.features.Text(),
                "question": tfds.features.Text(), "answers": answers}
    if v2:
        features.update(is_impossible=tf.bool, plausible_answers=answers)
    tfds.dataset_builders.store_as_tfds_dataset(
        name="squad", version="3.0.0", config=config, data_dir=str(data_dir),
        features=tfds.features.FeaturesDict(features),
        split_datasets={"validation": list(enumerate(rows))},
    )


def _row(qid, answers, **extra):
    answers = {"text": [a["text"] for a in answers], "answer_start": [a["answer_start"] for a in answers]}
    return dict(id=qid, title="T", context=CONTEXT, question=f"{qid}?", answers=answers, **extra)


def test_tfds_squad_v1_and_v2_offline(tmp_path):
    _store(tmp_path, "v1.1", [_row("q1", [_answer("Santa Clara"), _answer("Levi's Stadium")])], v2=False)
    data = load_squad_tfds("squad/v1.1", "validation", data_dir=str(tmp_path))
    assert data.ids == ["q1"] and data.questions == ["q1?"] and data.contexts == [CONTEXT]
    assert data.gold_answers() == {"q1": ["Santa Clara", "Levi's Stadium"]}
    no_answer = {"text": [], "answer_start": []}
    _store(tmp_path, "v2.0", [
        _row("a", [_answer("北京")], is_impossible=False, plausible_answers=no_answer),
        _row("b", [], is_impossible=True, plausible_answers=_row("", [_answer("49ers")])["answers"]),
    ], v2=True)
    data = load_squad_tfds("squad/v2.0", "validation", data_dir=str(tmp_path))
    assert sorted(data.gold_answers().items()) == [("a", ["北京"]), ("b", [])]
    with pytest.raises(ValueError, match="not prepared"):
        load_squad_tfds("squad/v2.0", "validation", data_dir=str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="squad/v1.1"):
        load_squad_tfds("squad/v3", "validation", data_dir=str(tmp_path))
