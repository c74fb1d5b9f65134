"""`presets.open`: a preset resolved to its files once (one `sources.locate`) however many questions
loading asks of it, and a `Preset` accepted wherever a preset is."""

import os
import shutil

import pytest

import keras_bert_zoo
from keras_bert_zoo import presets
from keras_bert_zoo.finetuning.config import FinetuningConfig
from keras_bert_zoo.finetuning.run import run_finetuning
from keras_bert_zoo.presets import config as preset_config
from keras_bert_zoo.presets import loading, sources
from tests.tools.test_finetune import _sst2, _tiny_preset


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return _tiny_preset(tmp_path_factory.mktemp("presets"))


@pytest.fixture
def located(monkeypatch):
    """The arguments of every `sources.locate` call."""
    calls, locate = [], sources.locate
    monkeypatch.setattr(sources, "locate", lambda preset: calls.append(preset) or locate(preset))
    return calls


def test_a_task_from_a_folder_locates_it_once(folder, located):
    task = keras_bert_zoo.BertClassifier.from_preset(folder, num_classes=2)
    assert located == [folder]
    assert task.model_card["loaded_from"] == os.path.abspath(folder)


def test_a_zip_is_located_and_hashed_once(folder, tmp_path, located, monkeypatch):
    archive = shutil.make_archive(str(tmp_path / "tiny"), "zip", folder)
    hashed, sha256_file = [], sources.files.sha256_file
    monkeypatch.setattr(sources.files, "sha256_file", lambda path: hashed.append(path) or sha256_file(path))
    keras_bert_zoo.BertClassifier.from_preset(archive, num_classes=2)
    assert located == [archive] and hashed.count(archive) == 1


def test_a_preset_opened_once_serves_every_caller(folder, located):
    preset = presets.open(folder)
    assert presets.open(preset) is preset and repr(preset) == repr(folder) and str(preset) == folder
    assert preset.layout == "keras_bert_zoo" and preset.lowercase() is True
    assert preset_config.get_preset_config(preset) == preset.config and preset.config["num_layers"] == 2
    assert loading.get_preset_vocabulary(preset) == os.path.join(folder, "vocab.txt")
    keras_bert_zoo.BertBackbone.from_preset(preset)
    keras_bert_zoo.BertPreprocessor.from_preset(preset, sequence_length=8)
    task = keras_bert_zoo.BertClassifier.from_preset(preset, num_classes=2)
    keras_bert_zoo.BertPretrainer.from_preset(preset)
    assert located == [folder]
    # The card names what the preset was opened from, never the object.
    assert task.model_card["source_preset"] == os.path.abspath(folder)


def test_a_registry_name_answers_config_and_casing_without_its_files(located):
    preset = presets.open("bert_base_en_uncased")
    assert preset.config["num_layers"] == 12 and preset.lowercase() is True
    assert located == []


def test_errors_name_what_the_caller_passed(folder, tmp_path):
    bare = keras_bert_zoo.BertBackbone.from_preset(folder).save_to_preset(str(tmp_path / "bare"))  # no vocab.txt
    message = f"The preset {bare!r} has no vocab.txt (looked in {bare})."
    for preset in (bare, presets.open(bare)):
        with pytest.raises(ValueError) as error:
            keras_bert_zoo.BertPreprocessor.from_preset(preset)
        assert str(error.value) == message


def test_a_finetuning_run_locates_its_preset_once(folder, tmp_path, located):
    train, dev, _ = _sst2(tmp_path)
    config = FinetuningConfig("sst2", train, dev, folder, str(tmp_path / "out"), epochs=1, batch_size=4,
                              learning_rate=1e-3, sequence_length=16, progress=False)
    run_finetuning(config)
    assert located == [folder]
