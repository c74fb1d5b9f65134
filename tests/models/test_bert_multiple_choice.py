"""BertMultipleChoice and its preprocessor: the task contract, one score per (context, ending)
pair through the shared encoder, the packing of each pair, and HF's multiple-choice head."""

import logging
import os
import shutil

import keras
import numpy as np
import pytest
import safetensors.numpy

from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.text import BertPreprocessor
from keras_bert_zoo.text.multiple_choice_preprocessor import MultipleChoicePreprocessor
from tests.task_contract import assert_task_contract
from tests.helpers import without_dropout
from tests.weights import weights_testlib as lib

FIXTURE = lib.fixture_dir("gelu")  # HF layout: vocab w0..w58, hidden 16, 2 layers, 32 positions
CONTEXTS = ["w1 w2 w3", "w4 w5 w6 w7", "w8"]
ENDINGS = [["w10", "w11 w12", "w13 w14 w15"], ["w16 w17", "w18", "w19"], ["w20 w21 w22 w23", "w24", "w25 w26"]]


def tiny_multiple_choice(num_choices=3):
    keras.utils.set_random_seed(0)
    return BertMultipleChoice.from_preset(FIXTURE, num_choices=num_choices, dropout=0.0, sequence_length=12)


def test_contract(tmp_path):
    task = tiny_multiple_choice()
    assert_task_contract(task, (CONTEXTS, ENDINGS), np.array([2, 0, 1]), tmp_path)
    assert BertMultipleChoice.from_preset(str(tmp_path / "preset")).num_choices == 3


def test_each_pair_is_scored_through_the_shared_encoder():
    task = tiny_multiple_choice()
    scores = task.predict((CONTEXTS, ENDINGS), verbose=0)
    pair_preprocessor = BertPreprocessor(task.preprocessor.tokenizer, sequence_length=12)
    kernel, bias = (np.asarray(v) for v in task.head_variables().values())
    for i, context in enumerate(CONTEXTS):
        pooled = task.backbone(pair_preprocessor(([context] * 3, ENDINGS[i])))["pooled_output"].numpy()
        np.testing.assert_allclose(scores[i], (pooled @ kernel + bias)[:, 0], atol=1e-5)
    out = task.postprocess(scores)
    np.testing.assert_allclose(np.asarray(out["probabilities"]).sum(-1), 1.0, atol=1e-6)
    assert np.asarray(out["choice"]).tolist() == np.argmax(scores, -1).tolist()


def test_fit_on_the_real_tokens_gives_the_padded_fits_numbers():
    # Its loss reads each pair's [CLS]: on a CPU `from_preset` builds the encoder to run its dense
    # layers on the real tokens in `fit` too (skip_padding="always"), with the padded run's numbers.
    def fit(skip_padding):
        keras.utils.set_random_seed(0)
        task = BertMultipleChoice.from_preset(FIXTURE, num_choices=3, dropout=0.0, sequence_length=12,
                                              skip_padding=skip_padding)
        without_dropout(task)  # the fixture's backbone has dropout: compare without draws
        task.compile(learning_rate=1e-3)
        history = task.fit((CONTEXTS, ENDINGS), np.array([2, 0, 1]), batch_size=2, epochs=2, verbose=0)
        return history.history["loss"], task.predict((CONTEXTS, ENDINGS), verbose=0)

    assert tiny_multiple_choice().backbone.skip_padding == "always"  # this CPU's default
    (real_loss, real_scores), (padded_loss, padded_scores) = fit("always"), fit("never")
    np.testing.assert_allclose(real_loss, padded_loss, rtol=1e-4)
    np.testing.assert_allclose(real_scores, padded_scores, atol=1e-4)
    assert not np.allclose(real_scores, tiny_multiple_choice().predict((CONTEXTS, ENDINGS), verbose=0))


def test_preprocessor_packs_every_pair_and_counts_truncation(caplog):
    task = tiny_multiple_choice()
    x = task.preprocessor((CONTEXTS, np.array(ENDINGS)))
    assert x["token_ids"].shape == (3, 3, 12)
    vocab = task.preprocessor.tokenizer.get_vocabulary()
    tokens = [vocab[i] for i in x["token_ids"].numpy()[1, 0] if i]
    assert tokens == ["[CLS]", "w4", "w5", "w6", "w7", "[SEP]", "w16", "w17", "[SEP]"]
    assert x["segment_ids"].numpy()[1, 0].tolist() == [0] * 6 + [1] * 3 + [0] * 3
    long = " ".join(f"w{i}" for i in range(1, 20))
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo.models"):
        task.predict(([long, "w1"], [["w2", "w3", "w4"], ["w5", "w6", "w7"]]), verbose=0)
    assert "Truncated 3 of 6 input sequences to sequence_length=12" in caplog.text


def test_hf_multiple_choice_head_loads(tmp_path):
    rng = np.random.default_rng(0)
    weight, bias = rng.normal(size=(1, 16)).astype("float32"), rng.normal(size=(1,)).astype("float32")
    path = str(tmp_path / "hf")
    shutil.copytree(FIXTURE, path)
    tensors = dict(lib.hf_tensors("gelu"), **{"classifier.weight": weight, "classifier.bias": bias})
    safetensors.numpy.save_file(tensors, os.path.join(path, "model.safetensors"))
    task = BertMultipleChoice.from_preset(path, num_choices=3, dropout=0.0)
    np.testing.assert_array_equal(np.asarray(task.output_dense.kernel), weight.T)
    np.testing.assert_array_equal(np.asarray(task.output_dense.bias), bias)


@pytest.mark.parametrize("num_choices", [1, 2.0])
def test_bad_num_choices_is_named(num_choices):
    with pytest.raises(ValueError, match=f"num_choices={num_choices}"):
        BertMultipleChoice(tiny_multiple_choice().backbone, num_choices)


def test_inputs_that_are_not_context_endings_pairs_are_refused():
    preprocessor = tiny_multiple_choice().preprocessor
    with pytest.raises(ValueError, match="one more axis"):
        preprocessor((CONTEXTS, CONTEXTS))
    with pytest.raises(ValueError, match="sequence_length=None"):
        MultipleChoicePreprocessor(preprocessor.tokenizer, sequence_length=None)
