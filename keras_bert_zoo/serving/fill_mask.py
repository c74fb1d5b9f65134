"""`BertPretrainer`'s export: fill-mask in the graph (see `export` and `export_tasks`)."""

import tensorflow as tf

from keras_bert_zoo.serving.specs import _IDS, TextExamples, _refuse_text_inputs, _strings


class FillMaskSpec(TextExamples):
    """`BertPretrainer` (MLM objective): `text` with `[MASK]` markers -> per mask, the
    `top_k` most probable pieces: `tokens` string and `probabilities` (batch, masks, k),
    padded to the request's most masks, with `num_masks`. Encoded as
    `training/fill_mask.py`'s `encode_masked_text` (the text around each marker tokenized
    on its own, `[CLS] ... [SEP]`, cut at the preprocessor's `sequence_length`); a row
    without a mask answers `num_masks` 0. Needs `task.preprocessor` (a `BertPreprocessor`)
    for the vocabulary and the length."""

    top_k = 5
    model_inputs = _IDS + ("mask_positions",)

    def __init__(self, task, text_inputs=None):
        _refuse_text_inputs(text_inputs, "fill-mask", "`text`")
        if getattr(task, "objective", "mlm") != "mlm":
            raise ValueError(f"A fill-mask export needs objective='mlm'. Received: objective={task.objective!r}.")
        self.task = task
        self.tokenizer = task.preprocessor.tokenizer
        self.vocabulary = tf.constant(self.tokenizer.get_vocabulary())

    def text_specs(self):
        return {"text": _strings("text")}

    def ids_specs(self):
        specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in _IDS}
        specs["mask_positions"] = tf.TensorSpec([None, None], tf.int32, name="mask_positions")
        return specs

    def preprocess(self, preprocessor, raw):
        tokenizer, length = self.tokenizer, preprocessor.sequence_length
        parts = tf.strings.split(raw["text"], "[MASK]")  # (batch, parts)
        pieces = tokenizer.tokenize(parts.flat_values)  # (parts, pieces)
        counts = parts.row_lengths()
        last = tf.equal(tf.ragged.range(counts).flat_values, tf.gather(counts, parts.value_rowids()) - 1)
        mask = tf.RaggedTensor.from_row_lengths(
            tf.fill([tf.reduce_sum(tf.cast(~last, tf.int64))], tf.constant(tokenizer.mask_token_id, tf.int32)),
            tf.cast(~last, tf.int64))
        per_part = tf.concat([tf.cast(pieces, tf.int32), mask], axis=1)  # each part, then its [MASK]
        rows = parts.with_flat_values(per_part).merge_dims(1, 2)[:, : length - 2]  # (batch, pieces)
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

    def outputs(self, outputs, raw, packed):
        logits = tf.cast(outputs["mlm_logits"], tf.float32)  # (batch, masks, vocab)
        probabilities, ids = tf.math.top_k(tf.nn.softmax(logits, axis=-1), k=min(self.top_k, logits.shape[-1]))
        num_masks = packed.get("num_masks")
        if num_masks is None:
            num_masks = tf.fill([tf.shape(logits)[0]], tf.shape(logits)[1])
        valid = tf.sequence_mask(num_masks, tf.shape(logits)[1])[:, :, tf.newaxis]
        return {"tokens": tf.where(valid, tf.gather(self.vocabulary, ids), ""),
                "probabilities": tf.where(valid, probabilities, 0.0), "num_masks": num_masks}
