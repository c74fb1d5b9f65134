"""Every task's predictions on one fixed tiny model, for `test_predictions_unchanged.py`.

The weights come from the checkpoints' canonical names (`declared_variables()`, stable across
versions of the code by design: they are what Google's and HF's files are read by), each filled
from a generator seeded by its name; a feature extractor's tagger, which no checkpoint names, by
position. So a restructuring of the classes (construction order, layer names, files) cannot
change the model, and the predictions recorded here before it must come back after it.

`python tests/models/prediction_goldens.py OUT.json` writes the predictions of the code on
`PYTHONPATH` (how `golden_predictions.json` was made, on the commit before issue 56's
restructuring).
"""

import json
import sys
import zlib

import keras
import numpy as np

import keras_bert_zoo as kbz
from keras_bert_zoo.conftest import WORDS

TOKENS = kbz.text.google_reserved_tokens(num_unused=0) + list(WORDS)  # the doctests' vocabulary
BACKBONE = dict(vocabulary_size=len(TOKENS), num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32,
                max_sequence_length=64)
SENTENCES = ["a great film", "the man sits down and eats", "dull", "angela merkel visited paris and the sun is a star"]
PAIRS = (["the man sits down", "it rains", "who wrote this story"],
         ["a man sits down and eats", "the sky is dark at night", "ann wrote this story"])
QUESTIONS = (["who wrote the story ?", "what orbits the earth ?"],
             ["this story was written by ann . it is a good story .",
              "the moon orbits the earth . it shines at night . the sun is a star . we see a bright star ."])


def value(name, shape):
    """The fixed value of the variable a checkpoint calls `name`."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    return (0.3 * rng.standard_normal(shape)).astype("float32")


def filled(model):
    for name, variable in model.declared_variables().items():
        variable.assign(value(name, tuple(variable.shape)))
    return model


def tokenizer():
    return kbz.BertTokenizer(TOKENS)


def as_lists(tree):
    def convert(x):
        x = np.asarray(x)
        if x.dtype.kind in "OSU":
            return [v.decode() if isinstance(v, bytes) else str(v) for v in x.reshape(-1).tolist()]
        return np.asarray(x, "float64").tolist()

    return keras.tree.map_structure(convert, tree)


def predictions(route=None):
    """`{case: outputs}` of every task on the fixed model. `route(task_class, task_args)`, where
    given, gives more arguments of each task's backbone (how its encoder computes)."""
    out = {}

    def backbone(task_class=None, **task_args):
        keras.utils.clear_session()
        more = route(task_class, task_args) if route and task_class else {}
        return kbz.BertBackbone(**BACKBONE, **more)

    classifier = filled(kbz.BertClassifier(backbone(kbz.BertClassifier), num_classes=3, labels=["x", "y", "z"],
                                           preprocessor=kbz.BertPreprocessor(tokenizer(), sequence_length=32)))
    out["classifier_single"] = classifier.predict(SENTENCES, batch_size=2, verbose=0)
    out["classifier_pairs"] = classifier.predict(PAIRS, verbose=0)
    out["classifier_answers"] = classifier.postprocess(classifier.predict(SENTENCES, verbose=0))
    regression = filled(kbz.BertClassifier(backbone(kbz.BertClassifier), num_classes=1,
                                           preprocessor=kbz.BertPreprocessor(tokenizer(), sequence_length=32)))
    out["regression"] = regression.postprocess(regression.predict(PAIRS, verbose=0))
    mean = filled(kbz.BertClassifier(backbone(kbz.BertClassifier), num_classes=2, pooling="mean",
                                     preprocessor=kbz.BertPreprocessor(tokenizer(), sequence_length=32)))
    out["classifier_mean_pooling"] = mean.predict(SENTENCES, verbose=0)
    choice = filled(kbz.BertMultipleChoice(backbone(kbz.BertMultipleChoice), num_choices=3, preprocessor=kbz.MultipleChoicePreprocessor(
        tokenizer(), sequence_length=24)))
    contexts = np.array(["the man sits down .", "the sky is dark ."])
    endings = np.array([["he eats .", "it flies .", "the sun is a star ."], ["it is night .", "he eats .", "cold"]])
    out["multiple_choice"] = choice.postprocess(choice.predict((contexts, endings), verbose=0))
    for rules in ("original", "hf_pipeline"):
        qa = filled(kbz.BertSpanExtractor(backbone(kbz.BertSpanExtractor, rules=rules), rules=rules, preprocessor=kbz.SpanExtractorPreprocessor(
            tokenizer(), sequence_length=24, doc_stride=8, max_query_length=8, rules=rules)))
        out[f"span_{rules}"] = qa.predict(QUESTIONS)
        windows = qa.preprocessor.windows(*QUESTIONS)
        packed = {k: windows[k] for k in ("token_ids", "segment_ids", "padding_mask")}
        out[f"span_{rules}_logits"] = qa.predict(packed, verbose=0)
    labels = ["O", "B-PER", "I-PER", "B-LOC"]
    tagger = filled(kbz.BertTokenClassifier(backbone(kbz.BertTokenClassifier), num_classes=4, labels=labels,
                                            preprocessor=kbz.TokenClassifierPreprocessor(tokenizer(), sequence_length=16)))
    out["token_logits"] = tagger.predict(SENTENCES, verbose=0)
    out["token_tags"] = [" ".join(tags) for tags in tagger.predict_tags(SENTENCES)]
    features = filled(kbz.BertFeatureExtractor(backbone(kbz.BertFeatureExtractor), num_classes=4, labels=labels, lstm_units=4,
                                               preprocessor=kbz.TokenClassifierPreprocessor(tokenizer(), sequence_length=16)))
    for i, variable in enumerate(features.tagger.weights):
        variable.assign(value(f"tagger/{i}", tuple(variable.shape)))
    out["feature_extractor_logits"] = features.predict(SENTENCES, verbose=0)
    pretrainer = filled(kbz.BertPretrainer(backbone(kbz.BertPretrainer)))
    ids = np.array([[2, 10, 11, 12, 3, 13, 14, 3, 0, 0], [2, 15, 4, 16, 3, 17, 18, 19, 20, 3]], "int32")
    packed = {"token_ids": ids, "segment_ids": (np.arange(10) >= 5).astype("int32")[None].repeat(2, 0),
              "padding_mask": (ids > 0).astype("int32"), "mask_positions": np.array([[2, 6], [4, 1]], "int32")}
    out["pretrainer"] = pretrainer.predict(packed, verbose=0)
    bare = filled(backbone())
    out["backbone_sequence_output"] = bare.predict({k: packed[k] for k in ("token_ids", "segment_ids", "padding_mask")},
                                                   verbose=0)["sequence_output"]
    return as_lists(out)


if __name__ == "__main__":
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(predictions(), f)
