"""The files the docstrings' `Examples:` read, so that `pytest --doctest-modules keras_bert_zoo`
runs them offline and fast.

Each example runs in a fresh copy of a small home directory (the working directory and
`$HOME`; presets are not downloaded: `KERAS_BERT_ZOO_OFFLINE=1`) holding:

- `vocab.txt`: a 79-token uncased WordPiece vocabulary (specials first, as Google's files);
- `tiny_preset/`: a preset saved by this package (`save_to_preset`) of a randomly
  initialised 2-layer, 16-wide `BertPretrainer` (backbone, MLM and NSP heads) with that
  vocabulary: what a registry name such as "bert_base_en_uncased" gives, small;
- `corpus.txt`: two documents in the pretraining input format;
- task files in their distributed layouts: `MRPC/{train,dev}.tsv`, `swag/val.csv`,
  `dev-v1.1.json`, `conll2003/eng.train` (its first sentence) and a tfds-prepared
  `~/tensorflow_datasets/glue/mrpc`.

The examples' outputs are what the code returns on these files; untrained models show
shapes and keys, not predictions. The namespace has `keras_bert_zoo`, `keras`, `np`, `tf`.
"""

import json
import os
import shutil

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert_zoo


WORDS = (
    ". , ! ? ' the a is was by it he she man someone eat ##s ##ing sit down fl ##ies rain car who "
    "wrote written ann great film dull and long hello world eu reject german call to boycott british "
    "lamb angela merkel visit ##ed paris planet earth sun of in on moon star sky blue night day this "
    "that good bad story shines orbits bright at dark are cold we see"
).split()

CORPUS = """The sun is a star.
The earth is a planet.
The moon orbits the earth.
It shines at night.

The sky is blue in the day.
The sky is dark at night.
We see a bright star.
"""

MRPC = (
    "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    "1\t1\t2\tThe man sits down.\tA man sits down.\n"
    "0\t3\t4\tThe sun is a star.\tThe moon is cold.\n"
    "1\t5\t6\tAnn wrote this story.\tThis story was written by Ann.\n"
)

SWAG = (
    ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3,label\n"
    "0,v1,1,A man sits down. He,A man sits down.,He,gen,eats.,flies.,rains.,is a car.,0\n"
    "1,v2,2,The sky is dark. It,The sky is dark.,It,gen,is night.,eats.,sits down.,flies.,0\n"
)

SQUAD = {
    "version": "1.1",
    "data": [{"title": "Story", "paragraphs": [{
        "context": "This story was written by Ann. It is a good story.",
        "qas": [{"id": "q1", "question": "Who wrote the story?",
                 "answers": [{"text": "Ann", "answer_start": 26}]}],
    }]}],
}

# CoNLL-2003's eng.train begins so (IOB1 tags; read_conll returns IOB2).
CONLL = """-DOCSTART- -X- -X- O

EU NNP I-NP I-ORG
rejects VBZ I-VP O
German JJ I-NP I-MISC
call NN I-NP O
to TO I-VP O
boycott VB I-VP O
British JJ I-NP I-MISC
lamb NN I-NP O
. . O O
"""


def _write(path, text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _store_tfds_mrpc(data_dir):
    import tensorflow_datasets as tfds  # lazy: tfds is heavy; only the GLUE tfds doctests need it

    features = tfds.features.FeaturesDict({
        "sentence1": tfds.features.Text(), "sentence2": tfds.features.Text(), "idx": tf.int32,
        "label": tfds.features.ClassLabel(names=["not_equivalent", "equivalent"]),
    })
    rows = [{"sentence1": "The man sits down.", "sentence2": "A man sits down.", "label": 1, "idx": 0},
            {"sentence1": "The sun is a star.", "sentence2": "The moon is cold.", "label": 0, "idx": 1}]
    tfds.dataset_builders.store_as_tfds_dataset(
        name="glue", version="2.0.0", config="mrpc", data_dir=data_dir, features=features,
        split_datasets={"validation": list(enumerate(rows))},
    )


@pytest.fixture(scope="session")
def _doctest_home(tmp_path_factory):
    home = str(tmp_path_factory.mktemp("doctest_home"))
    tokens = keras_bert_zoo.text.google_reserved_tokens(num_unused=0) + list(WORDS)
    keras_bert_zoo.save_vocabulary(tokens, os.path.join(home, "vocab.txt"))
    _write(os.path.join(home, "corpus.txt"), CORPUS)
    _write(os.path.join(home, "MRPC", "dev.tsv"), MRPC)
    _write(os.path.join(home, "MRPC", "train.tsv"), MRPC)
    _write(os.path.join(home, "swag", "val.csv"), SWAG)
    _write(os.path.join(home, "dev-v1.1.json"), json.dumps(SQUAD))
    _write(os.path.join(home, "conll2003", "eng.train"), CONLL)
    _store_tfds_mrpc(os.path.join(home, "tensorflow_datasets"))
    backbone = keras_bert_zoo.BertBackbone(len(tokens), num_layers=2, num_heads=2, hidden_dim=16,
                                           intermediate_dim=32, max_sequence_length=64)
    keras_bert_zoo.BertPretrainer(backbone).save_to_preset(os.path.join(home, "tiny_preset"),
                                                           vocabulary=os.path.join(home, "vocab.txt"))
    keras.utils.clear_session()
    return home


@pytest.fixture(autouse=True)
def _doctest_files(request, doctest_namespace, _doctest_home, tmp_path, monkeypatch):
    """Runs each example in a fresh copy of the home directory, offline."""
    home = str(tmp_path / "home")
    shutil.copytree(_doctest_home, home)
    monkeypatch.chdir(home)
    monkeypatch.setenv("HOME", home)
    monkeypatch.setenv("KERAS_BERT_ZOO_OFFLINE", "1")
    doctest_namespace.update(keras_bert_zoo=keras_bert_zoo, keras=keras, np=np, tf=tf)
