"""TF-Hub-style encoder and preprocessor SavedModels, reloaded with `tf.saved_model.load`, equal to
the backbone and the preprocessor they came from."""

import numpy as np
import tensorflow as tf

from keras_bert_zoo.serving.hub import export_encoder, export_preprocessor
from tests.models.test_bert_classifier import SECONDS, SENTENCES, tiny_classifier


def test_encoder_and_preprocessor_pair(tmp_path):
    task = tiny_classifier()
    backbone, preprocessor = task.backbone, task.preprocessor
    encoder = tf.saved_model.load(export_encoder(backbone, str(tmp_path / "encoder")))
    # Traced with every position computed (the hub contract, any device): a padded twin of the
    # task's backbone, which keeps its own path.
    assert backbone.skip_padding == "always"
    graph = encoder.signatures["serving_default"].graph.as_graph_def()
    loops = {"While", "StatelessWhile"}
    assert not loops & ({node.op for node in graph.node}
                        | {node.op for function in graph.library.function for node in function.node_def})
    hub_preprocessor = tf.saved_model.load(export_preprocessor(preprocessor, str(tmp_path / "preprocessor")))

    inputs = hub_preprocessor(tf.constant(SENTENCES))
    ours = preprocessor(SENTENCES)
    assert sorted(inputs) == ["input_mask", "input_type_ids", "input_word_ids"]
    for hub, key in (("input_word_ids", "token_ids"), ("input_mask", "padding_mask"), ("input_type_ids", "segment_ids")):
        np.testing.assert_array_equal(inputs[hub].numpy(), ours[key].numpy())
    # tokenize + bert_pack_inputs: the pair as the preprocessor packs it.
    segments = [hub_preprocessor.tokenize(tf.constant(s)) for s in (SENTENCES, SECONDS)]
    assert segments[0].to_list() == preprocessor.tokenizer.tokenize(SENTENCES).to_list()
    packed = hub_preprocessor.bert_pack_inputs(segments)
    pair = preprocessor((SENTENCES, SECONDS))
    np.testing.assert_array_equal(packed["input_word_ids"].numpy(), pair["token_ids"].numpy())
    np.testing.assert_array_equal(packed["input_type_ids"].numpy(), pair["segment_ids"].numpy())
    assert bool(hub_preprocessor.do_lower_case.numpy()) == preprocessor.tokenizer.lowercase
    vocab = open(hub_preprocessor.vocab_file.asset_path.numpy().decode(), encoding="utf-8").read().split("\n")
    assert vocab[: len(preprocessor.tokenizer.get_vocabulary())] == preprocessor.tokenizer.get_vocabulary()

    outputs = encoder(dict(packed))
    expected = backbone(pair)
    np.testing.assert_allclose(outputs["pooled_output"].numpy(), expected["pooled_output"].numpy(), atol=1e-5)
    np.testing.assert_allclose(outputs["sequence_output"].numpy(), expected["sequence_output"].numpy(), atol=1e-5)
    assert len(outputs["encoder_outputs"]) == backbone.num_layers
    for got, want in zip(outputs["encoder_outputs"], expected["encoder_outputs"][1:]):
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5)
    served = encoder.signatures["serving_default"](**{k: v for k, v in packed.items()})
    assert served["encoder_outputs"].shape[0] == backbone.num_layers
    np.testing.assert_allclose(served["pooled_output"].numpy(), expected["pooled_output"].numpy(), atol=1e-5)
