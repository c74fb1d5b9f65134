"""keras_bert_zoo.data: tf.data pipelines, pretraining TFRecords and the task files' readers.

`prepare_wikipedia` is not here: it needs gensim (the `demo` extra); import it from
`keras_bert_zoo.data.wikipedia`. The pretraining data report is
`keras_bert_zoo.data.pretraining_report.pretraining_report` (the module keeps its name).
"""

from keras_bert_zoo.data.beam_pipeline import write_pretraining_tfrecords_beam
from keras_bert_zoo.data.conll import conll_inputs, conll_labels, load_conll2003_tfds, read_conll
from keras_bert_zoo.data.documents import documents_dataset
from keras_bert_zoo.data.glue import glue_labels, read_glue, write_glue_submission
from keras_bert_zoo.data.glue_tfds import load_glue_tfds
from keras_bert_zoo.data.polarity import read_polarity
from keras_bert_zoo.data.pretraining import pretraining_dataset
from keras_bert_zoo.data.pretraining_report import format_report
from keras_bert_zoo.data.pretraining_writer import write_pretraining_tfrecords
from keras_bert_zoo.data.sentences import split_sentences
from keras_bert_zoo.data.squad import load_squad_tfds, read_squad
from keras_bert_zoo.data.swag import read_swag
from keras_bert_zoo.data.tfrecords import read_pretraining_tfrecords

__all__ = [
    # Pretraining: documents -> instances -> TFRecords.
    "documents_dataset",
    "format_report",
    "pretraining_dataset",
    "read_pretraining_tfrecords",
    "split_sentences",
    "write_pretraining_tfrecords",
    "write_pretraining_tfrecords_beam",
    # Task files and tfds.
    "conll_inputs",
    "conll_labels",
    "glue_labels",
    "load_conll2003_tfds",
    "load_glue_tfds",
    "load_squad_tfds",
    "read_conll",
    "read_glue",
    "read_polarity",
    "read_squad",
    "read_swag",
    "write_glue_submission",
]
