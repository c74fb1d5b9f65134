"""Wikipedia dump → one sentence per line, blank line between articles."""

import bz2
import os

import pytest

from keras_bert_zoo.data import wikipedia

ARTICLE = """{{Infobox person|name=Ada|born=1815}}
'''Ada Lovelace''' was an English [[mathematician|mathematician and writer]]. She is known for her work on the [[Analytical Engine]] of Charles Babbage.

== Early life ==
[[File:Ada.jpg|thumb|A portrait of Ada]]
Ada was born in London in 1815 to Lord Byron and Anne Isabella Milbanke. Her mother promoted her interest in mathematics and logic from an early age.

* A list item that is long enough to count as a sentence if lists were kept.
{| class="wikitable"
|-
| A table cell that is long enough to count as a sentence if kept here.
|}
Short caption line.

== References ==
Everything after the references header is dropped even when it reads like prose.
"""

PAGE = """  <page>
    <title>{title}</title>
    <ns>{ns}</ns>
    <id>{id}</id>
    <revision><id>1</id><text xml:space="preserve">{text}</text></revision>
  </page>
"""


def _escape(text):
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _write_dump(path, pages):
    body = "".join(
        PAGE.format(title=t, ns=ns, id=i, text=_escape(x)) for i, (t, ns, x) in enumerate(pages)
    )
    xml = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">\n'
        "  <siteinfo><sitename>Wikipedia</sitename></siteinfo>\n" + body + "</mediawiki>\n"
    )
    with bz2.open(path, "wt", encoding="utf-8") as f:
        f.write(xml)
    return str(path)


def _article(i):
    return (
        f"'''Topic {i}''' is a subject studied by many people. "
        f"It was first described in the year {1900 + i} by a researcher.\n\n"
        f"The second paragraph of topic {i} has one more sentence in it. And a last one here."
    )


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Dr. Smith came home. He slept.", ["Dr. Smith came home.", "He slept."]),
        ("J. R. R. Tolkien wrote books. They sold.", ["J. R. R. Tolkien wrote books.", "They sold."]),
        ('He said "Stop." Then he left!', ['He said "Stop."', "Then he left!"]),
        ("It grew, e.g. Wheat and rye. Done?", ["It grew, e.g. Wheat and rye.", "Done?"]),
        ("Prices rose 3.5 percent in 1990. In 1991 they fell.",
         ["Prices rose 3.5 percent in 1990.", "In 1991 they fell."]),
        ("no terminal punctuation", ["no terminal punctuation"]),
        ("   ", []),
    ],
)
def test_split_sentences(text, expected):
    assert wikipedia.split_sentences(text) == expected


def test_split_sentences_rejects_non_string():
    with pytest.raises(ValueError, match="paragraph"):
        wikipedia.split_sentences(b"bytes.")


def test_article_keeps_only_prose_passages():
    assert wikipedia.article_sentences(ARTICLE) == [
        "Ada Lovelace was an English mathematician and writer.",
        "She is known for her work on the Analytical Engine of Charles Babbage.",
        "Ada was born in London in 1815 to Lord Byron and Anne Isabella Milbanke.",
        "Her mother promoted her interest in mathematics and logic from an early age.",
    ]


def test_redirect_has_no_sentences():
    assert wikipedia.article_sentences("#REDIRECT [[Computer accessibility]]") == []


def test_prepare_writes_original_format_and_skips_non_articles(tmp_path):
    pages = [("Topic 0", "0", _article(0)), ("Talk:Topic 0", "1", _article(99)),
             ("Redirected", "0", "#REDIRECT [[Topic 0]]"), ("Topic 1", "0", _article(1)),
             ("Stub", "0", "Too short.")]
    dump = _write_dump(tmp_path / "dump.xml.bz2", pages)
    stats = wikipedia.prepare_wikipedia(dump, str(tmp_path / "out"), num_workers=1, progress=False)
    assert stats["articles_kept"] == 2 and stats["sentences"] == 8
    with open(stats["train_files"][0], encoding="utf-8") as f:
        text = f.read()
    articles = text.strip("\n").split("\n\n")
    assert len(articles) == 2
    assert articles[1].split("\n") == [
        "Topic 1 is a subject studied by many people.",
        "It was first described in the year 1901 by a researcher.",
        "The second paragraph of topic 1 has one more sentence in it.",
        "And a last one here.",
    ]
    assert not [n for n in os.listdir(tmp_path / "out") if n.endswith(".tmp")]


def test_parallel_sharded_heldout_equals_serial(tmp_path):
    pages = [(f"Topic {i}", "0", _article(i)) for i in range(60)]
    dump = _write_dump(tmp_path / "dump.xml.bz2", pages)

    def read_all(files):
        return "".join(open(p, encoding="utf-8").read() for p in sorted(files))

    serial = wikipedia.prepare_wikipedia(
        dump, str(tmp_path / "a"), heldout_fraction=0.2, num_workers=1, progress=False)
    parallel = wikipedia.prepare_wikipedia(
        dump, str(tmp_path / "b"), heldout_fraction=0.2, num_workers=2, shard_bytes=2000,
        progress=False)
    assert len(parallel["train_files"]) > 1
    assert read_all(serial["train_files"]) == read_all(parallel["train_files"])
    assert read_all(serial["heldout_files"]) == read_all(parallel["heldout_files"])
    heldout = [t for t, _, _ in pages if wikipedia.is_heldout(t, 0.2)]
    assert 0 < len(heldout) < 60
    assert serial["heldout_files"] and read_all(serial["heldout_files"]).count("\n\n") == len(heldout)


def test_max_articles_and_argument_checks(tmp_path):
    dump = _write_dump(tmp_path / "d.xml.bz2", [(f"T{i}", "0", _article(i)) for i in range(5)])
    stats = wikipedia.prepare_wikipedia(dump, str(tmp_path / "o"), max_articles=2, progress=False)
    assert stats["articles_read"] == 2
    with pytest.raises(ValueError, match="heldout_fraction"):
        wikipedia.prepare_wikipedia(dump, str(tmp_path / "o"), heldout_fraction=1.5)
    with pytest.raises(ValueError, match="num_workers"):
        wikipedia.prepare_wikipedia(dump, str(tmp_path / "o"), num_workers=0)
    with pytest.raises(ValueError, match="input_path"):
        wikipedia.prepare_wikipedia(str(tmp_path / "missing.bz2"), str(tmp_path / "o"))


def test_sample_dump_inside_gensim(tmp_path):
    path = wikipedia.sample_dump_path()
    assert path.endswith(wikipedia.SAMPLE_DUMP) and os.path.isfile(path)
    stats = wikipedia.prepare_wikipedia(
        path, str(tmp_path), max_articles=1, num_workers=1, progress=False)
    with open(stats["train_files"][0], encoding="utf-8") as f:
        first = f.readline().strip()
    assert first == (
        "Anarchism is a political philosophy that advocates self-governed societies "
        "based on voluntary institutions."
    )
