"""Fill-mask predictions with a backbone and a masked-LM head (the demo's last stage)."""

import numpy as np

MASK = "[MASK]"


def _token_ids(tokenizer, text):
    if not text.strip():
        return []
    ids = tokenizer.tokenize(text)
    return [int(i) for i in np.asarray(ids).reshape(-1)]


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
    mask_id = tokenizer.token_to_id(MASK)
    pieces = text.split(MASK)
    ids = [tokenizer.token_to_id("[CLS]")]
    positions = []
    for i, piece in enumerate(pieces):
        ids.extend(_token_ids(tokenizer, piece))
        if i < len(pieces) - 1:
            positions.append(len(ids))
            ids.append(mask_id)
    ids = ids[: sequence_length - 1] + [tokenizer.token_to_id("[SEP]")]
    positions = [p for p in positions if p < sequence_length - 1]
    if not positions:
        raise ValueError(
            f"Every {MASK} of `text` falls beyond sequence_length={sequence_length}. "
            f"Received: text={text!r}. Shorten the text or raise sequence_length."
        )
    token_ids = np.zeros((1, sequence_length), "int32")
    token_ids[0, : len(ids)] = ids
    padding_mask = (token_ids > 0).astype("int32")
    padding_mask[0, : len(ids)] = 1
    return {
        "token_ids": token_ids,
        "segment_ids": np.zeros_like(token_ids),
        "padding_mask": padding_mask,
        "mask_positions": np.asarray([positions], "int32"),
    }


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
    logits -= logits.max(axis=-1, keepdims=True)
    probs = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    results = []
    for row in probs:
        best = np.argsort(-row, kind="stable")[:top_k]
        results.append([(tokenizer.id_to_token(int(i)), float(row[i])) for i in best])
    return results


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
