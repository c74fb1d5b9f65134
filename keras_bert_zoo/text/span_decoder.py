"""`SpanDecoder`: start/end logits of SQuAD windows -> answer text, in the graph."""

import keras
import tensorflow as tf

from keras_bert_zoo.text import normalize as norm
from keras_bert_zoo.text.span_windows import check_rules
from keras_bert_zoo.utils import keras_internals

WINDOW_FIELDS = ("token_starts", "token_ends", "max_context", "example_index")


# The decoding settings a span extractor and its SpanDecoder share (both configs hold them).
DECODER_SETTINGS = ("n_best_size", "max_answer_length", "null_score_diff_threshold", "rules")

@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SpanDecoder(keras.layers.Layer):
    """Picks each question's answer span over its windows, as the original `run_squad.py`.

    Per window, the `n_best_size` highest start and end logits are paired; a pair is
    valid when both tokens are context tokens, the start token is in its "max context"
    window, end >= start and the span has at most `max_answer_length` tokens. The best
    valid pair over all windows of a question (score = start + end logit; ties go to the
    earlier window, start rank, end rank, as the original's stable sort) is the answer:
    the exact substring of the context between the tokens' character offsets, so
    accents, case, CJK and whitespace come back as written.

    With `null_score_diff_threshold` set (SQuAD v2.0), the null score is `[CLS]`'s
    start + end logit, minimum over the question's windows; the answer is empty when
    null score - best score > threshold. Unset (v1.1), an answer is always given when a
    valid span exists.

    With `rules="hf_pipeline"` it decodes as HF's `pipeline("question-answering")` with
    `top_k=1, align_to_words=False` (transformers 4.57's `select_starts_ends`,
    `decode_spans` and `postprocess`): per window, start and end logits are soft-maxed
    over the context tokens and `[CLS]`; a span's score is p(start) x p(end) over
    context tokens, end >= start, at most `max_answer_length` tokens (every pair, so
    `n_best_size` is unused; no max-context rule); each window gives its best span; the
    scores of windows whose answers have the same lower-cased text are *added*, and the
    highest total wins (ties: the earlier window). The null score is the minimum over
    windows of p([CLS] start) x p([CLS] end), so `null_score_diff_threshold=0` is HF's
    `handle_impossible_answer=True`; `score` is the winning total probability.

    Args:
        n_best_size: int. Start and end candidates per window. Defaults to 20.
        max_answer_length: int. Longest answer in tokens. Defaults to 30.
        null_score_diff_threshold: float or None. The v2.0 threshold; None for v1.1.
            Defaults to None.
        rules: "original" (`run_squad.py`) or "hf_pipeline" (see above). Defaults to
            "original".

    Call arguments:
        start_logits: float (windows, sequence_length).
        end_logits: float (windows, sequence_length).
        windows: dict with `token_starts`, `token_ends`, `max_context` (windows, length)
            and `example_index` (windows,), from `SpanExtractorPreprocessor.windows`.
        contexts: (examples,) the context strings the windows came from.

    Returns:
        dict of (examples,) tensors: `answer_text` (string, "" for no answer),
        `answer_start`/`answer_end` (int32 character span, -1 for no answer), `score`
        (float32 best non-null score, -inf if no valid span), `null_score` and
        `score_diff` (null score - best score; what `tune_null_threshold` ranks).

    Examples:
    >>> tokenizer = keras_bert_zoo.BertTokenizer("vocab.txt")
    >>> preprocessor = keras_bert_zoo.SpanExtractorPreprocessor(tokenizer, 16, doc_stride=8, max_query_length=8)
    >>> contexts = ["It was written by Ann."]
    >>> windows = preprocessor.windows(["Who wrote it?"], contexts)
    >>> ids = windows["token_ids"][0].numpy().tolist()
    >>> logits = np.eye(16)[None, ids.index(tokenizer.token_to_id("ann"))]  # 1 at "ann", 0 elsewhere
    >>> answers = keras_bert_zoo.SpanDecoder()(logits, logits, windows, contexts)
    >>> answers["answer_text"].numpy(), answers["answer_start"].numpy(), answers["answer_end"].numpy()
    (array([b'Ann'], dtype=object), array([18], dtype=int32), array([21], dtype=int32))
    """

    def __init__(self, n_best_size=20, max_answer_length=30, null_score_diff_threshold=None, rules="original",
                 **kwargs):
        super().__init__(**kwargs)
        keras_internals.accept_raw_inputs(self)
        self.built = True
        for name, value in (("n_best_size", n_best_size), ("max_answer_length", max_answer_length)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}.")
        if null_score_diff_threshold is not None and not isinstance(null_score_diff_threshold, (int, float)):
            raise ValueError(
                "`null_score_diff_threshold` must be a number (SQuAD v2.0) or None (v1.1). "
                f"Received: null_score_diff_threshold={null_score_diff_threshold!r}."
            )
        self.rules = check_rules(rules)
        self.n_best_size = n_best_size
        self.max_answer_length = max_answer_length
        self.null_score_diff_threshold = (
            None if null_score_diff_threshold is None else float(null_score_diff_threshold)
        )

    def _window_best(self, start_logits, end_logits, windows):
        """Best valid (score, start, end) per window; score -inf where none is valid."""
        length = tf.shape(start_logits)[1]
        k = tf.minimum(self.n_best_size, length)
        start_values, start_index = tf.math.top_k(start_logits, k)  # (windows, k), lower index first on ties
        end_values, end_index = tf.math.top_k(end_logits, k)
        in_context = windows["token_starts"] >= 0  # (windows, length)
        may_start = in_context & (windows["max_context"] > 0)
        start_ok = tf.gather(may_start, start_index, batch_dims=1)[:, :, tf.newaxis]  # (windows, k, 1)
        end_ok = tf.gather(in_context, end_index, batch_dims=1)[:, tf.newaxis, :]  # (windows, 1, k)
        span = end_index[:, tf.newaxis, :] - start_index[:, :, tf.newaxis]  # (windows, k, k)
        valid = start_ok & end_ok & (span >= 0) & (span < self.max_answer_length)
        scores = start_values[:, :, tf.newaxis] + end_values[:, tf.newaxis, :]
        scores = tf.reshape(tf.where(valid, scores, -float("inf")), [tf.shape(scores)[0], -1])  # (windows, k*k)
        best = tf.reduce_max(scores, axis=1)
        # The first pair in (start rank, end rank) order that reaches the best score.
        pair = _first_index(scores, best)
        start = tf.gather(start_index, pair // k, batch_dims=1)
        end = tf.gather(end_index, pair % k, batch_dims=1)
        return best, start, end

    def _hf_window_best(self, start_logits, end_logits, windows):
        """HF's best span per window: (probability, start, end, null probability)."""
        in_context = windows["token_starts"] >= 0  # (windows, length)
        length = tf.shape(start_logits)[1]
        position = tf.range(length)
        kept = in_context | tf.equal(position, 0)[tf.newaxis, :]  # [CLS] stays in the softmax

        def probabilities(logits):
            return tf.nn.softmax(tf.where(kept, tf.cast(logits, tf.float32), -float("inf")), axis=-1)

        p_start, p_end = probabilities(start_logits), probabilities(end_logits)
        null = p_start[:, 0] * p_end[:, 0]
        p_start = tf.where(in_context, p_start, 0.0)
        p_end = tf.where(in_context, p_end, 0.0)
        # Band of the (start, end) product: end = start + d, 0 <= d < max_answer_length.
        ends = position[:, tf.newaxis] + tf.range(self.max_answer_length)[tf.newaxis, :]  # (length, band)
        inside = ends < length
        p_band = tf.gather(p_end, tf.minimum(ends, length - 1), axis=1)  # (windows, length, band)
        scores = p_start[:, :, tf.newaxis] * tf.where(inside, p_band, 0.0)
        scores = tf.reshape(scores, [tf.shape(scores)[0], -1])  # (start, d) order = HF's row-major (start, end)
        best = tf.reduce_max(scores, axis=1)
        pair = _first_index(scores, best)
        start = pair // self.max_answer_length
        return best, start, start + pair % self.max_answer_length, null

    def _hf_choice(self, start_logits, end_logits, windows, contexts, example, num_examples):
        """HF's cross-window choice: equal answer texts add their windows' scores."""
        best, start, end, null_window = self._hf_window_best(start_logits, end_logits, windows)
        valid = best > 0
        rows = tf.range(tf.shape(start)[0])
        char_start = tf.gather_nd(windows["token_starts"], tf.stack([rows, start], axis=1))
        char_end = tf.gather_nd(windows["token_ends"], tf.stack([rows, end], axis=1))
        text = tf.strings.substr(tf.gather(contexts, example), tf.maximum(char_start, 0),
                                 tf.maximum(char_end - char_start, 0), unit="UTF8_CHAR")
        # One group per (question, lower-cased answer text); HF sums Python floats (float64).
        key = tf.strings.join([tf.strings.as_string(example), tf.strings.lower(text, encoding="utf-8")], "\x00")
        _, group = tf.unique(key)
        scores = tf.cast(best, tf.float64)  # 0 where no valid span
        total = tf.gather(tf.math.unsorted_segment_sum(scores, group, tf.shape(key)[0]), group)
        total = tf.where(valid, total, -float("inf"))
        null = tf.math.unsorted_segment_min(tf.cast(null_window, tf.float64), example, num_examples)
        return total, start, end, null

    def call(self, start_logits, end_logits, windows, contexts):
        contexts = norm.drop_invalid_utf8(tf.reshape(tf.convert_to_tensor(contexts, tf.string), [-1]))
        num_examples = tf.shape(contexts)[0]
        windows = {key: tf.convert_to_tensor(windows[key]) for key in WINDOW_FIELDS}
        example = tf.cast(windows["example_index"], tf.int32)
        if self.rules == "hf_pipeline":
            best, start, end, null = self._hf_choice(start_logits, end_logits, windows, contexts, example,
                                                     num_examples)
        else:
            # float64: sums of two logits are exact, so ties and order match the original's Python floats.
            start_logits = tf.cast(start_logits, tf.float64)
            end_logits = tf.cast(end_logits, tf.float64)
            best, start, end = self._window_best(start_logits, end_logits, windows)
            null = tf.math.unsorted_segment_min(start_logits[:, 0] + end_logits[:, 0], example, num_examples)
        example_best = tf.math.unsorted_segment_max(best, example, num_examples)  # (examples,)
        window_ids = tf.range(tf.shape(example)[0])
        reaches = tf.equal(best, tf.gather(example_best, example))
        never = tf.shape(example)[0]
        window = tf.math.unsorted_segment_min(tf.where(reaches, window_ids, never), example, num_examples)
        found = (window < never) & (example_best > -float("inf"))
        window = tf.minimum(window, never - 1)
        position = tf.stack([window, tf.gather(start, window)], axis=1)
        char_start = tf.gather_nd(windows["token_starts"], position)
        position = tf.stack([window, tf.gather(end, window)], axis=1)
        char_end = tf.gather_nd(windows["token_ends"], position)
        score_diff = null - example_best
        answered = found
        if self.null_score_diff_threshold is not None:
            # Decided on the float32 difference it reports, which `tune_null_threshold` ranks:
            # a threshold equal to a question's reported difference answers that question.
            answered = found & (tf.cast(score_diff, tf.float32) <= self.null_score_diff_threshold)
        char_start = tf.cast(tf.where(answered, char_start, -1), tf.int32)
        char_end = tf.cast(tf.where(answered, char_end, -1), tf.int32)
        text = tf.strings.substr(contexts, tf.maximum(char_start, 0), tf.maximum(char_end - char_start, 0),
                                 unit="UTF8_CHAR")
        return {
            "answer_text": tf.where(answered, text, ""),
            "answer_start": char_start,
            "answer_end": char_end,
            "score": tf.cast(example_best, tf.float32),
            "null_score": tf.cast(null, tf.float32),
            "score_diff": tf.cast(score_diff, tf.float32),
        }

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in DECODER_SETTINGS})
        return config


def _first_index(values, target):
    """Index of the first entry of each row equal to `target` (ties: the earliest)."""
    columns = tf.shape(values)[1]
    index = tf.range(columns)[tf.newaxis, :]
    return tf.reduce_min(tf.where(tf.equal(values, target[:, tf.newaxis]), index, columns), axis=1)
