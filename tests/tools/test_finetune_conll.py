"""tools/finetune.py --task conll2003 (fine-tuning and --feature-based) on CoNLL-2003's first rows and a tiny preset."""

import json
import os

import pytest

from tests.helpers import serve_strings
from tools import finetune

# The first sentences of CoNLL-2003's train.txt and valid.txt (the IOB2 redistribution), as distributed.
TRAIN = """-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O

The DT B-NP O
European NNP I-NP B-ORG
Commission NNP I-NP I-ORG
said VBD B-VP O
on IN B-PP O
Thursday NNP B-NP O
it PRP B-NP O
disagreed VBD B-VP O
with IN B-PP O
German JJ B-NP B-MISC
advice NN I-NP O
to TO B-PP O
consumers NNS B-NP O
to TO B-VP O
shun VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O
"""
DEV = """-DOCSTART- -X- -X- O

CRICKET NNP B-NP O
- : O O
LEICESTERSHIRE NNP B-NP B-ORG
TAKE NNP I-NP O
OVER IN B-PP O
AT NNP B-NP O
TOP NNP I-NP O
AFTER NNP I-NP O
INNINGS NNP I-NP O
VICTORY NN I-NP O
. . O O

LONDON NNP B-NP B-LOC
1996-08-30 CD I-NP O

West NNP B-NP B-MISC
Indian NNP I-NP I-MISC
all-rounder NN I-NP O
Phil NNP B-NP B-PER
Simmons NNP I-NP I-PER
took VBD B-VP O
"""
WORDS = sorted({line.split()[0].lower() for line in (TRAIN + DEV).splitlines() if line and "DOCSTART" not in line})
TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "-", "##0", "##1", "##2", "##3", "##6", "##8", "##9"] + [
    w for w in WORDS if "-" not in w]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    root = tmp_path_factory.mktemp("conll")
    (root / "train.txt").write_text(TRAIN, encoding="utf-8")
    (root / "valid.txt").write_text(DEV, encoding="utf-8")
    backbone = BertBackbone(vocabulary_size=len(TOKENS), num_layers=2, num_heads=2, hidden_dim=16,
                            intermediate_dim=32, max_sequence_length=32)
    preset = backbone.save_to_preset(str(root / "tiny_preset"), vocabulary=TOKENS)
    return str(root / "train.txt"), str(root / "valid.txt"), preset


def _argv(train, dev, preset, out, *more):
    return ["--task", "conll2003", "--train-file", train, "--dev-file", dev, "--preset", preset,
            "--output-dir", out, "--epochs", "2", "--batch-size", "2", "--learning-rate", "1e-3",
            "--sequence-length", "16", "--seed", "1", "--no-progress", *more]


def _check_outputs(out, results, dev, model_cls):
    """results.json, the CoNLL predictions and the reloaded preset all agree."""
    from keras_bert_zoo.data.conll import read_conll
    from keras_bert_zoo.metrics.tagging import entity_scores

    assert json.load(open(os.path.join(out, "results.json"))) == results
    assert results["task"] == "conll2003" and results["train_examples"] == 4 and results["dev_sentences"] == 3
    assert results["labels"] == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    assert set(results["dev"]) == {"precision", "recall", "f1"} and len(results["dev_per_epoch"]) == 2
    assert results["train_tokens"] > 0 and results["train_tokens_per_second"] > 0
    assert results["predict_tokens_per_second"] > 0
    # The predictions file: the dev words and gold tags as read, then the predicted tag.
    blocks = open(os.path.join(out, "dev_predictions.conll"), encoding="utf-8").read().split("\n\n")
    rows = [[line.split(" ") for line in block.splitlines()] for block in blocks]
    gold = read_conll(dev)
    assert [[r[0] for r in s] for s in rows] == gold.words and [[r[1] for r in s] for s in rows] == gold.tags
    predicted = [[r[2] for r in s] for s in rows]
    scores = entity_scores(gold.tags, predicted)
    assert results["dev"] == {k: scores[k] for k in ("precision", "recall", "f1")}
    assert results["dev_per_type"] == json.loads(json.dumps(scores["per_type"]))
    # How it was made and what it compares with: the config as used, the files, the all-O baseline.
    assert (results["config"]["batch_size"], results["config"]["epochs"], results["config"]["sequence_length"],
            results["config"]["lowercase"]) == (2, 2, 16, True)
    assert (results["data"]["train_file"]["read"], results["data"]["dev_file"]["read"]) == (4, 3)
    assert results["data"]["dev_file"]["skipped"] == 0 and results["data"]["dev_file"]["repaired_tags"] == 0
    assert results["baseline"]["dev"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    tags = [tag for sentence in predicted for tag in sentence]
    assert results["dev_predictions"]["count"] == len(tags) and results["dev_predictions"]["distinct"] == len(set(tags))
    if len(set(tags)) == 1:
        assert results["warnings"][0].startswith(f"all {len(tags)} dev predictions are class {tags[0]!r}")
    else:
        assert results["warnings"] == []
    reloaded = model_cls.from_preset(os.path.join(out, "preset"))
    assert reloaded.labels == results["labels"] and reloaded.preprocessor.sequence_length == 16
    assert reloaded.predict_tags([" ".join(w) for w in gold.words]) == predicted
    return reloaded


def test_fine_tuning_writes_results_conll_predictions_and_preset(tmp_path, files):
    from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier

    train, dev, preset = files
    out = str(tmp_path / "run")
    results = finetune.main(_argv(train, dev, preset, out, "--dropout", "0.2",
                                  "--export-dir", str(tmp_path / "served")))
    assert results["mode"] == "fine_tuning" and results["feature"] is None
    reloaded = _check_outputs(out, results, dev, BertTokenClassifier)
    assert reloaded.dropout == reloaded.backbone.dropout == 0.2  # --dropout: head and backbone
    # --export-dir: served on raw sentences, the entities are those of the tags the run predicted.
    from seqeval.metrics.sequence_labeling import get_entities

    from keras_bert_zoo.data.conll import read_conll

    gold = read_conll(dev)
    served = serve_strings(results["export_dir"], text=[" ".join(words) for words in gold.words])
    blocks = open(os.path.join(out, "dev_predictions.conll"), encoding="utf-8").read().split("\n\n")
    for i, block in enumerate(blocks):
        entities = get_entities([line.split(" ")[2] for line in block.splitlines()])
        count = int(served["num_entities"][i])
        assert [t.decode() for t in served["entity_type"][i, :count].numpy()] == [e[0] for e in entities]


def test_feature_based_run_trains_the_tagger_on_frozen_features(tmp_path, files):
    from keras_bert_zoo.models.bert_feature_extractor import BertFeatureExtractor

    train, dev, preset = files
    out = str(tmp_path / "features")
    results = finetune.main(_argv(train, dev, preset, out, "--feature-based", "concat_last_four",
                                  "--lstm-units", "8"))
    assert results["mode"] == "feature_based" and results["feature"] == "concat_last_four"
    reloaded = _check_outputs(out, results, dev, BertFeatureExtractor)
    assert reloaded.feature == "concat_last_four" and reloaded.lstm_units == 8


def test_bad_flags_and_files_are_refused_naming_the_flag(tmp_path, files):
    train, dev, preset = files
    out = str(tmp_path / "never")
    with pytest.raises(SystemExit):
        finetune.main(_argv(train, dev, preset, out, "--feature-based", "third_layer"))
    with pytest.raises(ValueError, match=r"--feature-based is for token classification .* task='sst2'"):
        finetune.main(["--task", "sst2"] + _argv(train, dev, preset, out, "--feature-based", "last")[2:])
    with pytest.raises(ValueError, match=r"--lstm-units sizes the feature-based tagger"):
        finetune.main(_argv(train, dev, preset, out, "--lstm-units", "8"))
    with pytest.raises(ValueError, match=r"--lstm-units must be an integer >= 1"):
        finetune.main(_argv(train, dev, preset, out, "--feature-based", "last", "--lstm-units", "0"))
    broken = tmp_path / "broken.txt"
    broken.write_text(TRAIN.replace("rejects VBZ B-VP O", "rejects O"), encoding="utf-8")
    with pytest.raises(ValueError, match=r"--train-file: .*broken.txt:4: expected 4 columns .* found 2"):
        finetune.main(_argv(str(broken), dev, preset, out))
    only_o = tmp_path / "only_o.txt"
    only_o.write_text("Thursday NNP B-NP O\nsaid VBD B-VP O\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"--train-file: .*only_o.txt' has no entity tags"):
        finetune.main(_argv(str(only_o), dev, preset, out))
    assert not os.path.exists(out)


def test_skip_malformed_drops_lines_with_a_wrong_column_count(tmp_path, files):
    from keras_bert_zoo.finetuning.config import FinetuningConfig
    from keras_bert_zoo.finetuning.tagging import read_tagging_data

    train, dev, preset = files
    broken = tmp_path / "broken.txt"
    broken.write_text(TRAIN.replace("rejects VBZ B-VP O", "rejects O"), encoding="utf-8")
    config = FinetuningConfig("conll2003", str(broken), dev, preset, str(tmp_path / "o"), skip_malformed=True)
    data = read_tagging_data(config, "train_file")
    assert data.skipped == 1 and data.words[0][:3] == ["EU", "German", "call"]


def test_feature_choices_are_the_models():
    from keras_bert_zoo.models.bert_feature_extractor import FEATURES
    from keras_bert_zoo.finetuning.config import FEATURE_CHOICES
    from benchmarks import reproduce_table7

    assert FEATURE_CHOICES == tuple(FEATURES) == finetune.FEATURE_CHOICES
    assert reproduce_table7.FEATURE_CHOICES == list(FEATURES)
