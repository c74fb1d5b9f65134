"""A user's presets under faults and mistakes (issue 21): a load never deletes a user's
file (R17), a mistyped path is not a registry name (R19), killed saves are cleaned up or
pointed to (R20, R21), files name themselves in errors (R23, R24), presets get the
user's umask (R28), and the registry module does not import weights/ (R29)."""

import ast
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo.text.bert_preprocessor import BertPreprocessor
from keras_bert_zoo.utils import files
from keras_bert_zoo.presets import download, loading, preset_format
from tests.weights import weights_testlib as lib

VOCAB = os.path.join(lib.fixture_dir("gelu"), "vocab.txt")
PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "keras_bert_zoo"


@pytest.fixture(scope="module")
def saved_preset(tmp_path_factory):
    """One preset saved by `BertPretrainer.save_to_preset` (a tiny one); tests copy it."""
    target = tmp_path_factory.mktemp("saved") / "preset"
    lib.build_pretrainer(lib.fixture_dir("gelu")).save_to_preset(str(target), vocabulary=VOCAB)
    return target


@pytest.fixture
def preset(saved_preset, tmp_path):
    target = tmp_path / "my_preset"
    shutil.copytree(saved_preset, target)
    return target


def _flip_byte(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def _sha(path):
    return files.sha256_file(path)


def test_r17_flipped_byte_in_a_users_preset_is_refused_and_never_deleted(preset):
    weights = preset / "weights.safetensors"
    good = json.loads((preset / "manifest.json").read_text())["files"]["weights.safetensors"]["sha256"]
    _flip_byte(weights, weights.stat().st_size // 2)
    bad = _sha(weights)
    with pytest.raises(download.IntegrityError) as info:
        BertBackbone.from_preset(str(preset))
    message = str(info.value)
    assert str(weights) in message and good in message and bad in message
    assert "Nothing was removed" in message and "verify=False" in message and "rehash_preset" in message
    assert weights.exists() and _sha(weights) == bad  # the user's file, untouched
    assert sorted(os.listdir(preset)) == ["README.md", "config.json", "manifest.json", "vocab.txt",
                                          "weights.safetensors"]  # README.md: the task's model card


def test_r17_hand_edited_config_loads_with_verify_false_or_after_rehash(preset):
    config_path = preset / "config.json"
    config = json.loads(config_path.read_text())
    config["backbone"]["dropout"] = 0.0  # the documented kind of edit (0.1 -> 0.0)
    config_path.write_text(json.dumps(config))
    edited = config_path.read_bytes()
    with pytest.raises(download.IntegrityError, match="config.json differs"):
        BertBackbone.from_preset(str(preset))
    assert config_path.read_bytes() == edited
    backbone = BertBackbone.from_preset(str(preset), verify=False)
    assert backbone.dropout == 0.0
    exp = lib.expected("gelu")
    lib.assert_matches_hf(backbone(lib.inputs_of(exp), training=False), exp, keys=("sequence_output", "pooled_output"))
    preset_format.rehash_preset(str(preset))
    assert BertBackbone.from_preset(str(preset)).dropout == 0.0  # verified again, with the edit


def test_r17_new_token_in_vocab_loads_with_verify_false(preset):
    vocab_path = preset / "vocab.txt"
    lines = vocab_path.read_text().splitlines()
    index = lines.index("w0")  # this vocabulary's first free slot (BERT's have [unused0])
    lines[index] = "zoology"  # BERT's documented way to add a word: replace an unused slot
    vocab_path.write_text("\n".join(lines) + "\n")
    with pytest.raises(download.IntegrityError, match="vocab.txt differs"):
        BertPretrainer.from_preset(str(preset))
    assert vocab_path.exists()
    pretrainer = BertPretrainer.from_preset(str(preset), verify=False, dropout=0.0)
    assert pretrainer.backbone.vocabulary_size == 64
    tokenizer = BertPreprocessor.from_preset(str(preset), sequence_length=8).tokenizer
    assert tokenizer.get_vocabulary()[index] == "zoology"


def test_r19_mistyped_path_is_an_error_not_the_registry_model(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    calls = []
    monkeypatch.setattr(download, "download", lambda *a, **k: calls.append(a))
    for typo in ("my_runs_typo/bert_tiny_en_uncased", "./bert_tiny_en_uncased/", str(tmp_path / "runs" / "bert_tiny_en_uncased")):
        with pytest.raises(ValueError, match="No such directory or file") as info:
            BertBackbone.from_preset(typo, load_weights=False)
        assert "pass 'bert_tiny_en_uncased'" in str(info.value)
        with pytest.raises(ValueError, match="No such directory or file"):
            BertBackbone.from_preset(typo)
    assert calls == []
    # Registry names and aliases still resolve, with or without a trailing slash.
    assert BertBackbone.from_preset("bert_tiny_en_uncased/", load_weights=False).num_layers == 2


def _dead_pid():
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_r20_killed_saves_leftovers_are_cleaned_by_the_next_save(saved_preset, tmp_path):
    target = tmp_path / "preset"
    shutil.copytree(saved_preset, target)
    pid = _dead_pid()
    for kind in ("tmp", "old"):  # a full copy each, as a kill mid-save leaves them
        shutil.copytree(saved_preset, tmp_path / f".{kind}-preset-{pid}-ab1cd_2")
    alive = tmp_path / f".tmp-preset-{os.getppid()}-zz9"  # a save still running elsewhere
    alive.mkdir()
    other = tmp_path / f".tmp-preset-2-{pid}-xy"  # another target's (`preset-2`) leftover
    other.mkdir()
    backbone = BertBackbone.from_preset(str(target), load_weights=False)
    backbone.save_to_preset(str(target))
    assert sorted(os.listdir(tmp_path)) == sorted(["preset", alive.name, other.name])


def test_r20_kill_between_the_renames_points_to_the_old_copy(saved_preset, tmp_path, monkeypatch):
    old = tmp_path / f".old-preset-{_dead_pid()}-k1ll"
    shutil.copytree(saved_preset, old)  # the target itself is gone
    monkeypatch.chdir(tmp_path)
    for name in ("preset", str(tmp_path / "preset"), "./preset"):
        with pytest.raises(ValueError, match=f"interrupted save left its previous version at {old}"):
            BertBackbone.from_preset(name)
    os.rename(old, tmp_path / "preset")  # what the message says to do
    assert BertBackbone.from_preset("./preset").num_layers == 2


def test_r20_a_save_after_a_kill_between_the_renames_removes_the_old_copy(saved_preset, tmp_path):
    """The `.old-*` copy is kept while it is the only one; once a save puts a new version in
    place it is stale, and that save removes it."""
    old = tmp_path / f".old-preset-{_dead_pid()}-k1ll"
    shutil.copytree(saved_preset, old)
    backbone = BertBackbone.from_preset(str(old), load_weights=False)
    backbone.save_to_preset(str(tmp_path / "preset"))
    assert sorted(os.listdir(tmp_path)) == ["preset"]


@pytest.mark.parametrize("tool", ["export", "predict"])
def test_r20_export_and_predict_tools_point_to_the_old_copy(saved_preset, tmp_path, tool):
    from tools import export as export_tool
    from tools import predict as predict_tool

    old = tmp_path / f".old-preset-{_dead_pid()}-k1ll"
    shutil.copytree(saved_preset, old)
    source = tmp_path / "in.jsonl"
    source.write_text('"w1"\n')
    argv = ["--model", str(tmp_path / "preset")] + (
        ["--output", str(tmp_path / "served")] if tool == "export" else ["--input", str(source), "--output", "-"])
    main = export_tool.main if tool == "export" else predict_tool.main
    with pytest.raises(ValueError, match=f"does not exist.* interrupted save left its previous version at {old}"):
        main(argv)


def test_r21_save_onto_an_existing_file_is_refused(saved_preset, tmp_path):
    backbone = BertBackbone.from_preset(str(saved_preset), load_weights=False)
    path = tmp_path / "notes.txt"
    path.write_text("precious")
    with pytest.raises(ValueError, match="existing file, not a directory"):
        backbone.save_to_preset(str(path))
    assert path.read_text() == "precious" and os.listdir(tmp_path) == ["notes.txt"]


@pytest.mark.parametrize("name", ["config.json", "manifest.json"])
def test_r23_invalid_json_names_the_file(preset, name):
    (preset / name).write_text('{"format": "keras_bert_zoo", ')
    with pytest.raises(ValueError, match=f"{preset / name} is not valid JSON"):
        BertBackbone.from_preset(str(preset))


@pytest.mark.parametrize("damage, needle", [("truncate", "truncated or not safetensors"), ("pickle", "PyTorch pickle")])
def test_r24_broken_safetensors_names_the_file(tmp_path, damage, needle):
    hf = tmp_path / "hf"
    shutil.copytree(lib.fixture_dir("gelu"), hf)
    path = hf / "model.safetensors"
    if damage == "truncate":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.write_bytes(b"\x80\x04\x95" + b"\x00" * 64)  # a pickle's first bytes
    with pytest.raises(ValueError, match=needle) as info:
        BertBackbone.from_preset(str(hf))
    assert str(path) in str(info.value)


def test_r28_presets_get_the_users_umask(saved_preset, tmp_path):
    backbone = BertBackbone.from_preset(str(saved_preset), load_weights=False)
    previous = os.umask(0o027)
    try:
        target = tmp_path / "preset"
        backbone.save_to_preset(str(target), vocabulary=VOCAB)
    finally:
        os.umask(previous)
    assert oct(target.stat().st_mode & 0o777) == oct(0o750)
    assert {n: oct((target / n).stat().st_mode & 0o777) for n in os.listdir(target)} == {
        n: oct(0o640) for n in ("config.json", "manifest.json", "vocab.txt", "weights.safetensors")
    }


def _imports(path):
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module + "." + ".".join(a.name for a in node.names) if node.module == "keras_bert_zoo" else node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_r29_no_import_cycle_between_the_registry_and_weights():
    registry = _imports(PACKAGE / "presets" / "registry.py")
    assert not any(n.startswith(("keras_bert_zoo.weights", "keras_bert_zoo.models", "keras_bert_zoo.text")) for n in registry)
    for path in sorted((PACKAGE / "weights").glob("*.py")):  # weights/ reads files; it uses no model or preset code
        assert not any(n.startswith(("keras_bert_zoo.models", "keras_bert_zoo.text", "keras_bert_zoo.presets"))
                       for n in _imports(path)), path
    for path in (*(PACKAGE / "presets").glob("*.py"), PACKAGE / "text" / "bert_preprocessor.py",
                 PACKAGE / "models" / "bert_pretrainer.py"):
        assert "except ImportError" not in path.read_text(), path
    for path in (PACKAGE / "weights").glob("*.py"):
        assert "except (ImportError" not in path.read_text() and "except ImportError" not in path.read_text(), path
