"""WordNet word-definition pairs: read from a Debian package the test builds (the real
`wordnet-base` too, where `make install` downloaded it), split by word, labels 50/50."""

import io
import lzma
import tarfile

import numpy as np
import pytest

from keras_bert_zoo.data import definitions

NOUNS = [  # offset, lexfile, words (word, lex_id), gloss
    ("00000001", 5, [("dog", 0), ("domestic_dog", 0)], 'a member of the genus Canis; "the dog barked"'),
    ("00000002", 5, [("cat", 0)], "feline mammal usually having thick soft fur"),
    ("00000003", 6, [("house", 0)], "a dwelling that serves as living quarters for one or more families"),
    ("00000004", 6, [("river", 0)], "a large natural stream of water"),
    ("00000005", 4, [("walker", 0)], "a person who walks"),  # names its word's stem: left out
    ("00000006", 6, [("tree", 0)], "a tall perennial woody plant having a main trunk"),
    ("00000007", 6, [("stone", 0), ("rock", 0)], "a lump or mass of hard consolidated mineral matter"),
    ("00000008", 6, [("cloud", 0)], "a visible mass of water or ice particles suspended at a considerable altitude"),
]
VERBS = [("00000009", 38, [("run", 0)], "move fast by using one's feet"),
         ("00000010", 38, [("swim", 0)], "travel through water")]


def _data_file(rows, pos):
    lines = ["  1 This software and database is being provided to you, the LICENSEE, by"]
    for offset, lexfile, words, gloss in rows:
        entries = " ".join(f"{w} {lex_id:x}" for w, lex_id in words)
        lines.append(f"{offset} {lexfile:02d} {pos} {len(words):02x} {entries} 000 | {gloss}  ")
    return "\n".join(lines) + "\n"


def build_deb(path, rare=("tree",)):
    files = {"data.noun": _data_file(NOUNS, "n"), "data.verb": _data_file(VERBS, "v"), "data.adj": "", "data.adv": ""}
    counts = [f"{w}%{1 if pos == 'n' else 2}:{lexfile:02d}:{lex_id:02d}:: 1 {1 if w in rare else 5}"
              for rows, pos in ((NOUNS, "n"), (VERBS, "v")) for _, lexfile, words, _ in rows for w, lex_id in words]
    files["cntlist.rev"] = "\n".join(counts) + "\n"
    tar_bytes = io.BytesIO()
    with tarfile.open(fileobj=tar_bytes, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"./usr/share/wordnet/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    members = {"debian-binary": b"2.0\n", "control.tar.xz": lzma.compress(b""),
               "data.tar.xz": lzma.compress(tar_bytes.getvalue())}
    blob = b"!<arch>\n"
    for name, data in members.items():
        blob += f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode() + data
        blob += b"\n" if len(data) % 2 else b""
    path.write_bytes(blob)
    return str(path)


def test_pairs_are_split_by_word_balanced_and_never_name_their_word(tmp_path):
    deb = build_deb(tmp_path / "wordnet-base_3.0_all.deb")
    synsets, counts = definitions.read_wordnet(deb)
    assert ("n", "00000001", 5, (("dog", 0), ("domestic_dog", 0)), "a member of the genus Canis") in synsets
    assert counts[("tree", 1, 6, 0)] == 1
    seen = {}
    for split in definitions.SPLITS:
        (words, glosses), labels = definitions.definition_pairs(split, path=deb, dev_fraction=0.3, test_fraction=0.3)
        assert labels.dtype == "int32" and labels.mean() == 0.5 if len(labels) else True
        for word, gloss, label in zip(words, glosses, labels):
            own = {g for _, _, _, ws, g in synsets if word in {w for w, _ in ws}}
            assert (gloss in own) == bool(label), (word, gloss, label)
            assert word not in gloss.lower()
        seen[split] = set(words)
    assert not seen["train"] & seen["dev"] and not seen["train"] & seen["test"] and not seen["dev"] & seen["test"]
    every = set().union(*seen.values())
    assert "walker" not in every and "tree" not in every  # names itself / too rare (tagged once)
    assert {"dog", "cat", "run", "stone", "rock"} <= every


def test_a_missing_or_broken_package_names_the_command(tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get download wordnet-base"):
        definitions.read_wordnet(str(tmp_path / "none.deb"))
    (tmp_path / "bad.deb").write_bytes(b"not an archive")
    with pytest.raises(ValueError, match="Not a Debian package"):
        definitions.read_wordnet(str(tmp_path / "bad.deb"))


def test_the_real_wordnet_gives_thousands_of_common_words():
    try:
        deb = definitions.wordnet_deb()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    (words, glosses), labels = definitions.definition_pairs("test", path=deb)
    assert 3000 < len(labels) < 6000 and labels.mean() == 0.5
    index = words.index("dog") if "dog" in words else 0
    assert isinstance(glosses[index], str) and np.unique(labels).tolist() == [0, 1]
