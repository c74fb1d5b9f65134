"""tools/finetune.py --task squad1 | squad2 on SQuAD-format files of real passages; flags refused early."""

import json
import os
import re
import unicodedata

import pytest

from tests.helpers import serve_strings
from tests.text.span_passages import HAND_PASSAGES
from tools import finetune

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Questions written for the passages, with answers as they appear there (None: unanswerable).
QUESTIONS = [
    (0, [("What is the largest city in Switzerland?", "Zürich"),
         ("How many inhabitants did the municipality have?", "434,335"),
         ("Who is the mayor of the city?", None)]),
    (1, [("What is crème brûlée topped with?", "a layer of hardened caramelized sugar"),
         ("At what temperature is it normally served?", "room temperature"),
         ("When was the dessert invented?", None)]),
    (2, [("How many residents did the city have in 2020?", "21.9 million"),
         ("What does the name of the city mean?", "Northern Capital")]),
    (3, [("What is the most populous city in Brazil?", "São Paulo"),
         ("How many people live in Hà Nội?", None)]),
    (4, [("Who was the leader?", "John Smith"),
         ("How many radios did Smith's company export a year?", "3,000,000"),
         ("Where was the company based?", None)]),
]
FLAGS = ["--sequence-length", "48", "--doc-stride", "16", "--max-query-length", "12", "--max-answer-length", "8"]


def _squad_json(path, version, keep=lambda i: True):
    """A SQuAD file: v1.1 drops the unanswerable questions, v2.0 marks them `is_impossible`."""
    articles = []
    for passage, qas in QUESTIONS:
        context = HAND_PASSAGES[passage]
        rows = []
        for j, (question, answer) in enumerate(qas):
            qid = f"p{passage}q{j}"
            if not keep(len(rows)) or (answer is None and version == "1.1"):
                continue
            row = {"id": qid, "question": question,
                   "answers": [] if answer is None else [{"text": answer, "answer_start": context.index(answer)}]}
            if version == "v2.0":
                row["is_impossible"] = answer is None
            rows.append(row)
        articles.append({"title": f"passage {passage}", "paragraphs": [{"context": context, "qas": rows}]})
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": version, "data": articles}, f, ensure_ascii=False)
    return str(path)


def _plain(text):
    """Lower case without accents, as an uncased BERT vocabulary holds its words."""
    text = unicodedata.normalize("NFD", text.lower())
    return "".join(c for c in text if unicodedata.category(c) != "Mn")


@pytest.fixture(scope="module")
def preset(tmp_path_factory):
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    texts = HAND_PASSAGES + [q for _, qas in QUESTIONS for q, _ in qas]
    words = sorted({w for t in texts for w in re.findall(r"[\u4e00-\u9fff]|\w+|[^\w\s]", _plain(t))})
    tokens = SPECIALS + [w for w in words if not w.isupper()]
    backbone = BertBackbone(vocabulary_size=len(tokens), num_layers=2, num_heads=2, hidden_dim=16,
                            intermediate_dim=32, max_sequence_length=64)
    return backbone.save_to_preset(str(tmp_path_factory.mktemp("presets") / "tiny_squad"), vocabulary=tokens)


def _argv(task, train, dev, preset, out, *more):
    return ["--task", task, "--train-file", train, "--dev-file", dev, "--preset", preset, "--output-dir", out,
            "--epochs", "1", "--batch-size", "4", "--learning-rate", "1e-3", "--seed", "1", "--no-progress",
            *more]


def _reloaded_answers(out, dev):
    import keras

    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    keras.utils.clear_session()
    task = BertSpanExtractor.from_preset(os.path.join(out, "preset"))
    return task, task.predict(dev.x)


def test_squad1_run_writes_official_predictions_metrics_and_a_preset_that_reloads(tmp_path, preset):
    from keras_bert_zoo.data.squad import read_squad
    from keras_bert_zoo.metrics.squad import squad_v1_metrics

    train = _squad_json(tmp_path / "train-v1.1.json", "1.1")
    dev_file = _squad_json(tmp_path / "dev-v1.1.json", "1.1", keep=lambda i: i < 1)
    out = str(tmp_path / "run1")
    results = finetune.main(_argv("squad1", train, dev_file, preset, out, *FLAGS, "--max-train-examples", "8",
                                  "--dropout", "0.2", "--export-dir", str(tmp_path / "served")))
    assert json.load(open(os.path.join(out, "results.json"))) == results
    assert set(results["dev"]) == {"exact_match", "f1"} and results["train_examples"] == 8
    # Passages longer than one 48-token window are windowed, not truncated.
    assert results["train_windows"] > 8 and results["dev_windows"] > results["dev_examples"] == 5
    for key in ("train_windows_per_second", "predict_windows_per_second", "predict_questions_per_second"):
        assert results[key] > 0
    dev = read_squad(dev_file)
    predictions = json.load(open(os.path.join(out, "predictions.json"), encoding="utf-8"))
    assert list(predictions) == dev.ids  # every dev question, in the file's order
    for answer, context in zip(predictions.values(), dev.contexts):
        assert answer and answer in context  # v1.1 always answers, with a span of the context
    assert results["dev"] == squad_v1_metrics(predictions, dev.gold_answers())
    # --export-dir: the fine-tuned model served on raw question and context strings answers as scored.
    questions, contexts = dev.x
    served = serve_strings(results["export_dir"], question=questions, context=contexts)
    assert [a.decode() for a in served["answer_text"].numpy()] == list(predictions.values())
    task, answers = _reloaded_answers(out, dev)
    assert answers["answer_text"].tolist() == list(predictions.values())
    assert (task.preprocessor.sequence_length, task.preprocessor.doc_stride, task.preprocessor.max_query_length,
            task.max_answer_length, task.null_score_diff_threshold) == (48, 16, 12, 8, None)
    config = results["config"]  # the settings as used: a flag left out is the task's value
    assert (config["sequence_length"], config["doc_stride"], config["max_query_length"], config["max_answer_length"],
            config["rules"], config["batch_size"], config["seed"]) == (48, 16, 12, 8, "original", 4, 1)
    assert results["data"]["dev_file"]["read"] == 5 and results["data"]["train_file"]["used"] == 8
    assert results["baseline"]["dev"] == {"exact_match": 0.0, "f1": 0.0}  # the empty answer, by v1.1's rules
    assert results["warnings"] == []  # v1.1 always answers: one kind of answer is no warning
    assert task.backbone.dropout == 0.2  # --dropout (the preset's: 0.1)


def test_squad2_run_tunes_the_null_threshold_and_the_preset_keeps_it(tmp_path, preset):
    from keras_bert_zoo.data.squad import read_squad
    from keras_bert_zoo.metrics.squad import squad_v2_metrics

    data = _squad_json(tmp_path / "train-v2.0.json", "v2.0")
    out = str(tmp_path / "run2")
    results = finetune.main(_argv("squad2", data, data, preset, out, *FLAGS, "--rules", "hf_pipeline"))
    assert set(results["dev"]) == {"exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1", "best_f1_thresh"}
    dev = read_squad(data)
    assert results["train_examples"] == len(dev) == 13 and dev.is_impossible.sum() == 4
    predictions = json.load(open(os.path.join(out, "predictions.json"), encoding="utf-8"))
    assert list(predictions) == dev.ids
    task, answers = _reloaded_answers(out, dev)
    threshold = results["dev"]["best_f1_thresh"]
    assert task.null_score_diff_threshold == threshold
    assert answers["answer_text"].tolist() == list(predictions.values())
    # "" exactly where the null score beats the best span by more than the threshold.
    assert [p == "" for p in predictions.values()] == [d > threshold for d in answers["score_diff"]]
    na = dict(zip(dev.ids, answers["score_diff"].astype(float)))
    official = squad_v2_metrics(predictions, dev.gold_answers(), na, na_prob_thresh=threshold)
    assert {k: results["dev"][k] for k in ("exact", "f1", "HasAns_f1", "NoAns_f1")} == {
        k: official[k] for k in ("exact", "f1", "HasAns_f1", "NoAns_f1")}
    # The null odds, as the official script's --na-prob-file takes them; the empty-answer baseline.
    null_odds = json.load(open(os.path.join(out, "null_odds.json"), encoding="utf-8"))
    assert list(null_odds) == dev.ids
    assert [null_odds[q] for q in dev.ids] == pytest.approx(answers["score_diff"].astype(float).tolist(), abs=1e-5)
    baseline = squad_v2_metrics({q: "" for q in dev.ids}, dev.gold_answers())
    assert results["baseline"]["dev"] == {k: baseline[k] for k in ("exact", "f1", "HasAns_f1", "NoAns_f1")}
    assert results["baseline"]["dev"]["f1"] == pytest.approx(100 * 4 / 13)
    spans = sum(1 for p in predictions.values() if p)
    assert bool(results["warnings"]) == (spans in (0, len(predictions)))
    # The tuned threshold is the best one: its F1 is the reported best_f1.
    assert results["dev"]["f1"] == pytest.approx(results["dev"]["best_f1"])
    assert (task.preprocessor.doc_stride, task.preprocessor.max_query_length) == (16, 12)
    # HF's pipeline rules: probabilities, a threshold on their difference, kept in the preset.
    assert results["rules"] == task.rules == task.preprocessor.rules == "hf_pipeline"
    assert all(-1.0 <= d <= 1.0 for d in answers["score_diff"])


def test_bad_squad_flags_are_refused_naming_the_flag(tmp_path, preset):
    v1 = _squad_json(tmp_path / "v1.json", "1.1")
    v2 = _squad_json(tmp_path / "v2.json", "v2.0")
    out = str(tmp_path / "never")
    with pytest.raises(ValueError, match=r"--doc-stride is SQuAD's .* task='sst2'"):
        finetune.main(_argv("sst2", v1, v1, preset, out, "--doc-stride", "16"))
    with pytest.raises(ValueError, match=r"--rules is SQuAD's .* task='sst2'"):
        finetune.main(_argv("sst2", v1, v1, preset, out, "--rules", "hf_pipeline"))
    with pytest.raises(ValueError, match=r"--max-query-length must be an integer >= 1"):
        finetune.main(_argv("squad1", v1, v1, preset, out, "--max-query-length", "0"))
    with pytest.raises(ValueError, match=r"--train-file: .*v1.json' says it is SQuAD v1.1 .* Use --task squad1"):
        finetune.main(_argv("squad2", v1, v2, preset, out))
    with pytest.raises(ValueError, match=r"--dev-file: .*v2.json' says it is SQuAD v2.0 .* Use --task squad2"):
        finetune.main(_argv("squad1", v1, v2, preset, out))
    # A v2.0 file without its version field: its unanswerable questions give it away.
    unversioned = json.load(open(v2, encoding="utf-8"))
    del unversioned["version"]
    with open(tmp_path / "plain.json", "w", encoding="utf-8") as f:
        json.dump(unversioned, f)
    with pytest.raises(ValueError, match=r"--train-file: .* 4 unanswerable question\(s\) .* Use --task squad2"):
        finetune.main(_argv("squad1", str(tmp_path / "plain.json"), v1, preset, out))
    # A misaligned answer_start names the question; --skip-malformed is the way round it.
    broken = json.load(open(v1, encoding="utf-8"))
    broken["data"][0]["paragraphs"][0]["qas"][0]["answers"][0]["answer_start"] += 1
    with open(tmp_path / "broken.json", "w", encoding="utf-8") as f:
        json.dump(broken, f)
    with pytest.raises(ValueError, match=r"--train-file: .* question 'p0q0': answer_start=1 does not point"):
        finetune.main(_argv("squad1", str(tmp_path / "broken.json"), v1, preset, out))
    assert not os.path.exists(out)
