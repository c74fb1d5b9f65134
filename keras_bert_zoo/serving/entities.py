"""A token classifier's entities in the graph, for `export`: as `predict_entities` gives them, padded.

`predict_entities` maps window predictions to words (`word_predictions`) and reads the
words' tags as conlleval does (`tag_schemes.tag_chunks`), in NumPy and Python. Here the
same steps are TensorFlow ops: each word takes the label of its scored first piece; a
chunk starts and ends where `tag_schemes`' own start/end rules say (tabulated over every
pair of labels, so the rules are not written twice); its character span runs from the
first character of its first word to the last of its last. Results are padded to the
request's largest count, with `num_entities`. `TokenClassifierSpec` (the token
classifier's export) lives here, with the entities it serves.
"""

import numpy as np
import tensorflow as tf

from keras_bert_zoo.models import answer_names
from keras_bert_zoo.serving.spec_base import IDS, TextExamples, refuse_text_inputs, string_spec
from keras_bert_zoo.text import normalize as norm
from keras_bert_zoo.text import tag_schemes
from keras_bert_zoo.text.token_classifier_preprocessor import split_words


def chunk_tables(labels):
    """`(starts, ends, types)`: bool (C+1, C+1) tables of conlleval's chunk start/end rules
    for (previous label, label), index C an "O" outside the sentence; the type name of each label."""
    tags = [tag_schemes.split_tag(label) for label in labels] + [("O", "")]
    # conlleval's rules as tag_chunks applies them (one definition, in tag_schemes).
    starts = np.array([[tag_schemes.chunk_starts(p, c) for c in tags] for p in tags])
    ends = np.array([[tag_schemes.chunk_ends(p, c) for c in tags] for p in tags])
    return starts, ends, [kind for _, kind in tags]


def _char_offsets(texts, rows, byte_offsets):
    """Byte offsets into valid UTF-8 `texts[rows]` -> character offsets: the characters of the
    row that start before each offset, by a binary search of every character's start (linear
    memory; a prefix cut per entity would copy its text once per entity)."""
    _, starts = tf.strings.unicode_decode_with_offsets(texts, "UTF-8")  # ragged (batch, chars) bytes
    span = tf.reduce_max(tf.concat([tf.strings.length(texts), [0]], 0)) + 1
    keys = starts.value_rowids() * tf.cast(span, tf.int64) + starts.flat_values  # row-major: sorted
    found = tf.searchsorted(keys, rows * tf.cast(span, tf.int64) + byte_offsets, side="left",
                            out_type=tf.int64)
    return found - tf.gather(starts.row_starts(), rows)


def decode_entities(texts, windows, piece_labels, labels):
    """Entities of each text from the label ids of its windows' pieces.

    Args:
        texts: (batch,) valid UTF-8 strings, the inputs the windows were cut from.
        windows: `TokenClassifierPreprocessor.windows(texts)` (`example`, `word_index`).
        piece_labels: int (windows, length) label id per piece (length may be cut).
        labels: list of str, the task's tag names (id = index).

    Returns:
        dict: `entity_text` string, `entity_type` string, `start_char`, `end_char` int32,
        all (batch, max entities) padded with "" / -1; `num_entities` int32 (batch,).
    """
    starts_table, ends_table, types = chunk_tables(labels)
    outside = len(labels)
    words, byte_begins, byte_ends = split_words(texts)
    num_words = words.row_lengths()  # (batch,)
    batch = tf.shape(texts, out_type=tf.int64)[0]
    width = tf.reduce_max(tf.concat([num_words, [0]], 0))
    # Word tags: each scored first piece's label at (its input, its word); "O" elsewhere.
    cut = tf.shape(piece_labels)[1]
    word_index = tf.cast(windows["word_index"][:, :cut], tf.int64)
    rows, cols = tf.unstack(tf.where(word_index >= 0), axis=1)
    example = tf.gather(tf.cast(windows["example"], tf.int64), rows)
    positions = tf.stack([example, tf.gather_nd(word_index, tf.stack([rows, cols], 1))], axis=1)
    values = tf.cast(tf.gather_nd(piece_labels, tf.stack([rows, cols], 1)), tf.int64)
    tags = tf.tensor_scatter_nd_update(tf.fill([batch, width + 1], tf.constant(outside, tf.int64)),
                                       positions, values)  # (batch, words + 1): a closing "O"
    previous = tf.concat([tf.fill([batch, 1], tf.constant(outside, tf.int64)), tags[:, :-1]], axis=1)
    pair = tf.stack([previous, tags], axis=-1)
    starts = tf.gather_nd(tf.constant(starts_table), pair)  # (batch, words + 1)
    ends = tf.gather_nd(tf.constant(ends_table), pair)
    # A chunk opened at word s closes at the first end e > s in its row (the closing "O" ends any
    # chunk still open). Ends and starts as row-major keys row * (words + 1) + word: a binary search
    # of the sorted end keys finds each close in memory linear in the words (a words x words table
    # of "end after start" would take gigabytes for one long text).
    stride = width + 1
    end_rows, end_words = tf.unstack(tf.where(ends), axis=1)  # row-major, so the keys come sorted
    chunk_rows, first = tf.unstack(tf.where(starts), axis=1)  # row-major: each row's chunks in order
    close = tf.searchsorted(end_rows * stride + end_words, chunk_rows * stride + first, side="right",
                            out_type=tf.int64)
    last = tf.gather(end_words, close) - 1  # inclusive last word
    kind = tf.gather(tf.constant(types), tf.gather_nd(tags, tf.stack([chunk_rows, last], 1)))
    word_starts = tf.gather(words.row_starts(), chunk_rows)
    byte_begin = tf.gather(byte_begins.flat_values, word_starts + first)
    byte_end = tf.gather(byte_ends.flat_values, word_starts + last)
    start_char = _char_offsets(texts, chunk_rows, byte_begin)
    end_char = _char_offsets(texts, chunk_rows, byte_end)

    def padded(values, fill):
        ragged = tf.RaggedTensor.from_value_rowids(values, chunk_rows, nrows=batch)
        return ragged.to_tensor(default_value=fill)

    # Each text broadcast against its entities' byte spans: no copy of a text per entity.
    text = tf.strings.substr(texts[:, tf.newaxis], padded(byte_begin, 0), padded(byte_end - byte_begin, 0))
    return {
        "entity_text": text,
        "entity_type": padded(kind, ""),
        "start_char": padded(tf.cast(start_char, tf.int32), -1),
        "end_char": padded(tf.cast(end_char, tf.int32), -1),
        "num_entities": tf.cast(tf.math.bincount(tf.cast(chunk_rows, tf.int32), minlength=tf.cast(batch, tf.int32),
                                                 maxlength=tf.cast(batch, tf.int32)), tf.int32),
    }


def clean_texts(texts):
    """Invalid UTF-8 bytes dropped: offsets then index the text as a client decodes it."""
    return norm.drop_invalid_utf8(texts)


class TokenClassifierSpec(TextExamples):
    """`BertTokenClassifier`: `text` -> the entities, padded:
    `entity_text`, `entity_type`, `start_char`, `end_char` (batch, max entities) and
    `num_entities`, as `predict_entities`. Invalid UTF-8 bytes are dropped first, so the
    offsets index the text as a client decodes it. `ids` gives per-piece `label_id` and
    `probabilities`."""

    def __init__(self, task, text_inputs=None):
        refuse_text_inputs(text_inputs, "token-classifier", "`text`")
        if task.labels is None:
            raise ValueError(
                "A token-classifier export names its entities' types: set `task.labels` (the tag "
                "names, e.g. ['O', 'B-PER', 'I-PER']) before exporting. Received: labels=None."
            )
        self.task = task

    def text_specs(self):
        return {"text": string_spec("text")}

    def ids_specs(self):
        return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in IDS}

    def preprocess(self, preprocessor, raw):
        return preprocessor.windows(clean_texts(raw["text"]))

    def outputs(self, logits, raw, packed):
        answers = self.task.postprocess(logits)
        if raw is None:
            keys = (answer_names.LABEL_ID, answer_names.PROBABILITIES)
            return {key: tf.convert_to_tensor(answers[key]) for key in keys}
        return decode_entities(clean_texts(raw["text"]), packed, answers[answer_names.LABEL_ID], self.task.labels)
