"""TF-Hub-style BERT SavedModels: an encoder and its preprocessor, as TF Hub's BERT pairs are used.

`export_encoder(backbone, path)`: a callable SavedModel (`tf.saved_model.load(path)(inputs)`,
or `hub.KerasLayer(path)`) and a `serving_default` signature, both on a dict of int32
`input_word_ids`, `input_mask`, `input_type_ids` (batch, seq), giving `pooled_output`
(batch, hidden), `sequence_output` (batch, seq, hidden) and `encoder_outputs`, the output of
each Transformer layer (the last equals `sequence_output`; the embeddings are not one):
a list from the callable, stacked (layers, batch, seq, hidden) in the signature, which
takes tensors only.

`export_preprocessor(preprocessor, path)`: callable on a batch of strings -> the encoder's
inputs at the preprocessor's `sequence_length` (also `serving_default`); `tokenize`
(strings -> int32 ragged (batch, pieces); TF Hub's is (batch, words, pieces)) and
`bert_pack_inputs` (a list of one or two such ragged segments -> the encoder's inputs,
truncated as the preprocessor truncates), as attributes of the loaded object. The
vocabulary is `assets/vocab.txt`, the casing the `do_lower_case` variable.

Both write atomically (see `export`).
"""

import os
import tempfile

import tensorflow as tf

from keras_bert_zoo.text.segment_packer import SegmentPacker
from keras_bert_zoo.text.vocabulary import save_vocabulary
from keras_bert_zoo.utils import files, keras_internals

_HUB_INPUTS = ("input_word_ids", "input_mask", "input_type_ids")
_OURS = {"input_word_ids": "token_ids", "input_mask": "padding_mask", "input_type_ids": "segment_ids"}


def _ids_spec():
    return {name: tf.TensorSpec([None, None], tf.int32, name=name) for name in _HUB_INPUTS}


def _as_hub(packed):
    return {hub: tf.cast(packed[ours], tf.int32) for hub, ours in _OURS.items()}


class _Encoder(keras_internals.auto_trackable_class()):
    def __init__(self, backbone):
        # The tf.Variables under the Keras ones (see `export._ServingModule`).
        self.variables = [getattr(v, "value", v) for v in backbone.variables]

        @tf.function(input_signature=[_ids_spec()], autograph=False)
        def call(inputs):
            outputs = backbone({ours: inputs[hub] for hub, ours in _OURS.items()}, training=False)
            return {
                "pooled_output": outputs["pooled_output"],
                "sequence_output": outputs["sequence_output"],
                "encoder_outputs": list(outputs["encoder_outputs"][1:]),
            }

        @tf.function(input_signature=[_ids_spec()], autograph=False)
        def serve(inputs):
            outputs = call(inputs)
            return dict(outputs, encoder_outputs=tf.stack(outputs["encoder_outputs"]))

        self.__call__ = call
        self.serve = serve


def export_encoder(backbone, path):
    """Writes `backbone` as a TF-Hub-style BERT encoder SavedModel (see the module).

    Args:
        backbone: `keras_bert_zoo.BertBackbone`.
        path: str. The SavedModel directory (replaced only by a complete export).

    Returns:
        The absolute path written.
    """
    if not hasattr(backbone, "declared_variables"):
        raise ValueError(f"`backbone` must be a keras_bert_zoo.BertBackbone. Received: {type(backbone).__name__}.")
    # TF Hub's encoders give every position's output, padding included, and run on any device:
    # a backbone built to skip the padding (a task's, on a CPU) is exported as its padded twin.
    encoder = _Encoder(backbone.with_paths("never", None))
    path = os.path.abspath(os.fspath(path))
    with files.atomic_directory(path) as tmp:
        tf.saved_model.save(encoder, tmp, signatures={"serving_default": encoder.serve.get_concrete_function()})
    return path


class _Preprocessor(keras_internals.auto_trackable_class()):
    def __init__(self, preprocessor, vocabulary_path):
        tokenizer = preprocessor.tokenizer
        self.vocab_file = tf.saved_model.Asset(vocabulary_path)
        self.do_lower_case = tf.Variable(bool(tokenizer.lowercase), trainable=False)
        packer = SegmentPacker(
            preprocessor.sequence_length, start_value=tokenizer.cls_token_id, end_value=tokenizer.sep_token_id,
            pad_value=tokenizer.pad_token_id, truncate=preprocessor.truncate, dtype="int32",
        )
        strings = tf.TensorSpec([None], tf.string, name="text")
        segment = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1)

        @tf.function(input_signature=[strings], autograph=False)
        def call(text):
            return _as_hub(preprocessor(text))

        @tf.function(input_signature=[strings], autograph=False)
        def tokenize(text):
            return tf.cast(tokenizer.tokenize(text), tf.int32)

        @tf.function(autograph=False)
        def bert_pack_inputs(segments):
            return _as_hub(packer(tuple(tf.cast(s, tf.int32) for s in segments)))

        for count in (1, 2):  # one sentence or a pair: both traced into the SavedModel
            bert_pack_inputs.get_concrete_function([segment] * count)
        self.__call__ = call
        self.tokenize = tokenize
        self.bert_pack_inputs = bert_pack_inputs


def export_preprocessor(preprocessor, path):
    """Writes a `BertPreprocessor` as a TF-Hub-style BERT preprocessor SavedModel (see the module).

    Args:
        preprocessor: `keras_bert_zoo.text.BertPreprocessor` with a fixed `sequence_length`.
        path: str. The SavedModel directory (replaced only by a complete export).

    Returns:
        The absolute path written.
    """
    if not hasattr(preprocessor, "tokenizer") or not isinstance(getattr(preprocessor, "sequence_length", None), int):
        raise ValueError(
            "`preprocessor` must be a keras_bert_zoo.text.BertPreprocessor with an int `sequence_length` "
            f"(TF Hub's preprocessors pad to a fixed length). Received: {preprocessor!r:.200}."
        )
    path = os.path.abspath(os.fspath(path))
    with tempfile.TemporaryDirectory() as scratch:
        vocabulary_path = os.path.join(scratch, "vocab.txt")
        save_vocabulary(preprocessor.tokenizer.get_vocabulary(), vocabulary_path)
        module = _Preprocessor(preprocessor, vocabulary_path)
        with files.atomic_directory(path) as tmp:
            tf.saved_model.save(module, tmp, signatures={"serving_default": module.__call__.get_concrete_function()})
    return path
