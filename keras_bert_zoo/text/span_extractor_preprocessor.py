"""`SpanExtractorPreprocessor`: (question, context) -> doc-stride windows for SQuAD, in-graph.

The windows, "max context" flags and training labels follow the original
`run_squad.py` (`convert_examples_to_features`, `_improve_answer_span`,
`_check_is_max_context`) token for token; everything is TensorFlow ops on ragged
tensors, so it maps over a `tf.data.Dataset` and exports with the model.
"""

import keras
import tensorflow as tf

from keras_bert_zoo.text import normalize as norm
from keras_bert_zoo.text.span_windows import (
    answer_texts,
    answer_token_spans,
    check_rules,
    max_context_windows,
    window_geometry,
)
from keras_bert_zoo.text.tokenizer_preprocessor import TokenizerPreprocessor

@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SpanExtractorPreprocessor(TokenizerPreprocessor):
    """Turns (question, context) pairs into `[CLS] question [SEP] window [SEP]` rows.

    The question is truncated to `max_query_length` tokens; the context is cut into
    windows of `sequence_length - len(question) - 3` tokens that start every
    `doc_stride` tokens, exactly as the original `run_squad.py`, so a context of any
    length is covered (up to the tokenizer's `max_input_chars`). Training labels come
    from the answer's character span: the first and last tokens of the whitespace words
    it touches, narrowed to the first sub-span equal to the answer's own tokens (the
    original's `_improve_answer_span`, including its choice of the *first* equal span
    inside that word range); a window that does not hold the whole answer, and a
    question without one, points at `[CLS]` (position 0).

    Args:
        tokenizer: `keras_bert_zoo.text.BertTokenizer`.
        sequence_length: int. Tokens per window row. Defaults to 384.
        doc_stride: int. Context tokens between window starts. Defaults to 128.
        max_query_length: int. Question tokens kept. Defaults to 64.
        rules: "original" or "hf_pipeline". With "hf_pipeline", `doc_stride` means
            what it means to HF's QA pipeline and `run_qa.py` (HF tokenizers'
            `stride`): the context tokens consecutive windows *share*, so windows start
            every `window - doc_stride` tokens (~233 at 384/128 instead of 128), as HF's;
            `doc_stride` must then be less than `sequence_length - max_query_length - 3`.
            The question is still cut at `max_query_length` (HF's pipeline keeps
            longer questions whole). Defaults to "original".

    Call arguments:
        x: a tuple `(questions, contexts)`: strings or 1-D batches of strings.
        y: optional int (batch, 2) answer character spans `[start, end)` in the
            context; `start < 0` means "no answer".
        sample_weight: optional (batch,) weights, repeated for each window.

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask` (windows, length); with
        `y`, the tuple `(x, (start_positions, end_positions)[, sample_weight])`.
        `windows(questions, contexts)` returns these plus what decoding needs.

    Examples:
    >>> tokenizer = keras_bert_zoo.BertTokenizer("vocab.txt")
    >>> preprocessor = keras_bert_zoo.SpanExtractorPreprocessor(tokenizer, 16, doc_stride=8, max_query_length=8)
    >>> x = preprocessor((["Who wrote it?"], ["It was written by Ann."]))
    >>> [[tokenizer.id_to_token(i) for i in row] for row in x["token_ids"].numpy().tolist()]
    [['[CLS]', 'who', 'wrote', 'it', '?', '[SEP]', 'it', 'was', 'written', 'by', 'ann', '.', '[SEP]', '[PAD]', '[PAD]', '[PAD]']]

    References:
        google-research/bert `run_squad.py`.
    """

    settings = ("sequence_length", "doc_stride", "max_query_length", "rules")
    # The windows read the other settings at call time; the rules go with the task's decoder.
    fixed_settings = {
        "rules": "the task's decoder follows the same rules. Build the task with "
                 "`BertSpanExtractor.from_preset(..., rules=...)`, which sets both.",
    }

    def __init__(self, tokenizer, sequence_length=384, doc_stride=128, max_query_length=64, rules="original",
                 **kwargs):
        super().__init__(tokenizer, **kwargs)
        for name, value in (
            ("sequence_length", sequence_length),
            ("doc_stride", doc_stride),
            ("max_query_length", max_query_length),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}.")
        if sequence_length <= max_query_length + 3:
            raise ValueError(
                "`sequence_length` must exceed `max_query_length` + 3 ([CLS] and two [SEP]) so "
                f"every window holds context. Received: sequence_length={sequence_length}, "
                f"max_query_length={max_query_length}."
            )
        if check_rules(rules) == "hf_pipeline" and doc_stride >= sequence_length - max_query_length - 3:
            raise ValueError(
                "With rules='hf_pipeline', `doc_stride` is the overlap of consecutive windows and must be "
                "less than the context tokens a window holds, sequence_length - max_query_length - 3 = "
                f"{sequence_length - max_query_length - 3}. Received: doc_stride={doc_stride}."
            )
        self.sequence_length = sequence_length
        self.doc_stride = doc_stride
        self.max_query_length = max_query_length
        self.rules = rules

    def windows(self, questions, contexts, answer_spans=None):
        """Every window with the fields the model, the loss and the decoder need.

        Args:
            questions: string or 1-D batch of strings.
            contexts: as many context strings.
            answer_spans: optional int (batch, 2) character spans `[start, end)`.

        Returns:
            dict: int32 `token_ids`, `segment_ids`, `padding_mask`, `token_starts`,
            `token_ends` (character offsets of context tokens in their context, -1
            elsewhere), `max_context` (1 where this window may answer for the token),
            all (windows, sequence_length); int32 (windows,) `example_index` and, with
            spans, `start_positions`, `end_positions`.
        """
        questions = tf.reshape(tf.convert_to_tensor(questions, tf.string), [-1])
        contexts = tf.reshape(tf.convert_to_tensor(contexts, tf.string), [-1])
        # Offsets index the context without invalid bytes (as the tokenizer reports them).
        contexts = norm.drop_invalid_utf8(contexts)
        # One tokenizer call for questions, contexts (and answers): one copy of its graph to trace.
        texts = [questions, contexts] + ([] if answer_spans is None else [answer_texts(contexts, answer_spans)])
        ids, begins, ends = self.tokenizer.tokenize_with_offsets(tf.concat(texts, axis=0))
        n = tf.shape(questions)[0]
        query = ids[:n]  # truncated to max_query_length by the lengths below
        doc, begins, ends = ids[n : 2 * n], begins[n : 2 * n], ends[n : 2 * n]
        query_lengths = tf.minimum(tf.cast(query.row_lengths(), tf.int64), self.max_query_length)
        doc_lengths = tf.cast(doc.row_lengths(), tf.int64)
        max_doc = self.sequence_length - query_lengths - 3
        overlap = self.rules == "hf_pipeline"
        example, index, start, length, count = window_geometry(doc_lengths, max_doc, self.doc_stride, overlap)
        best = max_context_windows(doc_lengths, max_doc, self.doc_stride, count, overlap)

        # Every field is built densely on a (windows, sequence_length) grid of positions:
        # [CLS] at 0, the question at 1..q, [SEP] at q + 1, context from q + 2, [SEP] after it.
        position = tf.range(self.sequence_length, dtype=tf.int64)[tf.newaxis, :]  # (1, seq)
        query_length = tf.gather(query_lengths, example)[:, tf.newaxis]  # (windows, 1)
        in_query = (position >= 1) & (position <= query_length)
        doc_position = position - query_length - 2  # (windows, seq): index inside the window's context
        in_doc = (doc_position >= 0) & (doc_position < length[:, tf.newaxis])
        closing = tf.equal(doc_position, length[:, tf.newaxis])
        query_index = tf.gather(query.row_starts(), example)[:, tf.newaxis] + position - 1
        doc_index = tf.gather(doc.row_starts(), example)[:, tf.newaxis] + start[:, tf.newaxis] + doc_position

        def pick(values, inside, index, fill):
            """values[index] where `inside`, else `fill` (a sentinel keeps empty batches valid)."""
            values = tf.concat([tf.cast(values, tf.int64), [0]], axis=0)
            index = tf.where(inside, index, tf.size(values, out_type=tf.int64) - 1)
            return tf.where(inside, tf.gather(values, index), tf.constant(fill, tf.int64))

        cls, sep, pad = self.tokenizer.cls_token_id, self.tokenizer.sep_token_id, self.tokenizer.pad_token_id
        token_ids = pick(doc.flat_values, in_doc, doc_index, pad)
        token_ids = tf.where(in_query, pick(query.flat_values, in_query, query_index, pad), token_ids)
        token_ids = tf.where(tf.equal(position, 0), tf.constant(cls, tf.int64), token_ids)
        token_ids = tf.where(tf.equal(position, query_length + 1) | closing, tf.constant(sep, tf.int64), token_ids)
        best_window = pick(best.flat_values, in_doc, doc_index, -1)
        outputs = {
            "token_ids": token_ids,
            "segment_ids": in_doc | closing,
            "padding_mask": position < query_length + 3 + length[:, tf.newaxis],
            "token_starts": pick(begins.flat_values, in_doc, doc_index, -1),
            "token_ends": pick(ends.flat_values, in_doc, doc_index, -1),
            "max_context": in_doc & tf.equal(best_window, index[:, tf.newaxis]),
            "example_index": example,
        }
        outputs = {key: tf.cast(value, tf.int32) for key, value in outputs.items()}
        if answer_spans is not None:
            token_start, token_end, has_answer = (
                tf.gather(v, example) for v in answer_token_spans(contexts, doc, begins, answer_spans, ids[2 * n :])
            )
            inside = has_answer & (token_start >= start) & (token_end <= start + length - 1)
            shift = tf.gather(query_lengths + 2, example) - start  # token index -> row position
            outputs["start_positions"] = tf.cast(tf.where(inside, token_start + shift, 0), tf.int32)
            outputs["end_positions"] = tf.cast(tf.where(inside, token_end + shift, 0), tf.int32)
        return outputs

    def call(self, x, y=None, sample_weight=None):
        questions, contexts = as_pairs(x)
        features = self.windows(questions, contexts, y)
        inputs = {key: features[key] for key in ("token_ids", "segment_ids", "padding_mask")}
        if y is None:
            return inputs
        labels = (features["start_positions"], features["end_positions"])
        if sample_weight is not None:
            sample_weight = tf.gather(tf.reshape(sample_weight, [-1]), features["example_index"])
        return keras.utils.pack_x_y_sample_weight(inputs, labels, sample_weight)

    def compute_output_spec(self, x, y=None, sample_weight=None):
        spec = keras.KerasTensor((None, self.sequence_length), dtype="int32")
        inputs = {key: spec for key in ("token_ids", "segment_ids", "padding_mask")}
        if y is None:
            return inputs
        label = keras.KerasTensor((None,), dtype="int32")
        weight = None if sample_weight is None else keras.KerasTensor((None,), dtype="float32")
        return keras.utils.pack_x_y_sample_weight(inputs, (label, label), weight)

    @classmethod
    def from_preset(cls, preset, sequence_length=384, doc_stride=128, max_query_length=None, lowercase=None,
                    rules="original", **kwargs):
        """Builds the preprocessor with the preset's vocabulary and casing.

        Args:
            preset: str. A registry name/alias or a local checkpoint directory or zip.
            sequence_length: int. Defaults to 384.
            doc_stride: int. Defaults to 128.
            max_query_length: int or None. None: 64 (the original's), or half of
                `sequence_length` when that is less.
            lowercase: bool or None. None uses the preset's casing (see
                `BertPreprocessor.from_preset`).
            rules: "original" or "hf_pipeline" (see the class). Defaults to "original".
            **kwargs: more `BertTokenizer` arguments (`truncate` is accepted and unused).
        """
        kwargs.pop("truncate", None)  # windows never truncate a context
        if max_query_length is None:
            max_query_length = min(64, sequence_length // 2)
        tokenizer = cls.preset_tokenizer(preset, lowercase, **kwargs)
        return cls(tokenizer, sequence_length, doc_stride, max_query_length, rules=rules)


def as_pairs(x):
    """`(questions, contexts)` or a list of `(question, context)` pairs -> two batches; one
    `(question, context)` pair of strings is a batch of one."""
    if isinstance(x, list) and x and all(isinstance(item, (tuple, list)) and len(item) == 2 for item in x):
        x = tuple(list(column) for column in zip(*x))
    if isinstance(x, tuple) and len(x) == 2 and all(isinstance(item, (str, bytes)) for item in x):
        x = ([x[0]], [x[1]])
    if not isinstance(x, tuple) or len(x) != 2:
        raise ValueError(
            "`x` must be a tuple `(questions, contexts)` or a list of (question, context) pairs. "
            f"Received: x of type {type(x).__name__}."
        )
    return x


