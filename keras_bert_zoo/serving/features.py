"""`BertFeatureExtractor`'s export: the backbone's features and the tagger's entities, in one graph.

The backbone runs once per window; its `encoder_outputs` feed the tagger (the layers the
task's `feature` chooses, as `BertFeatureExtractor.feature_model` stacks them) and its
`pooled_output` and `sequence_output` are outputs too.
"""

import tensorflow as tf

from keras_bert_zoo.models.bert_feature_extractor import FEATURES
from keras_bert_zoo.serving.entities import TokenClassifierSpec


class FeatureExtractorSpec(TokenClassifierSpec):
    """`BertFeatureExtractor`: `text` -> the frozen backbone's features and the tagger's entities.

    `serving_default` outputs, per text:

    - `pooled_output` float32 (batch, hidden) and `sequence_output` float32
      (batch, length, hidden): the backbone's outputs on the text's first window,
      `[CLS] pieces [SEP]` as the task's `TokenClassifierPreprocessor` packs it (a text of
      more than `sequence_length - 2` pieces is cut there, as TF Hub's BERT preprocessors
      cut). `length` is the request's longest `num_tokens`; positions past a row's
      `num_tokens` are 0.
    - `padding_mask` int32 (batch, length) (1 on the row's tokens) and `num_tokens` int32
      (batch,), `[CLS]` and `[SEP]` counted.
    - the entities over the whole text (every window), as a token classifier's export:
      `entity_text`, `entity_type`, `start_char`, `end_char`, `num_entities`.

    The `ids` signature gives, per packed row, `pooled_output`, `sequence_output`
    (padding positions 0) and the tagger's per-piece `label_id` and `probabilities`.
    Features are float32 whatever the task's dtype policy.
    """

    def run_model(self, ids):
        """One backbone call: (the tagger's logits, the backbone's outputs)."""
        task = self.task
        features = task.backbone(ids, training=False)
        chosen = [features["encoder_outputs"][i] for i in FEATURES[task.feature][0](task.backbone.num_layers)]
        stacked = tf.stack(chosen, axis=2)  # (windows, seq, layers, hidden)
        logits = task.tagger([stacked, ids["padding_mask"]], training=False)  # (windows, seq, classes)
        return logits, features

    def outputs(self, model_outputs, raw, packed):
        logits, features = model_outputs
        out = super().outputs(logits, raw, packed)
        pooled = tf.cast(features["pooled_output"], tf.float32)  # (windows, hidden)
        sequence = tf.cast(features["sequence_output"], tf.float32)  # (windows, seq, hidden)
        mask = tf.cast(packed["padding_mask"][:, : tf.shape(sequence)[1]], tf.int32)  # (windows, seq)
        if raw is not None:
            # Windows come in input order, each input's first at its lowest index.
            batch = tf.shape(raw["text"], out_type=tf.int64)[0]
            first = tf.searchsorted(tf.cast(packed["example"], tf.int64), tf.range(batch), side="left")
            pooled, sequence, mask = (tf.gather(t, first) for t in (pooled, sequence, mask))
            width = tf.reduce_max(tf.concat([tf.reduce_sum(mask, axis=-1), [0]], 0))
            sequence, mask = sequence[:, :width], mask[:, :width]
        out.update(
            pooled_output=pooled,
            sequence_output=sequence * tf.cast(mask, tf.float32)[:, :, tf.newaxis],
            padding_mask=mask,
            num_tokens=tf.reduce_sum(mask, axis=-1),
        )
        return out
