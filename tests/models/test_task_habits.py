"""A keras-hub / HF user's habits work on every task (issue #46): a task is built compiled, a
preprocessor setting set after loading takes effect (and the log says the length used), one
string is a batch of one, `postprocess` answers NumPy, `summary()` names the preprocessor and the
backbone, and `save(..., include_optimizer=False)` writes a smaller `.keras` file that loads."""

import logging
import os
import warnings

import keras
import numpy as np
import pytest

from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from keras_bert_zoo.training.finetuning_optimizer import FinetuningAdamW
from tests.weights import weights_testlib as lib

FIXTURE = lib.fixture_dir("gelu")  # HF layout: vocab w0..w58, hidden 16, 2 layers, 32 positions
LONG = " ".join(f"w{i}" for i in range(1, 21))  # 20 words: 22 tokens with [CLS] and [SEP]


def classifier(**kwargs):
    keras.utils.set_random_seed(0)
    return BertClassifier.from_preset(FIXTURE, num_classes=2, labels=["neg", "pos"], dropout=0.0, **kwargs)


@pytest.mark.parametrize("build", [
    lambda: BertMultipleChoice.from_preset(FIXTURE, num_choices=3),
    lambda: BertTokenClassifier.from_preset(FIXTURE, num_classes=3),
    lambda: BertSpanExtractor.from_preset(FIXTURE),
    lambda: BertPretrainer.from_preset(FIXTURE),
], ids=["multiple_choice", "token_classifier", "span_extractor", "pretrainer"])
def test_every_task_is_built_compiled(build):
    assert build().compiled  # was False: `fit` raised "Call `compile()` before `fit()`"


def test_the_constructor_compiles_and_compile_overrides():
    task = classifier()
    built = BertClassifier(task.backbone, num_classes=2)
    assert built.compiled and isinstance(built.optimizer, FinetuningAdamW)
    built.compile(optimizer=keras.optimizers.SGD(0.1), learning_rate=1e-3)
    assert isinstance(built.optimizer, keras.optimizers.SGD) and built._run_schedule is None


def test_sequence_length_set_after_loading_packs_predicts_and_logs_it(caplog):
    task = classifier(sequence_length=24)
    task.predict([LONG], verbose=0)  # traces the pipeline at 24
    task.preprocessor.sequence_length = 8
    assert task.preprocessor([LONG])["token_ids"].shape[-1] == 8  # was 24: the setter did nothing
    with caplog.at_level(logging.INFO, logger="keras_bert_zoo.models"):
        logits = task.predict([LONG, "w1"], verbose=0)
    assert "Truncated 1 of 2 input sequences to sequence_length=8" in caplog.text
    packed = task.preprocessor([LONG, "w1"])
    task.preprocessor = None
    np.testing.assert_allclose(logits, task.predict(packed, verbose=0), atol=1e-5)


def test_truncate_set_after_loading_takes_effect():
    task = classifier(sequence_length=8)
    pair = (["w1 w2 w3 w4 w5 w6"], ["w7 w8 w9"])
    task.preprocessor.truncate = "waterfall"
    # Waterfall: A keeps 5 of its 6 pieces, B none (longest_first kept 3 and 2).
    assert task.preprocessor(pair)["segment_ids"].numpy()[0].tolist() == [0] * 7 + [1]


def test_settings_of_other_preprocessors_take_effect_or_are_refused():
    choice = BertMultipleChoice.from_preset(FIXTURE, num_choices=3, sequence_length=16)
    choice.preprocessor.sequence_length = 8
    assert choice.preprocessor((["w1"], [["w2", "w3", "w4"]]))["token_ids"].shape == (1, 3, 8)
    with pytest.raises(ValueError, match="refused.*sequence_length=None"):
        choice.preprocessor.sequence_length = None
    tagger = BertTokenClassifier.from_preset(FIXTURE, num_classes=3, sequence_length=16)
    tagger.predict(["w1 w2"], verbose=0)
    tagger.preprocessor.sequence_length = 6
    assert tagger.preprocessor([LONG])["token_ids"].shape[-1] == 6
    assert tagger.predict([LONG], verbose=0).shape[1:] == (6, 3)
    qa = BertSpanExtractor.from_preset(FIXTURE, sequence_length=24, max_query_length=4)
    qa.preprocessor.sequence_length = 12
    assert qa.preprocessor((["w1"], [LONG]))["token_ids"].shape[-1] == 12
    with pytest.raises(ValueError, match=r"from_preset\(\.\.\., rules=\.\.\.\)"):
        qa.preprocessor.rules = "hf_pipeline"
    with pytest.raises(ValueError, match="refused, and the preprocessor keeps sequence_length=12"):
        qa.preprocessor.sequence_length = 6  # no room for the question
    assert qa.preprocessor.sequence_length == 12


def test_a_sequence_length_beyond_the_backbone_is_refused():
    task = classifier(sequence_length=16)
    task.preprocessor.sequence_length = 64
    with pytest.raises(ValueError, match="max_sequence_length=32"):
        task.predict(["w1"], verbose=0)


def test_one_string_or_one_pair_is_a_batch_of_one():
    task = classifier(sequence_length=16)
    np.testing.assert_allclose(task.predict("w1 w2", verbose=0), task.predict(["w1 w2"], verbose=0), atol=1e-6)
    pair = task.predict(("w1 w2", "w3"), verbose=0)
    assert pair.shape == (1, 2)
    np.testing.assert_allclose(pair, task.predict((["w1 w2"], ["w3"]), verbose=0), atol=1e-6)
    answers = task.postprocess(pair)
    assert all(isinstance(v, np.ndarray) for v in answers.values())
    assert answers["label"].tolist() in (["neg"], ["pos"])
    choice = BertMultipleChoice.from_preset(FIXTURE, num_choices=3, sequence_length=12)
    assert choice.predict(("w1", ["w2", "w3", "w4"]), verbose=0).shape == (1, 3)
    assert isinstance(choice.postprocess(choice.predict(("w1", ["w2", "w3", "w4"]), verbose=0))["choice"],
                      np.ndarray)
    tagger = BertTokenClassifier.from_preset(FIXTURE, num_classes=3, sequence_length=8)
    assert tagger.predict("w1 w2", verbose=0).shape == (1, 8, 3)
    assert isinstance(tagger.postprocess(tagger.predict("w1 w2", verbose=0))["label_id"], np.ndarray)
    named = BertTokenClassifier.from_preset(FIXTURE, num_classes=3, labels=["O", "B-X", "I-X"], sequence_length=8)
    assert len(named.predict_entities("w1 w2")) == 1  # one text, not one per character
    assert named.predict_entities("w1 w2") == named.predict_entities(["w1 w2"])
    qa = BertSpanExtractor.from_preset(FIXTURE, sequence_length=24)
    assert len(qa.predict(("w1 w2", "w3 w4 w5"), verbose=0)["answer_text"]) == 1


def test_summary_names_the_preprocessor_and_the_backbone():
    task = classifier(sequence_length=16)
    lines = []
    task.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert 'Task: "bert_classifier' in text
    assert "Preprocessor: BertPreprocessor(sequence_length=16, truncate='longest_first')" in text
    assert f"vocabulary_size={task.preprocessor.tokenizer.vocabulary_size():,}" in text
    assert f'Backbone: "{task.backbone.name}" (BertBackbone' in text
    assert f"{task.backbone.count_params():,} parameters" in text
    assert "encoder_outputs 3 × (None, None, 16)" in text  # not nine stacked shapes
    assert "logits (Dense)" in text and f"Total params: {task.count_params():,}" in text
    assert text.index("Preprocessor:") < text.index("Backbone:") < text.index("logits (Dense)")


def test_save_without_the_optimizer_is_smaller_and_loads_compiled(tmp_path, caplog):
    task = classifier(sequence_length=16)
    task.fit(["w1 w2", "w3", "w4 w5 w6", "w7"], np.array([0, 1, 0, 1]), batch_size=2, verbose=0)
    expected = task.predict(["w1 w2", "w3"], verbose=0)
    full, light = str(tmp_path / "full.keras"), str(tmp_path / "light.keras")
    task.save(full)
    with caplog.at_level(logging.INFO):
        task.save(light, include_optimizer=False)
    assert "without the optimizer's variables" in caplog.text
    assert task.optimizer is not None and task.optimizer.built  # the task keeps its optimizer
    assert os.path.getsize(light) < 0.7 * os.path.getsize(full)  # Keras wrote the optimizer anyway
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO):
        warnings.simplefilter("always")
        restored = keras.saving.load_model(light)
    assert not [w for w in caught if "optimizer" in str(w.message)], [str(w.message) for w in caught]
    assert "no optimizer state" in caplog.text
    np.testing.assert_allclose(restored.predict(["w1 w2", "w3"], verbose=0), expected, atol=1e-6)
    assert restored.compiled and int(restored.optimizer.iterations) == 0
    restored.fit(["w1", "w2"], np.array([0, 1]), batch_size=2, verbose=0)
    resumed = keras.saving.load_model(full)  # the full file resumes where training stopped
    assert int(resumed.optimizer.iterations) == int(task.optimizer.iterations) == 2


def test_an_untrained_task_saves_and_loads_without_an_optimizer_mismatch(tmp_path):
    path = str(tmp_path / "task.keras")
    classifier(sequence_length=16).save(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        restored = keras.saving.load_model(path)
    assert not [w for w in caught if "optimizer" in str(w.message)], [str(w.message) for w in caught]
    assert restored.compiled


def test_fit_shows_the_graph_build_apart_from_the_bar():
    from keras_bert_zoo.training.callbacks import BuildAwareProgbar

    task = classifier(sequence_length=16)
    seen = []
    # The bar Keras uses is the one in the fit's callback list: ours unless the caller passed a bar.
    original = keras.callbacks.CallbackList.__init__

    def spy_init(self, callbacks=None, *args, **kwargs):
        original(self, callbacks, *args, **kwargs)
        seen.append([type(c).__name__ for c in self.callbacks])

    keras.callbacks.CallbackList.__init__ = spy_init
    try:
        task.fit(["w1 w2", "w3"], np.array([0, 1]), batch_size=2, epochs=1, verbose=1)
        bars = [name for names in seen for name in names if "Progbar" in name]
        assert bars == ["BuildAwareProgbar"], seen
        seen.clear()
        task.fit(["w1 w2", "w3"], np.array([0, 1]), batch_size=2, epochs=1, verbose=1,
                 callbacks=[keras.callbacks.ProgbarLogger()])
        bars = [name for names in seen for name in names if "Progbar" in name]
        assert bars == ["ProgbarLogger"], seen  # the caller's bar, alone
    finally:
        keras.callbacks.CallbackList.__init__ = original
    assert issubclass(BuildAwareProgbar, keras.callbacks.ProgbarLogger)
