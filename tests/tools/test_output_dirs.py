"""Issue 45, "never lose a user's work": the folders tools/finetune.py writes, checked before training,
and every tool's user errors as one line (tools/_startup.run_main).

- An --output-dir holding a run is refused before anything is read (was: preset and results.json
  replaced silently, the old run's SST-2.tsv left beside the new files); --overwrite removes the
  recorded run's files first; files no run recorded are refused even with --overwrite.
- A read-only --output-dir / --export-dir is refused before the model is built (was: after training).
- --export-dir equal to, inside or around --output-dir is refused naming both (was: the preset
  deleted by the export's replace, exit 0).
- A refused folder, a bad flag or file: one line `finetune.py: error: ...`, exit 2 (was: a traceback).
"""

import ast
import json
import os
import subprocess
import sys

import pytest

from keras_bert_zoo.finetuning import run as finetuning_run
from keras_bert_zoo.utils import output_dirs
from tests.helpers import sigint_at_default
from tests.tools.test_finetune import _argv, _sst2, preset  # noqa: F401 (preset: the module's tiny preset fixture)
from tools import finetune
from tools._startup import run_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUR_TOOLS = ("finetune", "tune", "export", "predict", "serve", "pretrain", "convert_checkpoint", "create_pretraining_data",
             "learn_vocab", "prepare_wikipedia", "quickstart")  # not fetch_bigbench_qa: it runs before the install


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fails the test if the run gets past its output checks (reads the preset or the data)."""
    def refuse(*args, **kwargs):
        raise AssertionError("the run went past its output checks")

    monkeypatch.setattr(finetuning_run, "task_kind", refuse)
    monkeypatch.setattr(finetuning_run, "check_preset", refuse)


def _tree(path):
    return sorted(os.path.relpath(os.path.join(d, n), path) for d, dirs, names in os.walk(path) for n in dirs + names)


def test_output_dir_holding_a_run_is_refused_and_overwrite_replaces_it_whole(tmp_path, preset, monkeypatch):  # noqa: F811
    train, dev, test = _sst2(tmp_path)
    out = str(tmp_path / "run")
    finetune.main(_argv("sst2", train, dev, preset, out, "--test-file", test))
    record = output_dirs.read_run_record(out)
    assert record["status"] == "complete" and record["tool"] == "finetune"
    assert record["files"] == ["SST-2.tsv", "curves.png", "dev_predictions.tsv", "preset", "results.json",
                               "tensorboard"]
    before = {name: os.path.getmtime(os.path.join(out, name)) for name in record["files"]}

    kinds = finetuning_run.task_kind
    monkeypatch.setattr(finetuning_run, "task_kind", lambda *a: pytest.fail("the run went past its output checks"))
    with pytest.raises(ValueError, match=rf"--output-dir {out} holds a previous finetune run .*SST-2.tsv.*--overwrite"):
        finetune.main(_argv("sst2", train, dev, preset, out))
    assert {name: os.path.getmtime(os.path.join(out, name)) for name in record["files"]} == before
    monkeypatch.setattr(finetuning_run, "task_kind", kinds)

    # --overwrite: the old run goes as a whole (its SST-2.tsv too), the new one is all that is there.
    results = finetune.main(_argv("sst2", train, dev, preset, out, "--overwrite", "--seed", "2"))
    written = ["curves.png", "dev_predictions.tsv", "preset", "results.json", "tensorboard"]
    assert sorted(os.listdir(out)) == sorted(written + [output_dirs.LOCK_FILE, "run_files.json"])
    assert output_dirs.read_run_record(out)["files"] == written
    assert len(os.listdir(os.path.join(out, "tensorboard", "train"))) == 1  # this run's events, not the old run's
    assert json.load(open(os.path.join(out, "results.json"))) == results

    # A file the run did not write: refused even with --overwrite, and left alone.
    with open(os.path.join(out, "notes.txt"), "w") as f:
        f.write("mine")
    monkeypatch.setattr(finetuning_run, "task_kind", lambda *a: pytest.fail("the run went past its output checks"))
    with pytest.raises(ValueError, match=r"holds files that its previous finetune run did not write \(notes.txt"):
        finetune.main(_argv("sst2", train, dev, preset, out, "--overwrite"))
    assert open(os.path.join(out, "notes.txt")).read() == "mine" and os.path.isdir(os.path.join(out, "preset"))


def test_folders_no_run_recorded_are_refused_and_empty_ones_taken(tmp_path, nothing_runs):
    train, dev, _ = _sst2(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "results.json").write_text("{}")
    for more in ([], ["--overwrite"]):
        with pytest.raises(ValueError, match=r"holds files that no run recorded \(results.json; no run_files.json\)"):
            finetune.main(_argv("sst2", train, dev, "unused", str(theirs), *more))
    assert (theirs / "results.json").read_text() == "{}"
    # An empty or missing folder passes the checks (the run then stops at the patched preset check).
    (tmp_path / "empty").mkdir()
    for folder in ("empty", "missing/deeper"):
        with pytest.raises(AssertionError, match="went past its output checks"):
            finetune.main(_argv("sst2", train, dev, "unused", str(tmp_path / folder)))
    assert not os.path.exists(tmp_path / "missing")  # the probe removes the folders it made


def _unwritable(tmp_path):
    """A folder path this process cannot create: under a read-only folder, or (root ignores modes) /sys."""
    if os.geteuid() == 0:
        return "/sys/kbz-no-such-folder/out"
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return str(locked / "out")


def test_unwritable_output_and_export_dirs_are_refused_before_the_model_is_built(tmp_path, nothing_runs):
    train, dev, _ = _sst2(tmp_path)
    bad = _unwritable(tmp_path)
    with pytest.raises(ValueError, match=rf"--output-dir cannot be written: .*{bad}"):
        finetune.main(_argv("sst2", train, dev, "unused", bad))
    with pytest.raises(ValueError, match=rf"--export-dir cannot be written: .*{bad}"):
        finetune.main(_argv("sst2", train, dev, "unused", str(tmp_path / "out"), "--export-dir", bad))
    assert not os.path.exists(tmp_path / "out")
    # A file on the way is named as such.
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match=r"--output-dir is inside the file .*afile, not a folder"):
        finetune.main(_argv("sst2", train, dev, "unused", str(tmp_path / "afile" / "out")))


@pytest.mark.parametrize("export", ["run", "run/preset", "."])
def test_overlapping_output_and_export_dirs_are_refused_naming_both(tmp_path, nothing_runs, export):
    train, dev, _ = _sst2(tmp_path)
    out, served = str(tmp_path / "run"), os.path.normpath(str(tmp_path / export))
    with pytest.raises(ValueError, match=r"--output-dir and --export-dir (are the same folder|overlap).*"
                                         rf"--output-dir='{out}', --export-dir='{served}'"):
        finetune.main(_argv("sst2", train, dev, "unused", out, "--export-dir", served))


def test_export_dir_holding_other_files_or_an_export_is_refused(tmp_path):
    from keras_bert_zoo.finetuning.kind import checked_export_target
    from keras_bert_zoo.serving import export as export_lib

    served = tmp_path / "served"
    served.mkdir()
    (served / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"served holds files that are not an export of keras_bert_zoo \(notes.txt\).*"
                                         r"--export-dir MODEL_DIR/<version>"):
        checked_export_target(str(served), "--export-dir", overwrite=True)
    (served / "notes.txt").unlink()
    (served / "saved_model.pb").write_bytes(b"")
    (served / export_lib.RECORD).parent.mkdir(parents=True)
    (served / export_lib.RECORD).write_text("{}")  # what marks an export of ours
    with pytest.raises(ValueError, match=r"holds an earlier export. Pass --overwrite"):
        checked_export_target(str(served), "--export-dir")
    assert checked_export_target(str(served), "--export-dir", overwrite=True) == str(served)
    # TF Serving's model folder: the next version is added, the others left alone.
    model = tmp_path / "model"
    (model / "1").mkdir(parents=True)
    (model / "1" / "saved_model.pb").write_bytes(b"")
    assert checked_export_target(str(model), "--export-dir") == str(model / "2")


def test_an_interrupted_run_is_a_run_that_overwrite_removes(tmp_path):
    out = tmp_path / "run"
    plan = output_dirs.check_run_dir(str(out), "--output-dir", "finetune")
    output_dirs.claim_run_dir(plan, planned=["preset", "results.json"])
    (out / "preset").mkdir()  # what a killed run left, before its record was finished
    with pytest.raises(ValueError, match=r"holds an interrupted finetune run \(pid \d+ was killed .*it left preset\)"):
        output_dirs.check_run_dir(str(out), "--output-dir", "finetune")
    plan = output_dirs.check_run_dir(str(out), "--output-dir", "finetune", overwrite=True)
    output_dirs.claim_run_dir(plan)
    assert os.listdir(out) == ["run_files.json"]


# --- one line per user error ------------------------------------------------------------------------


def test_run_main_prints_a_user_error_as_one_line_and_exits_2(capsys, monkeypatch):
    monkeypatch.delenv("KERAS_BERT_ZOO_DEBUG", raising=False)

    def main(argv):
        assert "--debug" not in argv
        raise ValueError("--output-dir /x holds a previous run.\nPass --overwrite.")

    with pytest.raises(SystemExit) as exit_:
        run_main(main, ["--output-dir", "/x"], prog="tool.py")
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err == ("tool.py: error: --output-dir /x holds a previous run. Pass --overwrite. "
                   "(add --debug for the traceback)\n")

    def unreadable(argv):
        raise PermissionError(13, "Permission denied", "/data/train.tsv")

    with pytest.raises(SystemExit):
        run_main(unreadable, [], prog="tool.py")
    assert capsys.readouterr().err.startswith("tool.py: error: Permission denied: /data/train.tsv")
    # --debug, or the environment variable: the traceback (the error itself) comes through.
    with pytest.raises(ValueError, match="holds a previous run"):
        run_main(main, ["--debug"], prog="tool.py")
    monkeypatch.setenv("KERAS_BERT_ZOO_DEBUG", "1")
    with pytest.raises(ValueError):
        run_main(main, [], prog="tool.py")
    monkeypatch.delenv("KERAS_BERT_ZOO_DEBUG")

    def bug(argv):
        raise TypeError("unexpected")

    with pytest.raises(TypeError):  # a bug keeps its traceback
        run_main(bug, [])
    assert run_main(lambda argv: argv, ["--a", "--debug"]) == ["--a"]


# A tool whose main catches the Ctrl-C with a bare `except:` and raises another error, as TensorFlow's
# DType.max does when the interrupt lands while a layer is built (a make test run saw exit 1 and a
# "TypeError: Cannot find maximum value of <dtype: 'int32'>" traceback instead of exit 130).
SWALLOWED_CTRL_C = """
import os, signal, sys, time
sys.path.insert(0, {root!r})
from tools._startup import run_main

def main(argv):
    try:
        if argv != ["--no-ctrl-c"]:
            os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
    except:  # noqa: E722
        pass
    raise TypeError("Cannot find maximum value of <dtype: 'int32'>.")

run_main(main, prog="tool.py")
"""


@pytest.mark.parametrize("flags, code, ctrl_c_line", [([], 130, True), (["--debug"], 1, False),
                                                     (["--no-ctrl-c"], 1, False)])
def test_an_error_a_library_raised_in_place_of_a_ctrl_c_is_the_ctrl_c(tmp_path, flags, code, ctrl_c_line):
    script = tmp_path / "tool.py"
    script.write_text(SWALLOWED_CTRL_C.format(root=ROOT))
    done = subprocess.run([sys.executable, str(script), *flags], capture_output=True, text=True, timeout=60,
                          preexec_fn=sigint_at_default)
    assert done.returncode == code, done.stderr
    if ctrl_c_line:
        assert done.stderr.strip().splitlines() == ["tool.py: interrupted (Ctrl-C): stopped where it was; what it "
                                                    "wrote before is kept, and a rerun of the same command says what "
                                                    "that is (add --debug for the traceback)"]
    else:  # --debug, or no Ctrl-C at all: the error's own traceback
        assert "Traceback" in done.stderr and "TypeError: Cannot find maximum value" in done.stderr


@pytest.mark.parametrize("tool", OUR_TOOLS)
def test_every_tool_runs_its_main_through_run_main(tool):
    source = open(os.path.join(ROOT, "tools", f"{tool}.py"), encoding="utf-8").read()
    block = [node for node in ast.parse(source).body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
    assert len(block) == 1 and "run_main(main)" in ast.unparse(block[0]), tool


def test_finetune_cli_refusal_is_one_line_with_exit_2(tmp_path):
    train, dev, _ = _sst2(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    env.pop("KERAS_BERT_ZOO_DEBUG", None)
    proc = subprocess.run([sys.executable, "tools/finetune.py", *_argv("sst2", train, dev, "unused", str(theirs))],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and lines[0].startswith("finetune.py: error: --output-dir ") and str(theirs) in lines[0]
    assert (theirs / "notes.txt").read_text() == "mine"
