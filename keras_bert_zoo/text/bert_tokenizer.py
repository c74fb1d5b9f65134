"""`BertTokenizer`: the original BERT WordPiece tokenizer as an in-graph Keras layer."""

import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.text import normalize as norm
from keras_bert_zoo.text import offsets as offsets_lib
from keras_bert_zoo.text.vocabulary import (
    load_vocabulary,
    save_vocabulary,
    validate_vocabulary,
    warn_on_case_mismatch,
)
from keras_bert_zoo.text.wordpiece import WordPiece, matchable_tokens
from keras_bert_zoo.utils import keras_internals

VOCABULARY_ASSET = "vocabulary.txt"
ERRORS = ("ignore", "strict")


def _is_empty_batch(inputs):
    """An empty Python list/tuple or NumPy array (any dtype): an empty batch of strings."""
    if isinstance(inputs, (list, tuple)):
        return len(inputs) == 0
    return isinstance(inputs, np.ndarray) and inputs.ndim == 1 and inputs.size == 0


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTokenizer(keras.layers.Layer):
    """The original BERT tokenizer (`FullTokenizer`), in-graph and id-for-id exact.

    Strings are cleaned (control/format characters dropped, whitespace unified), CJK
    ideographs split, optionally lower-cased and accent-stripped, split on whitespace and
    punctuation (Unicode P* and ASCII symbols), then WordPiece-tokenized by greedy
    longest match with `##` continuations; a word over `max_chars_per_word` characters or
    without a full cover becomes `[UNK]`. Everything is TensorFlow ops
    (tensorflow-text's `FastWordpieceTokenizer` for the WordPiece step), so the layer runs
    in `tf.data.Dataset.map` and in exported SavedModels.

    Differences from HF `tokenizers`' `BertWordPieceTokenizer`, where this layer follows
    the original: the word limit is 200 characters (HF: 100); text that looks like a
    special token ("[MASK]") is split like any text, not kept whole; lower-casing keeps
    the final sigma `ς`. Differences from tensorflow-text's own `lower_case=True` path:
    no NFKC case folding (`ß`, `…`, `ﬁ`, full-width letters stay as the original has them).

    Invalid UTF-8 bytes are dropped from the row that holds them (other rows are
    unchanged) or, with `errors="strict"`, raise a `ValueError` naming the rows (inside
    a traced graph such as `tf.data.map`: a `tf.errors.InvalidArgumentError`). Inputs
    are capped at `max_input_chars` characters before tokenizing, so a huge document
    costs bounded time and memory.

    Known limit: tensorflow-text's WordPiece op refuses vocabulary tokens over 256 UTF-8
    bytes; such tokens (none in Google's vocabularies) are never produced, with a warning.

    Args:
        vocabulary: str, list of str or None. Path to `vocab.txt` or the tokens (id =
            index). None leaves the layer empty until `set_vocabulary` or loading.
        lowercase: bool. Lower-case the input (uncased vocabularies). Defaults to True.
        strip_accents: bool or None. NFD + drop combining marks; None follows
            `lowercase`, as the original. Defaults to None.
        max_input_chars: int or None. Characters kept per input string. Defaults to
            1,000,000.
        max_chars_per_word: int. Longer words become `[UNK]`. Defaults to 200.
        errors: "ignore" or "strict". What invalid UTF-8 does. Defaults to "ignore".

    Call arguments:
        inputs: a string, a list of strings or a 1-D `tf.string` tensor. An empty list
            is an empty batch: the result has 0 rows.

    Returns:
        int32 `tf.RaggedTensor` (batch, None) of ids; a scalar input gives a 1-D tensor.

    Examples:
    >>> tokenizer = keras_bert_zoo.BertTokenizer("vocab.txt", lowercase=True)
    >>> tokenizer(["Héllo, world!", "The man eats."])
    <tf.RaggedTensor [[38, 6, 39, 7], [10, 18, 20, 21, 5]]>
    >>> [tokenizer.id_to_token(i) for i in [38, 6, 39, 7, 10, 18, 20, 21, 5]]
    ['hello', ',', 'world', '!', 'the', 'man', 'eat', '##s', '.']

    References:
        Devlin et al. 2018; google-research/bert `tokenization.py`.
    """

    def __init__(
        self,
        vocabulary=None,
        lowercase=True,
        strip_accents=None,
        max_input_chars=1_000_000,
        max_chars_per_word=200,
        errors="ignore",
        **kwargs,
    ):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        # Strings in, ragged ids out: skip Keras' float input conversion.
        keras_internals.accept_raw_inputs(self)
        self.built = True
        if errors not in ERRORS:
            raise ValueError(f"`errors` must be one of {ERRORS}. Received: errors={errors!r}.")
        for name, value in (("max_input_chars", max_input_chars), ("max_chars_per_word", max_chars_per_word)):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"`{name}` must be a positive int. Received: {name}={value!r}.")
        if max_chars_per_word is None:
            raise ValueError("`max_chars_per_word` must be a positive int. Received: None.")
        self.lowercase = bool(lowercase)
        self.strip_accents = strip_accents
        self.max_input_chars = max_input_chars
        self.max_chars_per_word = max_chars_per_word
        self.errors = errors
        self._tokens = None
        if isinstance(vocabulary, (str, os.PathLike)) and keras_internals.in_safe_mode():
            raise ValueError(
                f"Refusing to read the vocabulary file {os.fspath(vocabulary)!r} named in a "
                "config while loading in safe mode: a .keras file carries its vocabulary as "
                "an asset. Read the file yourself (keras_bert_zoo.load_vocabulary) and pass the "
                "tokens, or keep the vocabulary inside the .keras archive."
            )
        if vocabulary is not None:
            self.set_vocabulary(vocabulary)

    # Vocabulary ---------------------------------------------------------------------
    def set_vocabulary(self, vocabulary):
        """Sets the vocabulary (a `vocab.txt` path or a list of tokens) and builds tables."""
        if isinstance(vocabulary, (str, os.PathLike)):
            tokens = load_vocabulary(vocabulary)
        else:
            if isinstance(vocabulary, np.ndarray):
                vocabulary = [str(t) for t in vocabulary.tolist()]
            tokens = validate_vocabulary(vocabulary)
        warn_on_case_mismatch(tokens, self.lowercase)
        # Plain attributes: Keras' attribute tracking would wrap (and walk) 30k-entry containers.
        object.__setattr__(self, "_tokens", list(tokens))
        object.__setattr__(self, "_token_to_id", {t: i for i, t in enumerate(self._tokens)})
        self._wordpiece = WordPiece(
            matchable_tokens(self._tokens, self.max_chars_per_word),
            [t.startswith("##") for t in self._tokens],
            self._token_to_id["[UNK]"],
            self.max_chars_per_word,
        )
        self._vocab_tensor = tf.constant(self._tokens)
        # One traced graph per tokenizer: eager dispatch of ~40 small ops per batch would
        # cost more than the tokenization itself.
        spec = [tf.TensorSpec([None], tf.string)]
        self._ids_fn = tf.function(self._ids_graph, input_signature=spec, autograph=False)
        self._offsets_fn = tf.function(self._offsets_graph, input_signature=spec, autograph=False)

    def has_vocabulary(self):
        """Whether the tokenizer has a vocabulary (given, set, or loaded with the model)."""
        return self._tokens is not None

    def _check_vocabulary(self):
        if not self.has_vocabulary():
            raise ValueError(
                "The tokenizer has no vocabulary. Pass `vocabulary=` (a vocab.txt path or a "
                "list of tokens) or call `set_vocabulary`."
            )

    def get_vocabulary(self):
        """Returns the list of tokens (id = index)."""
        self._check_vocabulary()
        return list(self._tokens)

    def vocabulary_size(self):
        """Returns the number of tokens."""
        self._check_vocabulary()
        return len(self._tokens)

    def id_to_token(self, id):
        """Returns the token of an id; ValueError outside the vocabulary."""
        self._check_vocabulary()
        if not 0 <= int(id) < len(self._tokens):
            raise ValueError(f"`id` must be in [0, {len(self._tokens)}). Received: id={id}.")
        return self._tokens[int(id)]

    def token_to_id(self, token):
        """Returns the id of a token; ValueError if it is not in the vocabulary."""
        self._check_vocabulary()
        if token not in self._token_to_id:
            raise ValueError(f"`token` {token!r} is not in the vocabulary.")
        return self._token_to_id[token]

    # Tokenizing ---------------------------------------------------------------------
    def _prepare(self, inputs):
        """Converts inputs to a valid-UTF-8, capped 1-D string tensor; notes scalars."""
        self._check_vocabulary()
        if _is_empty_batch(inputs):
            # `[]` converts to float32; an empty list is an empty batch of strings.
            inputs = tf.constant([], tf.string)
        elif not isinstance(inputs, (tf.Tensor, tf.RaggedTensor)):
            inputs = tf.convert_to_tensor(inputs)
        if inputs.dtype != tf.string:
            raise ValueError(f"`inputs` must be strings. Received: dtype={inputs.dtype.name}.")
        rank = inputs.shape.rank
        if rank not in (0, 1):
            raise ValueError(
                "`inputs` must be a string or a 1-D batch of strings. "
                f"Received: shape={inputs.shape}. Flatten it first (e.g. tf.reshape(x, [-1]))."
            )
        scalar = rank == 0
        strings = tf.reshape(inputs, [-1])
        if self.errors == "strict":
            self._raise_on_invalid(strings)
        # Invalid bytes are dropped and inputs capped inside the graphs (only where needed).
        return strings, scalar

    def _raise_on_invalid(self, strings):
        bad = norm.invalid_utf8_rows(strings)
        if tf.executing_eagerly():
            rows = np.flatnonzero(bad.numpy()).tolist()
            if rows:
                raise ValueError(
                    f"`inputs` rows {rows} hold invalid UTF-8 (errors='strict'). Fix the "
                    "encoding or pass errors='ignore' to drop the bad bytes."
                )
        else:
            tf.debugging.assert_equal(
                tf.reduce_any(bad), False,
                message="An input row holds invalid UTF-8 (errors='strict').",
            )

    def _ids_graph(self, strings):
        normalized, ascii_rows = norm.prepare_and_normalize(
            strings, self.lowercase, self.strip_accents, self.max_input_chars
        )
        return self._wordpiece.tokenize(normalized, ascii_rows)

    def _offsets_graph(self, strings):
        strings = norm.cap_length(norm.drop_invalid_utf8(strings), self.max_input_chars)
        normalized = norm.normalize(strings, self.lowercase, self.strip_accents)
        ids, byte_begins, byte_ends = self._wordpiece.tokenize_with_offsets(normalized)
        starts = offsets_lib.char_starts_in_normalized(strings, self.lowercase, self.strip_accents)
        begins, ends = offsets_lib.bytes_to_chars(
            starts, tf.cast(byte_begins, tf.int64), tf.cast(byte_ends, tf.int64)
        )
        return ids, begins, ends

    def tokenize(self, inputs):
        """Strings -> int32 ragged ids (batch, tokens); a scalar gives 1-D ids."""
        strings, scalar = self._prepare(inputs)
        # Inside a graph (tf.data.map, an exported function) the ops are inlined: a nested
        # function call would count as "external state" and block iterator checkpoints.
        ids = self._ids_fn(strings) if tf.executing_eagerly() else self._ids_graph(strings)
        return ids[0] if scalar else ids

    def tokenize_with_offsets(self, inputs):
        """Ids plus character offsets of each token in the input string.

        Offsets count Unicode code points (Python `str` indices), so
        `text[begin:end]` is the span a token came from (`##` pieces point inside their
        word). For a row with invalid UTF-8 the offsets index the row without the bad
        bytes. Offsets stop at `max_input_chars`.

        Returns:
            (ids, begins, ends): int32 ragged ids and int64 ragged character offsets.
        """
        strings, scalar = self._prepare(inputs)
        fn = self._offsets_fn if tf.executing_eagerly() else self._offsets_graph
        ids, begins, ends = fn(strings)
        if scalar:
            return ids[0], begins[0], ends[0]
        return ids, begins, ends

    def detokenize(self, ids):
        """Ids -> strings: tokens joined by spaces, `##` continuations glued back."""
        self._check_vocabulary()
        if not isinstance(ids, (tf.Tensor, tf.RaggedTensor)):
            ids = tf.ragged.constant(ids) if isinstance(ids, list) and ids and isinstance(ids[0], list) else tf.convert_to_tensor(ids)
        tokens = tf.gather(self._vocab_tensor, ids)
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        return tf.strings.regex_replace(text, " ##", "")

    def call(self, inputs):
        return self.tokenize(inputs)

    # Special ids used by packers and preprocessors.
    @property
    def pad_token_id(self):
        return self.token_to_id("[PAD]")

    @property
    def unk_token_id(self):
        return self.token_to_id("[UNK]")

    @property
    def cls_token_id(self):
        return self.token_to_id("[CLS]")

    @property
    def sep_token_id(self):
        return self.token_to_id("[SEP]")

    @property
    def mask_token_id(self):
        return self.token_to_id("[MASK]")

    # Saving -------------------------------------------------------------------------
    def save_assets(self, dir_path):
        self._check_vocabulary()
        save_vocabulary(self._tokens, os.path.join(dir_path, VOCABULARY_ASSET))

    def load_assets(self, dir_path):
        self.set_vocabulary(load_vocabulary(os.path.join(dir_path, VOCABULARY_ASSET)))

    def compute_output_spec(self, inputs):
        return keras.KerasTensor(tuple(inputs.shape) + (None,), dtype="int32", ragged=True)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                # The vocabulary travels as an asset (`vocabulary.txt`), not in the config.
                "vocabulary": None,
                "lowercase": self.lowercase,
                "strip_accents": self.strip_accents,
                "max_input_chars": self.max_input_chars,
                "max_chars_per_word": self.max_chars_per_word,
                "errors": self.errors,
            }
        )
        return config
