"""The pages of docs/ work as written, as tests/test_readme.py keeps the README working.

Every fenced ```python, ```bash or ```sh block of a page either runs here, in order, offline,
against tiny stand-ins (a preset of a few words, a Google and an HF checkpoint of the test
fixtures, small files), or is marked on the line before its fence with
`<!-- not run by tests/test_docs.py: REASON -->` (it needs the network, the user's own files or
minutes of training). A quoted name in a block that runs is replaced by its stand-in
(`Page.substitutions`) and `Page.prelude` defines what the page leaves to the reader (`ids`,
`train_texts`, ...). Every `python tools/X.py` or `python benchmarks/X.py` a page names, in a block
or inline, must exist and take each `--flag` the page gives it; every relative link must resolve.
"""

import dataclasses
import pathlib
import re

import keras
import pytest

from tests.test_readme import WORDS, write_tiny_preset
from tests.weights import weights_testlib as lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKER = re.compile(r"^<!-- not run by tests/test_docs\.py: (.+\S) -->$")
TINY = "'tiny_preset'"  # the stand-in preset, under the test's working directory
IDS = ("import numpy as np\nids = np.array([[2, 5, 6, 3, 0]]); seg = segments = np.zeros_like(ids)\n"
       "mask = (ids > 0).astype('int32')\n")


@dataclasses.dataclass
class Page:
    substitutions: dict = dataclasses.field(default_factory=dict)  # quoted name -> the stand-in
    prelude: str = "import keras_bert_zoo as kbz\n"  # what the page leaves to the reader
    expected: tuple = ()  # paths (under the working directory) the blocks must leave behind


PAGES = {
    "design.md": Page(
        {'"bert_base_en_uncased"': TINY},
        IDS + "texts_a = ['a good film', 'a dull movie', 'it is fine']\n"
              "texts_b = ['it is great', 'far too long', 'the plot is fine']\nlabels = [2, 0, 1]\n",
        ("export/squad/1/saved_model.pb",)),
    "finetuning.md": Page(
        {'"path/to/preset_or_hf_folder"': TINY},
        "import keras_bert_zoo as kbz\ntrain_texts = ['a great film', 'a dull movie', 'good and funny', 'far too long']\n"
        "train_labels = ['fresh', 'rotten', 'fresh', 'rotten']\n",
        ("runs/clf/README.md", "runs/clf/weights.safetensors")),
    "presets.md": Page(
        {'from_preset("bert_base_en_uncased")': f"from_preset({TINY})",
         '"path/uncased_L-12_H-768_A-12"': "'google_checkpoint'", '"path/hf_bert"': repr(lib.fixture_dir("gelu"))},
        IDS, ("my_preset/weights.safetensors",)),
    "text.md": Page(),
}


def blocks(page):
    """`(line, language, code, marker reason or None)` of each fenced block of `page`."""
    text = (DOCS / page).read_text(encoding="utf-8")
    found = []
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marked = MARKER.match(before)
        found.append((text.count("\n", 0, match.start()) + 1, match.group(1), match.group(2),
                      marked.group(1) if marked else None))
    return found


def code_blocks():
    return [(page.name, *block) for page in sorted(DOCS.glob("*.md")) for block in blocks(page.name)
            if block[1] in ("python", "bash", "sh")]


def test_every_block_runs_here_or_says_why_not():
    unaccounted = [f"docs/{page}:{line}" for page, line, language, _, reason in code_blocks()
                   if reason is None and (language != "python" or page not in PAGES)]
    assert not unaccounted, ("these blocks neither run in tests/test_docs.py (PAGES) nor are marked "
                             f"'<!-- not run by tests/test_docs.py: REASON -->': {unaccounted}")
    unlabelled = [f"docs/{page.name}:{line}" for page in DOCS.glob("*.md") for line, language, code, _ in
                  blocks(page.name) if not language and re.search(r"^\s*python (tools|benchmarks)/", code, re.M)]
    assert not unlabelled, f"commands in blocks without a language (label them ```bash): {unlabelled}"


@pytest.fixture
def fast_init(monkeypatch):
    """Zero initialisation for the BERT-Base-sized builds (architecture and counts unaffected)."""
    from keras_bert_zoo.layers import bert_attention, bert_embeddings, transformer_encoder
    from keras_bert_zoo.models import bert_backbone

    for module in (bert_attention, bert_embeddings, transformer_encoder, bert_backbone):
        monkeypatch.setattr(module, "bert_initializer", lambda: keras.initializers.Zeros())


def stand_ins(directory):
    """The tiny files the pages name: a preset, a Google checkpoint, a vocabulary, a corpus."""
    import keras_bert_zoo as kbz

    write_tiny_preset(directory / "tiny_preset")
    lib.make_google_dir("gelu", str(directory / "google_checkpoint"))
    kbz.save_vocabulary(kbz.text.google_reserved_tokens(num_unused=0) + WORDS, str(directory / "vocab.txt"))
    corpus = ["The plot is good and the film is great.", "It was far too long.", "", "A dull movie, an awful plot."]
    (directory / "corpus.txt").write_text("\n".join(corpus * 20) + "\n", encoding="utf-8")


@pytest.mark.parametrize("page", sorted(PAGES))
def test_python_blocks_run_in_order(page, tmp_path, monkeypatch, fast_init):
    monkeypatch.setenv("KERAS_BERT_ZOO_OFFLINE", "1")  # nothing may download
    monkeypatch.chdir(tmp_path)
    stand_ins(tmp_path)
    spec = PAGES[page]
    namespace = {"__name__": "docs"}
    exec(compile(spec.prelude, f"{page}'s prelude", "exec"), namespace)
    ran = 0
    for line, language, code, reason in blocks(page):
        if language != "python" or reason is not None:
            continue
        for name, stand_in in spec.substitutions.items():
            code = code.replace(name, stand_in)
        try:
            exec(compile(code, f"docs/{page}, block at line {line}", "exec"), namespace)
        except Exception as e:
            raise AssertionError(f"docs/{page}'s Python block at line {line} failed: {e!r}") from e
        ran += 1
    assert ran, f"docs/{page} has no Python block that runs"
    for path in spec.expected:
        assert (tmp_path / path).is_file(), f"docs/{page}'s blocks did not write {path}"


def commands(page):
    """Each `python tools/...` / `python benchmarks/...` command of a page (blocks and inline code)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    lines = []
    for _, language, code, _ in blocks(page):
        if language in ("bash", "sh", ""):
            lines += [line.split("  #")[0].strip() for line in code.replace("\\\n", " ").splitlines()]
    lines += re.findall(r"`([^`\n]+)`", text)
    return [line for line in lines if re.match(r"python (tools|benchmarks)/\w+\.py", line)]


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_named_tools_and_flags_exist(page):
    for line in commands(page):
        words = line.split()
        path = ROOT / words[1]
        assert path.is_file(), f"docs/{page} names {words[1]}, which does not exist"
        source = path.read_text(encoding="utf-8")
        for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
            if flag == "--help":  # argparse's own flag: the tool must build its parser with it
                assert "argparse.ArgumentParser(" in source and "add_help=False" not in source, (
                    f"{words[1]} has no argparse --help (docs/{page}: {line})")
                continue
            assert f'"{flag}"' in source, f"{words[1]} has no {flag} (docs/{page}: {line})"


@pytest.mark.parametrize("page", sorted(p.name for p in DOCS.glob("*.md")))
def test_links_resolve(page):
    text = (DOCS / page).read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)\)", text):
        if not re.match(r"\w+://", target):
            assert (DOCS / target).exists(), f"docs/{page} links {target}, which does not exist"
