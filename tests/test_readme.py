"""README.md works as written: its Python blocks run, in order, offline, against a tiny preset;
every tool, make target and docs link it names exists; it stays a front door (short, undated).

The README speaks of a real preset and the user's files. The test writes tiny stand-ins into a
temporary directory, runs there, and maps the README's names onto them with SUBSTITUTIONS below:
a quoted name in a Python block is replaced by the stand-in's path before the block runs. The
TSVs the README reads (`my_data/train.tsv`, `my_data/dev.tsv`) are written under their own names.
Bash blocks are not run (they would train a real BERT-Base); each `python tools/X.py` in them or in
inline code must exist and accept every `--flag` the README gives it, and each `make X` must be a Makefile target.
A block that imports TensorFlow and never names keras_bert_zoo is the README's serving process: it
runs in a fresh Python process, which must not import keras_bert_zoo.
"""

import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250

TINY_PRESET = "tiny_preset"  # the stand-in's directory, under the test's working directory
# README name (as quoted in its Python) -> the stand-in the test builds.
SUBSTITUTIONS = {'"bert_base_en_uncased"': repr(TINY_PRESET)}

WORDS = ("a an the and it is was film movie plot good great fine funny gripping dull boring bad awful far "
         "too long short").split()
POSITIVE = ["a good film", "a great movie", "it is fine", "the plot is great", "good and funny", "a gripping film"]
NEGATIVE = ["a bad film", "a dull movie", "it is awful", "the plot is boring", "far too long", "an awful film"]


def blocks(language):
    """`(line, code)` of every fenced block of `language` in the README, in order."""
    text = README.read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
        if match.group(1) == language:
            found.append((text.count("\n", 0, match.start()) + 1, match.group(2)))
    return found


def write_tiny_preset(directory):
    """A 2-layer, hidden-16 BERT whose vocabulary holds the README's words, saved as a preset."""
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS + [".", ","]
    backbone = BertBackbone(vocabulary_size=len(tokens), num_layers=2, num_heads=2, hidden_dim=16,
                            intermediate_dim=32, max_sequence_length=32)
    return backbone.save_to_preset(str(directory), vocabulary=tokens)


def write_sst2(directory):
    """The README's `my_data/train.tsv` and `dev.tsv`, in SST-2's layout."""
    directory.mkdir()
    rows = [(t, 1) for t in POSITIVE] + [(t, 0) for t in NEGATIVE]
    for name, part in (("train.tsv", rows), ("dev.tsv", rows[::3])):
        body = "".join(f"{text}\t{label}\n" for text, label in part)
        (directory / name).write_text("sentence\tlabel\n" + body, encoding="utf-8")


def serving_process(code):
    """A block that imports TensorFlow and never names our package: the README's serving process."""
    return "import tensorflow" in code and "kbz" not in code and "keras_bert_zoo" not in code


def run_alone(code, line):
    """Runs `code` in a fresh Python process here and checks it never imported keras_bert_zoo."""
    check = "\nimport sys\nassert 'keras_bert_zoo' not in sys.modules, 'the serving process imported keras_bert_zoo'\n"
    done = subprocess.run([sys.executable, "-c", code + check], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"README.md's block at line {line} failed in its own process:\n{done.stderr[-3000:]}"


def test_python_blocks_run_in_order(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_BERT_ZOO_OFFLINE", "1")  # nothing may download
    monkeypatch.chdir(tmp_path)
    write_tiny_preset(tmp_path / TINY_PRESET)
    write_sst2(tmp_path / "my_data")
    namespace = {"__name__": "readme"}
    python = blocks("python")
    assert python, "README.md has no ```python block"
    for line, code in python:
        for name, stand_in in SUBSTITUTIONS.items():
            code = code.replace(name, stand_in)
        if serving_process(code):
            run_alone(code, line)
            continue
        try:
            exec(compile(code, f"README.md, block at line {line}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"README.md's Python block at line {line} failed: {e!r}") from e
    # What the blocks promise: a preset and a SavedModel where they say.
    assert (tmp_path / "runs/my_task/preset/config.json").is_file()
    assert (tmp_path / "served/my_task/1/saved_model.pb").is_file()


def command_lines():
    """Each command of the README's bash blocks, continuation lines joined, comments cut."""
    lines = []
    for _, code in blocks("bash"):
        for line in code.replace("\\\n", " ").splitlines():
            line = line.split("  #")[0].strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def inline_code():
    """The README's inline code spans (`...`)."""
    return re.findall(r"`([^`\n]+)`", README.read_text(encoding="utf-8"))


def test_named_tools_and_flags_exist():
    commands = command_lines() + inline_code()
    tools = [line.split() for line in commands if line.startswith("python tools/")]
    assert tools, "README.md names no `python tools/...` command"
    for words in tools:
        path = ROOT / words[1]
        assert path.is_file(), f"README.md names {words[1]}, which does not exist"
        source = path.read_text(encoding="utf-8")
        for flag in (w for w in words[2:] if w.startswith("--")):
            assert f'"{flag}"' in source, f"{words[1]} has no {flag} (README.md: {' '.join(words)})"


def test_named_make_targets_exist():
    code = "\n".join(inline_code() + command_lines())
    targets = set(re.findall(r"(?:^|\s)make ([a-z][a-z-]*)", code, re.M))
    assert {"demo", "test"} <= targets
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in targets:
        assert re.search(rf"^{re.escape(target)}:", makefile, re.M), f"README.md names `make {target}`: no target"


def test_links_resolve():
    text = README.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not re.match(r"\w+://", target):
            assert (ROOT / target).exists(), f"README.md links {target}, which does not exist"


def test_front_door_is_short_and_undated():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; at most {MAX_LINES} (details go to docs/)"
    assert lines[2] == "```bash" and lines[5] == "```", "the README opens with its two commands"
    assert lines[3].startswith("make demo") and lines[4].startswith("make test"), "make demo, then make test"
    months = "January|February|March|April|May|June|July|August|September|October|November|December"
    dated = re.compile(rf"\b20\d\d-\d\d-\d\d\b|\b\d{{1,2}} ({months})\b|\b({months}) \d{{1,2}}\b")
    for number, line in enumerate(lines, 1):
        assert not dated.search(line), f"README.md:{number} is dated (measurement logs go to docs/measurements/)"

