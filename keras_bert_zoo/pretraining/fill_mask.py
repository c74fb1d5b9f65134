"""Fill-mask predictions with a backbone and a masked-LM head (the demo's last stage).

One implementation, in TensorFlow ops: `encode_masked_texts` (a batch of strings -> packed
ids and mask positions) and `top_k_pieces` (logits -> the best pieces). `fill_mask` runs
them eagerly; `serving.fill_mask.FillMaskSpec` runs them in an exported graph.
"""

import numpy as np
import tensorflow as tf

MASK = "[MASK]"


def _token_ids(tokenizer, text):
    if not text.strip():
        return []
    ids = tokenizer.tokenize(text)
    return [int(i) for i in np.asarray(ids).reshape(-1)]


def encode_masked_texts(tokenizer, texts, sequence_length):
    """Encodes a batch of sentences with `[MASK]` markers as `[CLS] pieces [SEP]` rows, in TF ops.

    The text around each marker is tokenized on its own and the marker becomes the
    `[MASK]` id, so the result does not depend on how the tokenizer treats brackets. Rows
    are cut at `sequence_length - 2` pieces; a mask cut off is dropped.

    Args:
        tokenizer: a `keras_bert_zoo.text.bert_tokenizer.BertTokenizer`.
        texts: string tensor (batch,).
        sequence_length: int. The longest row, `[CLS]` and `[SEP]` counted.

    Returns:
        dict of int32 tensors: `token_ids`, `segment_ids`, `padding_mask` (batch, the
        longest row), `mask_positions` (batch, the most masks; padded with 0) and
        `num_masks` (batch,).
    """
    parts = tf.strings.split(texts, MASK)  # (batch, parts)
    pieces = tokenizer.tokenize(parts.flat_values)  # (parts, pieces)
    counts = parts.row_lengths()
    last = tf.equal(tf.ragged.range(counts).flat_values, tf.gather(counts, parts.value_rowids()) - 1)
    mask = tf.RaggedTensor.from_row_lengths(
        tf.fill([tf.reduce_sum(tf.cast(~last, tf.int64))], tf.constant(tokenizer.mask_token_id, tf.int32)),
        tf.cast(~last, tf.int64))
    per_part = tf.concat([tf.cast(pieces, tf.int32), mask], axis=1)  # each part, then its [MASK]
    rows = parts.with_flat_values(per_part).merge_dims(1, 2)[:, : sequence_length - 2]  # (batch, pieces)
    batch = rows.nrows()
    cls = tf.fill([batch, 1], tf.constant(tokenizer.cls_token_id, tf.int32))
    sep = tf.fill([batch, 1], tf.constant(tokenizer.sep_token_id, tf.int32))
    ids = tf.concat([cls, rows, sep], axis=1)
    token_ids = ids.to_tensor(default_value=tokenizer.pad_token_id)
    padding_mask = tf.cast(tf.sequence_mask(ids.row_lengths(), tf.shape(token_ids)[1]), tf.int32)
    is_mask = tf.equal(ids, tokenizer.mask_token_id)
    positions = tf.ragged.boolean_mask(tf.ragged.range(ids.row_lengths()), is_mask)
    return {"token_ids": token_ids, "segment_ids": tf.zeros_like(token_ids), "padding_mask": padding_mask,
            "mask_positions": tf.cast(positions.to_tensor(default_value=0), tf.int32),
            "num_masks": tf.cast(positions.row_lengths(), tf.int32)}


def top_k_pieces(logits, k):
    """`(probabilities, ids)` of the `k` most probable pieces per row of `logits` (..., vocab),
    best first (ties: the lower id first); the softmax is taken in `logits`' dtype."""
    return tf.math.top_k(tf.nn.softmax(logits, axis=-1), k=min(k, logits.shape[-1]))


def encode_masked_text(tokenizer, text, sequence_length=128):
    """Encodes a sentence with `[MASK]` markers as `[CLS] pieces [SEP]` inputs.

    The text around each marker is tokenized on its own and the marker becomes the
    `[MASK]` id, so the result does not depend on how the tokenizer treats brackets.

    Args:
        tokenizer: a `keras_bert_zoo.text.bert_tokenizer.BertTokenizer`.
        text: str. A sentence with at least one `[MASK]`.
        sequence_length: int. Length to pad to; longer inputs are cut at the end.

    Returns:
        dict of int32 numpy arrays of shape (1, sequence_length) `token_ids`,
        `segment_ids`, `padding_mask`, and `mask_positions` of shape (1, masks).
    """
    if not isinstance(text, str) or MASK not in text:
        raise ValueError(f"`text` must be a str containing {MASK!r}. Received: text={text!r}.")
    encoded = encode_masked_texts(tokenizer, tf.constant([text]), sequence_length)
    positions = encoded["mask_positions"].numpy()[:, : int(encoded["num_masks"][0])]
    if not positions.size:
        raise ValueError(
            f"Every {MASK} of `text` falls beyond sequence_length={sequence_length}. "
            f"Received: text={text!r}. Shorten the text or raise sequence_length."
        )
    pad = sequence_length - int(encoded["token_ids"].shape[1])
    padded = {key: np.pad(encoded[key].numpy(), [(0, 0), (0, pad)]) for key in ("token_ids", "segment_ids", "padding_mask")}
    padded["mask_positions"] = positions.astype("int32")
    return padded


def fill_mask(backbone, mlm_head, tokenizer, text, top_k=5, sequence_length=128):
    """Predicts the word pieces behind each `[MASK]` of a sentence.

    Args:
        backbone: `keras_bert_zoo.BertBackbone`.
        mlm_head: `keras_bert_zoo.layers.MaskedLMHead` tied to `backbone`'s embeddings.
        tokenizer: `keras_bert_zoo.text.bert_tokenizer.BertTokenizer` of the backbone.
        text: str. A sentence with one or more `[MASK]` markers.
        top_k: int. Candidates per mask. Defaults to 5.
        sequence_length: int. Defaults to 128.

    Returns:
        list (one per mask, in order) of lists of `(token, probability)`, best first.

    Examples:
    >>> pretrainer = keras_bert_zoo.BertPretrainer.from_preset("tiny_preset")
    >>> tokenizer = keras_bert_zoo.BertTokenizer("vocab.txt")
    >>> candidates = keras_bert_zoo.fill_mask(pretrainer.backbone, pretrainer.mlm_head, tokenizer,
    ...                                       "The [MASK] is a planet.", top_k=3, sequence_length=16)
    >>> [len(c) for c in candidates]  # per [MASK]: top_k (token, probability) pairs, best first
    [3]
    """
    if not isinstance(top_k, int) or top_k < 1:
        raise ValueError(f"`top_k` must be a positive int. Received: top_k={top_k!r}.")
    inputs = encode_masked_text(tokenizer, text, sequence_length)
    positions = inputs.pop("mask_positions")
    sequence = backbone(inputs, training=False)["sequence_output"]
    logits = np.asarray(mlm_head(sequence, positions), "float64")[0]  # (masks, vocab)
    probabilities, ids = top_k_pieces(tf.constant(logits), top_k)
    return [[(tokenizer.id_to_token(int(i)), float(p)) for i, p in zip(row_ids, row_probabilities)]
            for row_ids, row_probabilities in zip(ids.numpy(), probabilities.numpy())]


def mask_one_word(tokenizer, sentence, min_chars=4):
    """Masks one whole word of a sentence that the vocabulary holds as a single piece.

    Deterministic: among alphabetic words of at least `min_chars` characters that
    tokenize to exactly one piece, the one nearest the middle of the sentence.

    Args:
        tokenizer: the `BertTokenizer`.
        sentence: str.
        min_chars: int. Shorter words (mostly function words) are not masked.

    Returns:
        `(masked_sentence, word)`, or None if no word qualifies.
    """
    words = sentence.split()
    candidates = []
    for i, word in enumerate(words):
        if len(word) >= min_chars and word.isalpha() and len(_token_ids(tokenizer, word)) == 1:
            candidates.append(i)
    if not candidates:
        return None
    middle = (len(words) - 1) / 2
    index = min(candidates, key=lambda i: (abs(i - middle), i))
    masked = words[:index] + [MASK] + words[index + 1 :]
    return " ".join(masked), words[index]
