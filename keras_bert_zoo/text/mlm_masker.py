"""Masked-LM masking (original `create_masked_lm_predictions`), in-graph and stateless."""

import keras
import tensorflow as tf


def _check_rate(name, value):
    if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` must be a number in [0, 1]. Received: {name}={value!r}.")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MLMMasker(keras.layers.Layer):
    """Chooses masked-LM targets and corrupts them, as the original BERT does.

    Per row: candidates are all real positions except `unselectable_token_ids`
    ([CLS], [SEP], [PAD]); `num_to_predict = min(max_predictions,
    max(1, round(length * mask_selection_rate)))` where `length` counts every real
    position ([CLS]/[SEP] included, Python's round-half-even). Candidate groups are
    visited in a random order and taken while they fit in `num_to_predict` (whole-word
    mode: a `##` piece joins the preceding candidate's group). Each chosen piece becomes
    `[MASK]` with probability `mask_token_rate`, a uniformly random vocabulary id with
    `random_token_rate`, and stays unchanged otherwise. The original draws this per
    piece even in whole-word mode; `per_word_replacement=True` draws it once per word.

    All randomness is `tf.random.stateless_*` from the `seed` call argument, so the same
    seed gives the same masks and a `tf.data` pipeline using it can be checkpointed.

    Args:
        vocabulary_size: int. Random replacements are drawn from `[0, vocabulary_size)`.
        mask_token_id: int. Id of `[MASK]`.
        unselectable_token_ids: list of int. Ids never masked. Defaults to `[0]`.
        mask_selection_rate: float. Defaults to 0.15.
        max_predictions: int. Cap on predictions per row (output width). Defaults to 20.
        mask_token_rate: float. Defaults to 0.8.
        random_token_rate: float. Defaults to 0.1.
        continuation_token_ids: list of int or None. Ids of `##` pieces (whole-word mode).
        whole_word: bool. Whole-word masking. Defaults to False.
        per_word_replacement: bool. One 80/10/10 draw per word instead of per piece.

    Call arguments:
        token_ids: int tensor `(batch, seq)` or `(seq,)`, or a `tf.RaggedTensor`.
        padding_mask: optional int/bool tensor like `token_ids`; 1 = real position.
            Defaults to all real (ragged: the row lengths).
        seed: int tensor of shape `(2,)`. Defaults to `[0, 0]`.

    Returns:
        Dict: `token_ids` (corrupted, same shape), `mask_positions` int32
        `(batch, max_predictions)` ascending and 0-padded, `mlm_ids` int32 (original ids,
        0-padded), `mlm_weights` float32 (1.0 real, 0.0 padding).

    Examples:
    >>> masker = keras_bert_zoo.MLMMasker(30, mask_token_id=4, unselectable_token_ids=[0, 2, 3],
    ...                                   max_predictions=3)
    >>> out = masker(tf.constant([[2, 10, 11, 12, 3]]), seed=tf.constant([1, 2]))
    >>> {key: value.numpy().tolist() for key, value in out.items()}
    {'mask_positions': [[1, 0, 0]], 'mlm_ids': [[10, 0, 0]], 'mlm_weights': [[1.0, 0.0, 0.0]], 'token_ids': [[2, 17, 11, 12, 3]]}

    References:
        google-research/bert `create_pretraining_data.py`.
    """

    def __init__(
        self,
        vocabulary_size,
        mask_token_id,
        unselectable_token_ids=(0,),
        mask_selection_rate=0.15,
        max_predictions=20,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        continuation_token_ids=None,
        whole_word=False,
        per_word_replacement=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(vocabulary_size, int) or vocabulary_size < 1:
            raise ValueError(f"`vocabulary_size` must be a positive int. Received: vocabulary_size={vocabulary_size!r}.")
        if not isinstance(mask_token_id, int) or not 0 <= mask_token_id < vocabulary_size:
            raise ValueError(
                f"`mask_token_id` must be an id in [0, vocabulary_size={vocabulary_size}). "
                f"Received: mask_token_id={mask_token_id!r}."
            )
        if not isinstance(max_predictions, int) or max_predictions < 1:
            raise ValueError(f"`max_predictions` must be a positive int. Received: max_predictions={max_predictions!r}.")
        for name in ("mask_selection_rate", "mask_token_rate", "random_token_rate"):
            _check_rate(name, locals()[name])
        if mask_token_rate + random_token_rate > 1.0:
            raise ValueError(
                "`mask_token_rate + random_token_rate` must be <= 1. Received: "
                f"mask_token_rate={mask_token_rate}, random_token_rate={random_token_rate}."
            )
        if whole_word and not continuation_token_ids:
            raise ValueError(
                "`whole_word=True` needs `continuation_token_ids` (the ids of the `##` pieces). "
                f"Received: continuation_token_ids={continuation_token_ids!r}. Use `MLMMasker.from_vocabulary`."
            )
        self.vocabulary_size = vocabulary_size
        self.mask_token_id = mask_token_id
        self.unselectable_token_ids = [int(i) for i in unselectable_token_ids]
        self.mask_selection_rate = float(mask_selection_rate)
        self.max_predictions = max_predictions
        self.mask_token_rate = float(mask_token_rate)
        self.random_token_rate = float(random_token_rate)
        self.continuation_token_ids = [int(i) for i in continuation_token_ids] if continuation_token_ids else None
        self.whole_word = bool(whole_word)
        self.per_word_replacement = bool(per_word_replacement)
        is_cont = [False] * vocabulary_size
        for i in self.continuation_token_ids or []:
            if 0 <= i < vocabulary_size:
                is_cont[i] = True
        self._is_continuation = tf.constant(is_cont)

    @classmethod
    def from_vocabulary(cls, vocabulary, **kwargs):
        """Builds a masker from a token list: [MASK], specials and `##` pieces looked up.

        Args:
            vocabulary: list of str (e.g. `tokenizer.get_vocabulary()`).
            **kwargs: other constructor arguments.
        """
        index = {t: i for i, t in enumerate(vocabulary)}
        missing = [t for t in ("[MASK]", "[CLS]", "[SEP]", "[PAD]") if t not in index]
        if missing:
            raise ValueError(f"`vocabulary` lacks the special tokens {missing}. Received {len(vocabulary)} tokens.")
        kwargs.setdefault("unselectable_token_ids", [index["[PAD]"], index["[CLS]"], index["[SEP]"]])
        kwargs.setdefault("continuation_token_ids", [i for i, t in enumerate(vocabulary) if t.startswith("##")])
        return cls(len(vocabulary), index["[MASK]"], **kwargs)

    def get_config(self):
        config = super().get_config()
        for name in (
            "vocabulary_size", "mask_token_id", "unselectable_token_ids", "mask_selection_rate",
            "max_predictions", "mask_token_rate", "random_token_rate", "continuation_token_ids",
            "whole_word", "per_word_replacement",
        ):
            config[name] = getattr(self, name)
        return config

    def compute_output_spec(self, token_ids, padding_mask=None, seed=None):
        shape = token_ids.shape[:-1] + (self.max_predictions,)
        return {
            "token_ids": keras.KerasTensor(token_ids.shape, "int32"),
            "mask_positions": keras.KerasTensor(shape, "int32"),
            "mlm_ids": keras.KerasTensor(shape, "int32"),
            "mlm_weights": keras.KerasTensor(shape, "float32"),
        }

    def call(self, token_ids, padding_mask=None, seed=None):
        if isinstance(token_ids, tf.RaggedTensor):
            padding_mask = tf.ones_like(token_ids, tf.int32).to_tensor()
            token_ids = token_ids.to_tensor()
        ids = tf.cast(token_ids, tf.int32)
        single = ids.shape.rank == 1
        if single:
            ids = ids[None]
            padding_mask = None if padding_mask is None else tf.reshape(padding_mask, [1, -1])
        valid = tf.ones_like(ids, tf.bool) if padding_mask is None else tf.cast(padding_mask, tf.bool)
        seed = tf.zeros([2], tf.int32) if seed is None else tf.cast(seed, tf.int32)
        out = self._mask(ids, valid, seed)
        if single:
            out = {k: v[0] for k, v in out.items()}
        return out

    def _groups(self, ids, candidate):
        """Group index of every candidate position (-1 elsewhere) and group starts."""
        if self.whole_word:
            is_cont = tf.gather(self._is_continuation, tf.clip_by_value(ids, 0, self.vocabulary_size - 1))
            # The original joins a `##` piece to the last candidate group, even across [SEP].
            seen = tf.cumsum(tf.cast(candidate, tf.int32), axis=1, exclusive=True) > 0
            starts = candidate & ~(is_cont & seen)
        else:
            starts = candidate
        group = tf.where(candidate, tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1, -1)
        return group, starts

    def _select_groups(self, ids, candidate, score, num_to_predict):
        """Whole-word selection: visit groups in random order, take each that still fits."""
        batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]
        group, starts = self._groups(ids, candidate)
        num_groups = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
        col = tf.range(seq)[None]
        order = tf.argsort(tf.where(col < num_groups[:, None], score, 2.0), axis=1, stable=True)
        flat_group = tf.where(candidate, group + tf.range(batch)[:, None] * seq, batch * seq)
        sizes = tf.math.unsorted_segment_sum(tf.ones_like(ids), flat_group, batch * seq + 1)[:-1]
        sizes = tf.gather(tf.reshape(sizes, [batch, seq]), order, batch_dims=1)  # in visiting order

        def step(acc, size):
            fits = (acc[0] + size <= num_to_predict) & (size > 0)
            return acc[0] + tf.where(fits, size, 0), fits

        init = (tf.zeros_like(num_to_predict), tf.zeros_like(num_to_predict, tf.bool))
        _, accepted = tf.scan(step, tf.transpose(sizes), initializer=init)  # (groups, batch)
        # Back from visiting order to group index.
        accepted = tf.gather(tf.transpose(accepted), tf.argsort(order, axis=1), batch_dims=1)
        return group, candidate & tf.gather(accepted, tf.maximum(group, 0), batch_dims=1)

    def _mask(self, ids, valid, seed):
        batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]
        special = tf.reduce_any(ids[..., None] == tf.constant(self.unselectable_token_ids, tf.int32), axis=-1)
        candidate = valid & ~special
        length = tf.reduce_sum(tf.cast(valid, tf.float64), axis=1)
        num_to_predict = tf.cast(tf.round(length * self.mask_selection_rate), tf.int32)
        num_to_predict = tf.minimum(self.max_predictions, tf.maximum(1, num_to_predict))
        seeds = tf.random.experimental.stateless_split(seed, 4)
        score = tf.random.stateless_uniform([batch, seq], seeds[0])
        if self.whole_word:
            return self._mask_groups(ids, candidate, score, num_to_predict, seeds)
        # Each candidate is its own group: the num_to_predict best-scored candidates.
        k = tf.minimum(self.max_predictions, seq)
        top = tf.math.top_k(tf.where(candidate, score, -1.0), k=k, sorted=True)
        take = (tf.range(k)[None] < num_to_predict[:, None]) & (top.values >= 0.0)
        out = self._slots(ids, tf.sort(tf.where(take, top.indices, seq), axis=1))
        # One 80/10/10 draw per prediction slot (each chosen position has its own slot).
        shape = tf.shape(out["mask_positions"])
        u = tf.random.stateless_uniform(shape, seeds[1])
        random_ids = tf.random.stateless_uniform(shape, seeds[2], 0, self.vocabulary_size, tf.int32)
        new = self._replacement(u, random_ids, out["mlm_ids"])
        where = tf.where(out["mlm_weights"] > 0)
        rows_cols = tf.stack([tf.cast(where[:, 0], tf.int32), tf.gather_nd(out["mask_positions"], where)], axis=1)
        out["token_ids"] = tf.tensor_scatter_nd_update(ids, rows_cols, tf.gather_nd(new, where))
        return out

    def _slots(self, ids, pos):
        """Prediction slots from ascending chosen positions (`>= seq` pads): positions and
        labels 0-padded to `max_predictions`, weights 1.0 for real slots."""
        seq = tf.shape(ids)[1]
        pos = tf.pad(pos, [[0, 0], [0, tf.maximum(0, self.max_predictions - seq)]], constant_values=seq)
        real = pos < seq
        positions = tf.where(real, pos, 0)
        return {
            "mask_positions": positions,
            "mlm_ids": tf.where(real, tf.gather(ids, positions, batch_dims=1), 0),
            "mlm_weights": tf.cast(real, tf.float32),
        }

    def _replacement(self, u, random_ids, ids):
        return tf.where(u < self.mask_token_rate, self.mask_token_id,
                        tf.where(u < self.mask_token_rate + self.random_token_rate, random_ids, ids))

    def _mask_groups(self, ids, candidate, score, num_to_predict, seeds):
        batch, seq = tf.shape(ids)[0], tf.shape(ids)[1]
        col = tf.range(seq)[None]
        group, selected = self._select_groups(ids, candidate, score, num_to_predict)
        u = tf.random.stateless_uniform([batch, seq], seeds[1])
        random_ids = tf.random.stateless_uniform([batch, seq], seeds[2], 0, self.vocabulary_size, tf.int32)
        if self.per_word_replacement:
            u = tf.gather(u, tf.maximum(group, 0), batch_dims=1)
        # Ascending selected positions: the k largest of -position (k = min(P, seq)).
        pos = -tf.math.top_k(tf.where(selected, -col, -2 * seq), k=tf.minimum(self.max_predictions, seq)).values
        out = self._slots(ids, pos)
        out["token_ids"] = tf.where(selected, self._replacement(u, random_ids, ids), ids)
        return out
