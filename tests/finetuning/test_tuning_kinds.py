"""The search on SQuAD and CoNLL NER: the adapters' objective (F1) is the kept preset's own dev score.

Tiny models on a few hand-written rows: what is tested is that each task kind reads its
data, trains a trial, scores dev with the official metric, keeps the best preset, and that
an objective the task does not report is refused before any trial.
"""

import json
import os
import re

import pytest

from keras_bert_zoo.finetuning.config import FinetuningConfig
from keras_bert_zoo.finetuning.search.run import run_tuning, task_objective
from tests.tools.test_finetune import _tiny_preset

GRID = {"learning_rate": [1e-3], "batch_size": [4], "epochs": [1]}
CONTEXT = "Super Bowl 50 was played on February 7 , 2016 at Levi's Stadium in Santa Clara ."
QAS = [("q1", "Where was it played?", "Levi's Stadium"), ("q2", "When was it played?", "February 7 , 2016"),
       ("q3", "Which city?", "Santa Clara"), ("q4", "Which game?", "Super Bowl 50")]
CONLL = """-DOCSTART- -X- -X- O

U.N. NNP I-NP B-ORG
official NN I-NP O
Ekeus NNP I-NP B-PER
heads VBZ I-VP O
for IN I-PP O
Baghdad NNP I-NP B-LOC
. . O O

Joel NNP I-NP B-PER
lives VBZ I-VP O
in IN I-PP O
Seattle NNP I-NP B-LOC
. . O O
"""


def _vocabulary(text):
    words = sorted(set(re.findall(r"[a-z0-9]+|[^\sa-z0-9]", text.lower())))
    return ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words


def _squad_file(path, version, impossible=False):
    qas = [{"id": i, "question": q, "answers": [{"text": a, "answer_start": CONTEXT.index(a)}]} for i, q, a in QAS]
    if impossible:
        qas.append({"id": "q5", "question": "Who sang?", "answers": [], "is_impossible": True})
    document = {"version": version, "data": [{"title": "t", "paragraphs": [{"context": CONTEXT, "qas": qas}]}]}
    path.write_text(json.dumps(document), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("task,version", [("squad1", "1.1"), ("squad2", "v2.0")])
def test_squad_search_scores_f1_and_keeps_that_model(tmp_path, task, version):
    from keras_bert_zoo.data.squad import read_squad
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    preset = _tiny_preset(tmp_path, tokens=_vocabulary(CONTEXT + " ".join(q for _, q, _ in QAS) + " who sang"))
    data = _squad_file(tmp_path / "squad.json", version, impossible=task == "squad2")
    config = FinetuningConfig(task, data, data, preset, str(tmp_path / "out"), sequence_length=32, doc_stride=8,
                              max_query_length=8, seed=3, progress=False)
    assert task_objective(task) == "f1"
    with pytest.raises(ValueError, match="not the objective 'accuracy'"):
        run_tuning(config, grid=GRID, objective="accuracy")
    assert not os.path.exists(tmp_path / "out")  # refused before any trial
    result = run_tuning(config, grid=GRID)
    assert result["objective"] == "f1" and len(result["trials"]) == 1
    kept = BertSpanExtractor.from_preset(str(tmp_path / "out" / "preset"))
    metrics, _ = kept.squad_metrics(read_squad(data), "v1.1" if task == "squad1" else "v2.0")
    # The trial's F1 is the saved model's (v2.0: at the null threshold tuned on dev and kept in the preset).
    assert result["best"]["f1"] == pytest.approx(metrics["f1"])
    if task == "squad2":
        assert kept.null_score_diff_threshold is not None
        assert result["best"]["f1"] == pytest.approx(result["best"]["best_f1"], abs=1e-6)


def test_ner_search_scores_entity_f1_and_keeps_that_model(tmp_path):
    from keras_bert_zoo.data.conll import conll_inputs, read_conll
    from keras_bert_zoo.metrics.tagging import entity_scores
    from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier

    data = tmp_path / "eng.train"
    data.write_text(CONLL, encoding="utf-8")
    preset = _tiny_preset(tmp_path, tokens=_vocabulary(CONLL))
    config = FinetuningConfig("conll2003", str(data), str(data), preset, str(tmp_path / "out"), sequence_length=32,
                              seed=3, progress=False)
    with pytest.raises(ValueError, match="reports \\('precision', 'recall', 'f1'\\), not the objective 'accuracy'"):
        run_tuning(config, grid=GRID, objective="accuracy")
    assert not os.path.exists(tmp_path / "out")
    result = run_tuning(config, grid=GRID)
    assert result["objective"] == "f1" and set(result["best"]) >= {"precision", "recall", "f1"}
    dev = read_conll(str(data))
    kept = BertTokenClassifier.from_preset(str(tmp_path / "out" / "preset"))
    tags = kept.predict_tags(conll_inputs(dev)[0])
    assert result["best"]["f1"] == pytest.approx(entity_scores(dev.tags, tags)["f1"])
