"""`BertPretrainer`'s export: fill-mask in the graph (see `export` and `export_tasks`)."""

import tensorflow as tf

from keras_bert_zoo.pretraining.fill_mask import encode_masked_texts, top_k_pieces
from keras_bert_zoo.serving.spec_base import IDS, TextExamples, refuse_text_inputs, string_spec


class FillMaskSpec(TextExamples):
    """`BertPretrainer` (MLM objective): `text` with `[MASK]` markers -> per mask, the
    `top_k` most probable pieces: `tokens` string and `probabilities` (batch, masks, k),
    padded to the request's most masks, with `num_masks`. Encoded and ranked by
    `pretraining.fill_mask`'s `encode_masked_texts` and `top_k_pieces`, as `kbz.fill_mask`
    (the text around each marker tokenized on its own, `[CLS] ... [SEP]`, cut at the
    preprocessor's `sequence_length`); a row
    without a mask answers `num_masks` 0. Needs `task.preprocessor` (a `BertPreprocessor`)
    for the vocabulary and the length."""

    top_k = 5
    model_inputs = IDS + ("mask_positions",)

    def __init__(self, task, text_inputs=None):
        refuse_text_inputs(text_inputs, "fill-mask", "`text`")
        if getattr(task, "objective", "mlm") != "mlm":
            raise ValueError(f"A fill-mask export needs objective='mlm'. Received: objective={task.objective!r}.")
        self.task = task
        self.tokenizer = task.preprocessor.tokenizer
        self.vocabulary = tf.constant(self.tokenizer.get_vocabulary())

    def text_specs(self):
        return {"text": string_spec("text")}

    def ids_specs(self):
        specs = {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in IDS}
        specs["mask_positions"] = tf.TensorSpec([None, None], tf.int32, name="mask_positions")
        return specs

    def preprocess(self, preprocessor, raw):
        return encode_masked_texts(self.tokenizer, raw["text"], preprocessor.sequence_length)

    def outputs(self, outputs, raw, packed):
        logits = tf.cast(outputs["mlm_logits"], tf.float32)  # (batch, masks, vocab)
        probabilities, ids = top_k_pieces(logits, self.top_k)
        num_masks = packed.get("num_masks")
        if num_masks is None:
            num_masks = tf.fill([tf.shape(logits)[0]], tf.shape(logits)[1])
        valid = tf.sequence_mask(num_masks, tf.shape(logits)[1])[:, :, tf.newaxis]
        return {"tokens": tf.where(valid, tf.gather(self.vocabulary, ids), ""),
                "probabilities": tf.where(valid, probabilities, 0.0), "num_masks": num_masks}
