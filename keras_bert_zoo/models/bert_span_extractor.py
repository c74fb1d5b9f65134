"""`BertSpanExtractor`: extractive question answering, SQuAD v1.1 and v2.0 (§4.2, §4.3)."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.metrics import squad_dev
from keras_bert_zoo.models import task_inputs as inputs_lib
from keras_bert_zoo.models import task_pipeline
from keras_bert_zoo.models import window_batches
from keras_bert_zoo.models import answer_names as names
from keras_bert_zoo.models.task import Task
from keras_bert_zoo.models.task_pipeline import answers_as_numpy
from keras_bert_zoo.models.task_inputs import packed_inputs
from keras_bert_zoo.text.span_decoder import DECODER_SETTINGS, WINDOW_FIELDS, SpanDecoder
from keras_bert_zoo.text.span_extractor_preprocessor import SpanExtractorPreprocessor, as_pairs

# `postprocess`'s answers (the decoder's keys), under `models/answer_names.py`'s names, as the export's.
ANSWER_KEYS = (names.ANSWER_TEXT, names.ANSWER_START, names.ANSWER_END, names.SCORE, names.NULL_SCORE, names.SCORE_DIFF)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertSpanExtractor(Task):
    """Start and end logits over every token; answers as exact spans of the context.

    One dense layer maps each `sequence_output` vector to a start and an end logit
    (the original `cls/squad/output_weights`/`output_bias`, HF's `qa_outputs`); the
    loss is the mean of the start and end cross-entropies over the window's positions
    (Keras' loss plumbing: two outputs, `loss_weights` 0.5 each). Training labels and
    windows come from `SpanExtractorPreprocessor` (doc stride, max context, `[CLS]` for
    a window without the answer); answers from `SpanDecoder` (n-best spans, the v2.0
    null score against `null_score_diff_threshold`). On raw text, `fit`'s and
    `evaluate`'s `batch_size` counts windows, as the original's `train_batch_size` and HF's
    `run_qa.py` (a long passage makes dozens: a step over all the windows of some questions
    would hold memory in proportion to the passages, `window_batches.py`); `predict`'s
    counts questions.

    Args:
        backbone: `keras_bert_zoo.BertBackbone`. Its pooler (`pooled_dense`), which no
            output reads, is set non-trainable.
        preprocessor: `keras_bert_zoo.text.SpanExtractorPreprocessor` or None.
        n_best_size: int. Start/end candidates per window. Defaults to 20.
        max_answer_length: int. Longest answer in tokens. Defaults to 30.
        null_score_diff_threshold: float or None. SQuAD v2.0: answer "" when the
            null score exceeds the best span's by more than this; None (v1.1) always
            answers. `tune_null_threshold` sets it. Defaults to None.
        rules: "original" (`run_squad.py`'s windows and decoding) or "hf_pipeline"
            (HF's `pipeline("question-answering")`'s: `doc_stride` as the windows'
            overlap, per-window probabilities, equal answers' scores added; see
            `SpanDecoder`), for the same answers as HF's pipeline on the same weights.
            The preprocessor must follow the same rules. As that decoding never reads a
            padded position, `from_preset` on a CPU then builds the encoder to skip the
            padding at inference (`skippable_padding`; padded positions' logits are the
            head's bias); training is unchanged. Defaults to "original".

    Call arguments:
        inputs: dict of `token_ids`, `segment_ids`, `padding_mask` (windows, seq).

    Returns:
        `[start_logits, end_logits]`, float32 (windows, seq) each. `predict` on raw
        `(questions, contexts)` returns the answers instead (see `predict`).

    Examples:
    >>> qa = keras_bert_zoo.BertSpanExtractor.from_preset("tiny_preset")
    >>> qa.compile()
    >>> data = keras_bert_zoo.data.read_squad("dev-v1.1.json")
    >>> history = qa.fit(data.x, data.y, epochs=1, verbose=0)
    >>> answers = qa.predict((["Who wrote it?"], ["It was written by Ann."]))
    >>> sorted(answers)
    ['answer_end', 'answer_start', 'answer_text', 'null_score', 'score', 'score_diff']
    >>> answers["answer_text"][0] in "It was written by Ann."
    True

    References:
        Devlin et al. 2018 §4.2-4.3; google-research/bert `run_squad.py`.
    """

    preprocessor_cls = SpanExtractorPreprocessor
    target_kind = "spans"  # `y`: each answer's character span in its context (`SquadData.y`), checked before fit
    default_sequence_length = 384

    def __init__(self, backbone, preprocessor=None, n_best_size=20, max_answer_length=30,
                 null_score_diff_threshold=None, rules="original", **kwargs):
        # The decoder checks the decoding arguments.
        decoder = SpanDecoder(n_best_size, max_answer_length, null_score_diff_threshold, rules)
        if preprocessor is not None and getattr(preprocessor, "rules", rules) != rules:
            raise ValueError(
                "The task and its preprocessor must follow the same `rules` (windows and decoding go "
                f"together). Received: rules={rules!r}, preprocessor.rules={preprocessor.rules!r}; build the "
                f"preprocessor with rules={rules!r}, or pass `rules` to `from_preset`, which sets both."
            )
        # === Layers ===
        policy = backbone.dtype_policy
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.span_dense = keras.layers.Dense(2, kernel_initializer=bert_initializer(), dtype=policy,
                                             name="span_logits")
        # === Config ===
        self.n_best_size = n_best_size
        self.max_answer_length = max_answer_length
        self.null_score_diff_threshold = decoder.null_score_diff_threshold
        self.rules = rules
        # The original's span loss is a softmax over every position, padding included (so are HF's
        # logits), and its n-best picks among them: "never". HF's decoding reads the logits of context
        # tokens and [CLS] only: "inference" under its rules (padded positions' logits are the head's bias).
        self.skippable_padding = "inference" if rules == "hf_pipeline" else "never"
        # No output reads `pooled_output`, so the pooler gets no gradient: frozen, it is out of
        # the trained set (else Keras warns "Gradients do not exist for variables [pooled_dense ...]"
        # at every fit, and the optimizer keeps slots for it). Its weights stay in the backbone,
        # loaded and saved with it (presets, Google and HF checkpoints).
        backbone.pooled_dense.trainable = False
        # === Functional model ===
        inputs = packed_inputs(backbone)
        sequence = backbone(dict(inputs))["sequence_output"]  # (windows, seq, hidden)
        logits = keras.ops.cast(self.span_dense(sequence), "float32")  # (windows, seq, 2)
        outputs = [logits[:, :, 0], logits[:, :, 1]]  # start, end: (windows, seq) each
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`Task.compile`; the `"auto"` loss is (start CE + end CE) / 2."""
        if isinstance(loss, str) and loss == "auto":
            kwargs.setdefault("loss_weights", [0.5, 0.5])
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def default_loss(self):
        return [keras.losses.SparseCategoricalCrossentropy(from_logits=True) for _ in range(2)]

    def _prepare(self, x, y=None, sample_weight=None, batch_size=None, shuffle=False, sort=False, buckets=None):
        """Raw questions with answers (`fit`, `evaluate`, validation data): steps of `batch_size`
        windows (`window_batches.training_dataset`); anything else as every task."""
        if not window_batches.applies(self, x, y):
            return super()._prepare(x, y, sample_weight, batch_size, shuffle, sort, buckets)
        if buckets is not None:
            raise ValueError(
                "`length_buckets` does not apply to a span extractor: its training batches are windows "
                f"of one length (sequence_length, cut to the longest). Received: length_buckets={buckets!r}."
            )
        preprocessor = self.preprocessor
        key = task_pipeline.settings_key(preprocessor)
        cached = self.__dict__.get("_window_functions")
        if cached is None or cached[0] != key:  # traced once per preprocessor and settings
            self.check_sequence_length()
            cached = (key, window_batches.window_functions(preprocessor))
            object.__setattr__(self, "_window_functions", cached)  # not a tracked Keras attribute
        return window_batches.training_dataset(cached[1], x, y, sample_weight, batch_size, shuffle), None

    def head_variables(self):
        """The head under `run_squad.py`'s names (HF `qa_outputs.*` maps onto them)."""
        return {"cls/squad/output_weights": self.span_dense.kernel, "cls/squad/output_bias": self.span_dense.bias}

    def decoder(self):
        """The `SpanDecoder` with this task's decoding settings."""
        return SpanDecoder(self.n_best_size, self.max_answer_length, self.null_score_diff_threshold, self.rules)

    def postprocess(self, outputs):
        """Logits and the windows' fields -> answers per question, in TF ops.

        Serving composes `preprocessor.windows(questions, contexts)` -> the model on
        its `token_ids`/`segment_ids`/`padding_mask` -> this, as `predict` does.

        Args:
            outputs: dict with `start_logits`, `end_logits`, the window fields of
                `SpanExtractorPreprocessor.windows` (`token_starts`, `token_ends`,
                `max_context`, `example_index`) and `contexts` (the context strings).

        Returns:
            `SpanDecoder`'s dict: `answer_text`, `answer_start`, `answer_end`,
            `score`, `null_score`, `score_diff` per question.
        """
        windows = {key: outputs[key] for key in WINDOW_FIELDS}
        return answers_as_numpy(
            self.decoder()(outputs["start_logits"], outputs["end_logits"], windows, outputs["contexts"]))

    def predict(self, x, batch_size=None, verbose="auto", steps=None, callbacks=None):
        """Answers raw `(questions, contexts)`; packed window ids give the logits.

        Args:
            x: a tuple `(questions, contexts)` of strings, a list of
                `(question, context)` pairs, or packed ids (a dict with `token_ids`).
            batch_size: int. Questions per step (each may have several windows), and the
                most windows one forward pass runs (a long passage's windows go through in
                batches of this size). Defaults to 32.

        Returns:
            For raw text, a dict of NumPy arrays, one entry per question:
            `answer_text` (str, "" for no answer), `answer_start`/`answer_end`
            (character span in the context, -1 for no answer), `score`,
            `null_score`, `score_diff`. For ids, `[start_logits, end_logits]`.
        """
        if self.preprocessor is None or inputs_lib.is_packed(x) or isinstance(x, tf.data.Dataset):
            return super().predict(x, batch_size=batch_size, verbose=verbose, steps=steps, callbacks=callbacks)
        pairs = as_pairs(x)
        self.checked_inputs(pairs, call="predict")  # strings, as many questions as contexts, at least one
        questions, contexts = (np.asarray(c, dtype=object).astype(str) for c in pairs)
        size = batch_size or inputs_lib.DEFAULT_BATCH_SIZE
        parts = []
        for begin in range(0, len(questions), size):
            # Eager windows reuse the tokenizer's traced graphs; the forward pass is
            # Keras' cached predict function; tracing all of it per call would cost more.
            batch_contexts = contexts[begin : begin + size]
            windows = self.preprocessor.windows(questions[begin : begin + size], batch_contexts)
            inputs, _, _ = task_pipeline.trim_to_longest({k: windows[k] for k in inputs_lib.SEQUENCE_KEYS})
            # At most `size` windows a forward pass: one long passage makes thousands of windows, and
            # the activations of all of them at once would hold memory in proportion to the passage.
            parts_logits = [self._window_logits({k: v[w : w + size] for k, v in inputs.items()})
                            for w in range(0, int(inputs["token_ids"].shape[0]), size)]
            start_logits, end_logits = (np.concatenate([p[i] for p in parts_logits]) for i in (0, 1))
            cut = start_logits.shape[1]
            outputs = {key: windows[key][:, :cut] if key != "example_index" else windows[key] for key in WINDOW_FIELDS}
            outputs.update(start_logits=start_logits, end_logits=end_logits, contexts=batch_contexts)
            parts.append(self.postprocess(outputs))
        answers = {key: np.concatenate([np.asarray(part[key]) for part in parts]) for key in ANSWER_KEYS}
        answers["answer_text"] = np.array([t.decode("utf-8") for t in answers["answer_text"]], dtype=object)
        return answers

    def _window_logits(self, inputs):
        """Start and end logits of a batch of windows, one graph for every batch shape.

        `predict_on_batch` retraces for a new number of windows or width until Keras'
        `reduce_retracing` generalises (seconds each time for a real model); raw-text batches
        change both, so on TensorFlow the forward pass is one `tf.function` with a
        `(None, None)` signature, traced once per task.
        """
        if keras.backend.backend() != "tensorflow":
            return self.predict_on_batch(inputs)
        forward = self.__dict__.get("_window_forward")
        if forward is None:
            spec = {key: tf.TensorSpec([None, None], tf.int32, name=key) for key in inputs_lib.SEQUENCE_KEYS}
            forward = tf.function(lambda x: tuple(self(x, training=False)), input_signature=[spec])
            object.__setattr__(self, "_window_forward", forward)  # not a tracked Keras attribute
        outputs = forward({key: tf.cast(inputs[key], tf.int32) for key in inputs_lib.SEQUENCE_KEYS})
        return tuple(np.asarray(o) for o in outputs)

    def predict_best_spans(self, x, batch_size=None):
        """`predict` without the null threshold: every question's best non-null span
        (what `tune_null_threshold` ranks; `with_null_threshold` applies one after)."""
        saved = self.null_score_diff_threshold
        self.null_score_diff_threshold = None
        try:
            return self.predict(x, batch_size=batch_size)
        finally:
            self.null_score_diff_threshold = saved

    def with_null_threshold(self, answers):
        """`predict_best_spans` answers -> this task's answers: "" (span -1) where the
        score difference exceeds `null_score_diff_threshold`, as `SpanDecoder` decides
        (`keras_bert_zoo.metrics.squad_dev.with_null_threshold`)."""
        return squad_dev.with_null_threshold(self, answers)

    def tune_null_threshold(self, dev, batch_size=None, answers=None):
        """Sets `null_score_diff_threshold` to the value that maximises dev F1 (SQuAD v2.0).

        As the official v2.0 script's `best_f1_thresh` (see
        `keras_bert_zoo.metrics.squad_dev.tune_null_threshold`). The value is stored in the
        task's config, so saved presets and exports use it.

        Args:
            dev: `keras_bert_zoo.data.squad.SquadData` (questions, contexts, gold answers).
            batch_size: int. Questions per step. Defaults to 32.
            answers: optional `predict_best_spans(dev.x)` (then nothing is predicted).

        Returns:
            dict with `best_f1` (percent) and `best_f1_thresh` (the value set).
        """
        return squad_dev.tune_null_threshold(self, dev, batch_size=batch_size, answers=answers)

    def squad_metrics(self, dev, version="v1.1", batch_size=None, answers=None):
        """The official evaluation of this task's answers on `dev`: see
        `keras_bert_zoo.metrics.squad_dev.squad_metrics` for the arguments and the metrics.

        Returns:
            `(metrics, predictions)`: the metrics dict and `{question id: answer text}`,
            the official `predictions.json`.
        """
        return squad_dev.squad_metrics(self, dev, version=version, batch_size=batch_size, answers=answers)

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in DECODER_SETTINGS})
        return config

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, doc_stride=None, max_query_length=None,
                    rules=None, **kwargs):
        """Builds the task from a preset (see `Task.from_preset`); a SQuAD head in the
        checkpoint (Google's `cls/squad/*`, HF's `qa_outputs.*`, ours) is loaded, and a
        saved task's window and decoding settings (`doc_stride`, `max_query_length`,
        `n_best_size`, `max_answer_length`, `null_score_diff_threshold`) come back.

        Args:
            preset: str. A registry name or alias, or a local directory / zip / checkpoint.
            load_weights: bool. Defaults to True.
            sequence_length: int or None. Window length; None is the saved task's, else 384.
            doc_stride: int or None. None: the saved task's, else 128.
            max_query_length: int or None. None: the saved task's, else 64, or half of
                `sequence_length` when less.
            rules: "original", "hf_pipeline" or None (the saved task's, else
                "original"): set on both the task and its preprocessor.
            **kwargs: the task's arguments (`n_best_size`, `max_answer_length`,
                `null_score_diff_threshold`) or backbone config overrides.
        """
        return super().from_preset(preset, load_weights=load_weights, sequence_length=sequence_length,
                                   doc_stride=doc_stride, max_query_length=max_query_length, rules=rules,
                                   **kwargs)
