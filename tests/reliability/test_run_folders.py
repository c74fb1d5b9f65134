"""Issue 57, failures 1-3 and 13 and two weak cases: a fine-tuning or search run never deletes what it
reads or what it did not write, one run at a time writes a folder, an interrupted run is named for
what it is, and a bad path or Ctrl-C is one line. Real `tools/finetune.py` / `tools/tune.py`
processes and real signals; a tiny preset."""

import json
import os
import signal

import pytest

from keras_bert_zoo.utils import output_dirs
from tests.reliability.conftest import finetune_args, one_error_line, run, tool, wait_for


def _tree(path):
    return sorted(os.path.relpath(os.path.join(d, n), path) for d, dirs, names in os.walk(path) for n in dirs + names)


def _record(out):
    path = os.path.join(out, output_dirs.RUN_RECORD)
    return json.load(open(path)) if os.path.exists(path) else {}


@pytest.mark.early(80)
def test_f01_overwrite_never_deletes_the_preset_it_is_about_to_read(tmp_path, preset, sst2):
    """Was: `--preset runs/x/preset --output-dir runs/x --overwrite` deleted the whole earlier run, then
    'No such directory or file: runs/x/preset' (tools/tune.py the same, with a traceback)."""
    train, dev, _ = sst2
    out = str(tmp_path / "runs" / "x")
    from tools import finetune

    finetune.main(list(map(str, finetune_args(train, dev, preset, out))))  # the earlier run (in process: faster)
    before = _tree(out)
    for name, extra in (("finetune", []), ("tune", ["--grid", '{"learning_rate": [1e-3], "batch_size": [4], '
                                                             '"epochs": [1]}'])):
        args = finetune_args(train, dev, os.path.join(out, "preset"), out, "--overwrite", *extra)
        if name == "tune":  # the grid sets these
            for flag in ("--epochs", "--batch-size", "--learning-rate"):
                del args[args.index(flag):args.index(flag) + 2]
        code, _, err = run(name, *args)
        line = one_error_line(err, name)
        assert code == 2 and f"--preset {out}/preset is 'preset' of the previous run in {out}" in line, line
        assert "Copy it out first" in line
        assert _tree(out) == before  # nothing removed


def test_f02_a_killed_runs_record_does_not_claim_files_added_after_it(tmp_path, preset, sst2):
    """Was: after kill -9 the record said {"status": "running", "files": []} and --overwrite deleted the
    NOTES.md and my_data/ a user added later, saying they were 'listed in run_files.json'."""
    train, dev, _ = sst2
    out = tmp_path / "run"
    process = tool("finetune", *finetune_args(train, dev, preset, out, epochs=2000))
    wait_for(lambda: _record(out).get("status") == "running", what="the run's record")
    process.send_signal(signal.SIGKILL)
    process.wait()
    (out / "NOTES.md").write_text("my notes")
    (out / "my_data").mkdir()
    (out / "my_data" / "rows.tsv").write_text("mine")
    code, _, err = run("finetune", *finetune_args(train, dev, preset, out, "--overwrite"))
    line = one_error_line(err, "finetune")
    assert code == 2 and "holds files that its interrupted finetune run" in line and "NOTES.md, my_data" in line, line
    assert (out / "NOTES.md").read_text() == "my notes" and (out / "my_data" / "rows.tsv").read_text() == "mine"


def test_f03_two_runs_into_one_folder_the_second_is_refused_naming_the_firsts_pid(tmp_path, preset, sst2):
    """Was: two fine-tunes into one --output-dir both exited 0 'written to runs/c6' and one run was
    gone. Now the first holds the folder's lock; the second is refused at once, naming its PID."""
    train, dev, _ = sst2
    out = tmp_path / "c6"
    first = tool("finetune", *finetune_args(train, dev, preset, out, epochs=2000))
    try:
        wait_for(lambda: _record(out).get("status") == "running", what="the first run's record")
        code, _, err = run("finetune", *finetune_args(train, dev, preset, out, "--overwrite"))
        line = one_error_line(err, "finetune")
        assert code == 2 and f"is in use: pid {first.pid} (" in line and "Wait for that run to finish" in line, line
        assert first.poll() is None and _record(out)["pid"] == first.pid  # the first run goes on, its files kept
    finally:
        first.kill()
        first.wait()


def test_f13_a_run_killed_before_it_wrote_anything_is_replaced_without_overwrite(tmp_path, preset, sst2):
    """Was: a killed or interrupted run left a folder that needed --overwrite, with an empty list '()' in the
    message. A run that wrote nothing is no work to lose: the next run takes the folder and says so."""
    train, dev, _ = sst2
    out = tmp_path / "run"
    process = tool("finetune", *finetune_args(train, dev, preset, out, epochs=2000))
    wait_for(lambda: _record(out).get("status") == "running", what="the run's record")
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert sorted(os.listdir(out)) == [output_dirs.LOCK_FILE, output_dirs.RUN_RECORD]  # nothing written yet
    code, outs, err = run("finetune", *finetune_args(train, dev, preset, out))
    assert code == 0, err[-3000:]
    assert f"replacing the record of an interrupted finetune run (pid {process.pid}), which wrote nothing" in err
    assert "()" not in err and _record(out)["status"] == "complete"


def test_w_dangling_output_dir_link_is_named_as_a_link(tmp_path, preset, sst2):
    """Was: a dangling --output-dir symlink was called 'an existing file'."""
    train, dev, _ = sst2
    link = tmp_path / "out"
    os.symlink(tmp_path / "gone", link)
    code, _, err = run("finetune", *finetune_args(train, dev, preset, link))
    line = one_error_line(err, "finetune")
    assert code == 2 and f"--output-dir is a symbolic link to '{tmp_path / 'gone'}', which does not exist" in line
    assert "an existing file" not in line and os.path.islink(link) and not os.path.exists(tmp_path / "gone")


def test_w_ctrl_c_is_one_line_and_exit_130(tmp_path, preset, sst2):
    """Was: Ctrl-C printed a 40-line traceback."""
    train, dev, _ = sst2
    out = tmp_path / "run"
    process = tool("finetune", *finetune_args(train, dev, preset, out, epochs=2000))
    wait_for(lambda: _record(out).get("status") == "running", what="the run's record")
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130 and "Traceback" not in err, err[-3000:]
    lines = [line for line in err.splitlines() if "interrupted" in line]
    assert lines == ["finetune.py: interrupted (Ctrl-C): stopped where it was; what it wrote before is kept, and a "
                     "rerun of the same command says what that is (add --debug for the traceback)"]
