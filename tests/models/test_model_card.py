"""Every preset a task saves holds a model card (issue #58): `README.md` with the source preset,
task, labels, data with rows and sha256, metrics beside the baseline, precision, versions and the
code that made it; `from_preset` reads it back as `task.model_card` with no effect on loading."""

import hashlib
import json
import logging
import os

import keras
import numpy as np
import pytest

from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from tests.weights import weights_testlib as lib

FIXTURE = lib.fixture_dir("gelu")
TEXTS = ["w1 w2", "w3", "w4 w5", "w6"]
LABELS = ["pos", "neg", "pos", "pos"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A classifier fine-tuned on four rows, its history, and the preset it saved."""
    keras.utils.set_random_seed(0)
    task = BertClassifier.from_preset(FIXTURE, labels=["neg", "pos"], sequence_length=16)
    history = task.fit(TEXTS, LABELS, validation_data=(["w7", "w8"], ["neg", "pos"]), epochs=1, verbose=0)
    return task, history.history, task.save_to_preset(str(tmp_path_factory.mktemp("card") / "preset"))


def test_a_saved_task_holds_a_card_with_its_facts(trained):
    task, history, path = trained
    card = open(os.path.join(path, "README.md"), encoding="utf-8").read()
    digest = hashlib.sha256("".join(t + "\0" for t in TEXTS).encode() + np.array([1, 0, 1, 1], "int32").tobytes())
    assert f"| fit(x, y): in-memory rows | 4 | `{digest.hexdigest()}` |" in card
    assert f"A keras_bert_zoo `BertClassifier` that started from `{FIXTURE}`." in card
    assert str(path) not in card  # names no folder of its own: a copied or moved preset keeps a true card
    assert "`neg`, `pos` (ids in this order)." in card
    assert f"| accuracy | {history['accuracy'][-1]:.4f} | 0.7500 |" in card  # 3 of 4 training rows are 'pos'
    assert f"| val_accuracy | {history['val_accuracy'][-1]:.4f} | 0.5000 |" in card
    assert "Baseline: always the commonest training class, 'pos'." in card
    assert f"Saved in `float32`. keras_bert_zoo " in card and f"keras {keras.__version__}" in card
    assert f"task = keras_bert_zoo.BertClassifier.from_preset({FIXTURE!r})" in card
    assert "task.fit(x, y)  # 4 rows, epochs=1, batch_size=32" in card
    assert card.startswith('---\nlibrary_name: "keras_bert_zoo"\npipeline_tag: "text-classification"\n')
    assert "README.md" not in json.load(open(os.path.join(path, "manifest.json")))["files"]


def test_from_preset_reads_the_card_back_without_effect_on_loading(trained, tmp_path, caplog):
    task, history, path = trained
    reloaded = BertClassifier.from_preset(path)
    facts = reloaded.model_card
    assert facts["metrics"] == {k: pytest.approx(v[-1]) for k, v in history.items()}
    assert facts["source_preset"] == facts["base_model"] == FIXTURE and facts["loaded_from"] == path
    expected = [np.array(w) for w in reloaded.weights]
    # Edited into nonsense, or removed: the preset loads the same weights, the card's facts aside.
    with open(os.path.join(path, "README.md"), "a", encoding="utf-8") as f:
        f.write("\nmy notes\n")
    assert BertClassifier.from_preset(path).model_card["metrics"] == facts["metrics"]
    original = open(os.path.join(path, "README.md"), encoding="utf-8").read()
    with open(os.path.join(path, "README.md"), "w", encoding="utf-8") as f:
        f.write("---\nkeras_bert_zoo: {not json\n---\n")
    with caplog.at_level(logging.WARNING, logger="keras_bert_zoo.weights"):
        broken = BertClassifier.from_preset(path)
    assert "the model card's facts could not be read" in caplog.text
    assert "metrics" not in broken.model_card and broken.model_card["source_preset"] == path
    os.remove(os.path.join(path, "README.md"))
    gone = BertClassifier.from_preset(path)
    for loaded in (broken, gone):
        assert all(np.array_equal(a, np.array(b)) for a, b in zip(expected, loaded.weights))
        assert loaded.get_config()["labels"] == ["neg", "pos"]
    with open(os.path.join(path, "README.md"), "w", encoding="utf-8") as f:
        f.write(original)
    # Saved again untrained, the model keeps its card's facts; trained again, the card adds the new rows.
    again = BertClassifier.from_preset(path)
    resaved = again.save_to_preset(str(tmp_path / "again"))
    assert BertClassifier.from_preset(resaved).model_card["data"] == facts["data"]


@pytest.mark.parametrize("build, tag", [
    (lambda: BertTokenClassifier.from_preset(FIXTURE, labels=["O", "B-X", "I-X"]), "token-classification"),
    (lambda: BertSpanExtractor.from_preset(FIXTURE), "question-answering"),
    (lambda: BertMultipleChoice.from_preset(FIXTURE, num_choices=2), "multiple-choice"),
], ids=["token_classifier", "span_extractor", "multiple_choice"])
def test_every_task_writes_its_card(build, tag, tmp_path):
    path = build().save_to_preset(str(tmp_path / "preset"))
    card = open(os.path.join(path, "README.md"), encoding="utf-8").read()
    assert f'pipeline_tag: "{tag}"' in card
    assert "Not recorded: this model was not trained since it was loaded." in card
