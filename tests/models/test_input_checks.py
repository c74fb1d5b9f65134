"""A user's common mistakes get one line before any graph (issue #58): label names are mapped
through the task's `labels`; unknown names, out-of-range ids, fractional ids, rows that disagree,
texts that are not strings and empty inputs are refused naming the argument, the row and the
fix, with nothing trained. The file readers give the same answer (one implementation)."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.data.conll import encode_tags
from keras_bert_zoo.data.glue import read_glue
from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier
from tests.weights import weights_testlib as lib

FIXTURE = lib.fixture_dir("gelu")  # HF layout: vocab w0..w58, hidden 16, 2 layers, 32 positions
TEXTS = ["w1 w2 w3", "w4 w5"]
TEXT_FIX = ("Pass text: a list of strings (pairs: a tuple of two lists, or a list of (a, b) tuples); a task with "
            "`preprocessor = None` takes packed ids (a dict with `token_ids`).")


@pytest.fixture(scope="module")
def classifier():
    keras.utils.set_random_seed(0)
    return BertClassifier.from_preset(FIXTURE, num_classes=2, labels=["neg", "pos"], dropout=0.0, sequence_length=16)


def refused(task, call, *args, **kwargs):
    """The message of `task.<call>(...)`, checking that it is one line and that nothing trained."""
    before = [np.array(w) for w in task.weights]
    with pytest.raises(ValueError) as error:
        getattr(task, call)(*args, verbose=0, **kwargs)
    assert all(np.array_equal(b, np.array(a)) for b, a in zip(before, task.weights)), "weights changed"
    assert int(task.optimizer.iterations.numpy()) == 0, "a step ran"
    message = str(error.value)
    assert "\n" not in message
    return message


MISTAKES = [
    ("fit", (TEXTS, ["pos", "postive"]), {},
     "`y` row 1: label 'postive' is not one of ['neg', 'pos']. Fix the label, or build the task with `labels` "
     "that name every class (in id order)."),
    ("fit", (TEXTS, [5, 0]), {},
     "`y` row 0: class id 5 is outside 0..1 (num_classes=2). Pass ids 0..1, or build the task with num_classes=6 "
     "or more."),
    ("fit", (TEXTS, [1, -1]), {},
     "`y` row 1: class id -1 is outside 0..1 (num_classes=2). Pass ids 0..1: ids start at 0, and no value marks "
     "a row without a class."),
    ("fit", (TEXTS, [0.5, 1.0]), {},
     "`y` row 0 is 0.5, not a class id (an integer). Pass ids 0..1; a regression task is built with num_classes=1."),
    ("fit", (TEXTS, [1]), {},
     "`x` has 2 rows but `y` has 1: fit needs one per row of `x`. Pass `y` with 2 rows."),
    ("fit", (TEXTS, [1, 0]), {"sample_weight": [1.0]},
     "`x` has 2 rows but `sample_weight` has 1: fit needs one per row of `x`. Pass `sample_weight` with 2 rows."),
    ("fit", ((["w1", "w2"], ["w3"]), [1, 0]), {},
     "`x` column 1 has 2 rows but `x` column 2 has 1: fit needs one per row of `x` column 1. Pass `x` column 2 "
     "with 2 rows."),
    ("fit", ([], []), {}, "`x` is empty: fit needs at least one row. Pass at least one example."),
    ("fit", (TEXTS, [0, 1]), {"validation_data": (["w1"], ["good"])},
     "`validation_data[1]` row 0: label 'good' is not one of ['neg', 'pos']. Fix the label, or build the task "
     "with `labels` that name every class (in id order)."),
    ("evaluate", (TEXTS, [0, 7]), {},
     "`y` row 1: class id 7 is outside 0..1 (num_classes=2). Pass ids 0..1, or build the task with num_classes=8 "
     "or more."),
    ("predict", ([1, 2, 3],), {}, f"`x` row 0 is 1 (int), not a string. {TEXT_FIX}"),
    ("predict", (["w1", None],), {}, f"`x` row 1 is None (NoneType), not a string. {TEXT_FIX}"),
    ("predict", ([("w1", "w2"), ("w3", 4)],), {}, f"`x` row 1 (column 2 of 2) is 4 (int), not a string. {TEXT_FIX}"),
    ("predict", ([],), {}, "`x` is empty: predict needs at least one row. Pass at least one example."),
]


@pytest.mark.parametrize("call, args, kwargs, message", MISTAKES,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(MISTAKES)])
def test_each_mistake_is_one_line_before_the_graph(classifier, call, args, kwargs, message):
    assert refused(classifier, call, *args, **kwargs) == message


def test_label_names_train_as_their_ids():
    runs = []
    for labels in (["pos", "neg"], [1, 0]):
        keras.utils.set_random_seed(0)
        task = BertClassifier.from_preset(FIXTURE, labels=["neg", "pos"], dropout=0.0, sequence_length=16)
        loss = task.fit(TEXTS, labels, batch_size=2, shuffle=False, verbose=0).history["loss"]
        runs.append((loss, [np.array(w) for w in task.trainable_weights]))
    assert runs[0][0] == runs[1][0]
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][1], runs[1][1]))
    names = task.evaluate(TEXTS, np.array(["pos", "neg"]), verbose=0)
    assert names == task.evaluate(TEXTS, [1, 0], verbose=0)


def test_names_without_labels_and_regression_scores_are_refused():
    task = BertClassifier.from_preset(FIXTURE, num_classes=2, sequence_length=16)
    assert refused(task, "fit", TEXTS, ["pos", "neg"]) == (
        "`y` row 0 is the label name 'pos', but this BertClassifier has no `labels` to map names to ids. Pass ids "
        "0..1, or build it with labels=[...] (one name per class, in id order).")
    regression = BertClassifier.from_preset(FIXTURE, num_classes=1, sequence_length=16)
    assert refused(regression, "fit", TEXTS, [0.5, "high"]) == (
        "`y` row 1 is 'high' (str), not a score: this BertClassifier is a regression (num_classes=1) and takes one "
        "finite number per row. Pass scores, or build it with num_classes=2 or more for classes.")


def test_a_loss_of_the_callers_gets_its_targets_as_given():
    task = BertClassifier.from_preset(FIXTURE, num_classes=2, sequence_length=16)
    task.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True))
    one_hot = np.eye(2, dtype="float32")[[1, 0]]  # not class ids: the caller's loss reads them
    assert np.all(np.isfinite(task.evaluate(TEXTS, one_hot, verbose=0)))
    with pytest.raises(ValueError, match=r"^`x` has 2 rows but `y` has 1: evaluate needs one per row of `x`"):
        task.evaluate(TEXTS, one_hot[:1], verbose=0)  # rows are still counted


def test_token_labels_take_tag_names_and_one_label_per_word():
    keras.utils.set_random_seed(0)
    tagger = BertTokenClassifier.from_preset(FIXTURE, labels=["O", "B-X", "I-X"], sequence_length=16)
    assert refused(tagger, "fit", TEXTS, [["O", "B-X", "I-X"], ["O"]]) == (
        "`y` row 1 has 1 label for 2 words of `x` row 1. Give one label per word (words are what whitespace "
        "separates).")
    assert refused(tagger, "fit", TEXTS, np.array([[0, 1, 7], [0, 0, -1]])) == (
        "`y` row 0, word 2: class id 7 is outside 0..2 (num_classes=3). Pass ids 0..2, or build the task with "
        "num_classes=8 or more.")
    assert refused(tagger, "fit", TEXTS, tf.ragged.constant([[0, 1, 2], [0, 9]])).startswith(
        "`y` row 1, word 1: class id 9 is outside 0..2")  # ragged rows, as the preprocessor takes them
    assert refused(tagger, "fit", TEXTS, [["O", "B-X", "B-Y"], ["O", "O"]]).startswith(
        "`y` row 0, word 2: label 'B-Y' is not one of ['O', 'B-X', 'I-X'].")
    with pytest.raises(ValueError, match=r"^`x` row 0 is 3 \(int\), not a string"):
        tagger.predict_tags([3])
    assert tagger.predict_tags([]) == []  # no sentences: no tags
    # Names and their ids train alike; -1 after a sentence's words is padding, as conll_inputs writes it.
    losses = []
    for y in ([["O", "B-X", "I-X"], ["O", "B-X"]], np.array([[0, 1, 2], [0, 1, -1]])):
        keras.utils.set_random_seed(0)
        task = BertTokenClassifier.from_preset(FIXTURE, labels=["O", "B-X", "I-X"], dropout=0.0, sequence_length=16)
        losses.append(task.fit(TEXTS, y, batch_size=2, shuffle=False, verbose=0).history["loss"])
    assert losses[0] == losses[1]


def test_choices_and_spans_are_checked_against_the_task():
    choices = BertMultipleChoice.from_preset(FIXTURE, num_choices=2, sequence_length=16)
    x = (["w1", "w2"], [["w3", "w4"], ["w5", "w6"]])
    assert refused(choices, "fit", x, [0, 2]) == (
        "`y` row 1: class id 2 is outside 0..1 (num_choices=2). Pass ids 0..1, or build the task with num_choices=3 "
        "or more.")
    qa = BertSpanExtractor.from_preset(FIXTURE, sequence_length=24)
    pairs = (["w1 w2?", "w3?"], ["w4 w5 w6", "w7 w8"])
    assert refused(qa, "fit", pairs, np.array([[0, 2], [3, 9]])) == (
        "`y` row 1: the span [3, 9) is not inside its context of 5 characters. Pass [start, end) character offsets "
        "into the context, or (-1, -1) for no answer.")
    with pytest.raises(ValueError, match=r"^`x` row 0 \(column 1 of 2\) is 1 \(int\), not a string"):
        qa.predict(([1], ["w4 w5"]), verbose=0)


def test_the_readers_answer_a_bad_label_as_fit_does(tmp_path):
    from tools import finetune

    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\nw1 w2\t1\nw3\tpositive\n", encoding="utf-8")
    with pytest.raises(ValueError) as from_file:
        read_glue("sst2", str(path))
    assert str(from_file.value) == f"{path}, line 3, column 2 ('label'): label 'positive' is not one of ['0', '1']."
    out = tmp_path / "run"
    with pytest.raises(ValueError) as from_tool:  # tools/finetune.py prints it as one `error:` line, exit 2
        finetune.main(["--task", "sst2", "--train-file", str(path), "--dev-file", str(path), "--preset", FIXTURE,
                       "--output-dir", str(out), "--no-progress"])
    assert str(from_tool.value) == f"--train-file: {from_file.value}"
    assert not out.exists()  # refused before anything was built or written
    with pytest.raises(ValueError) as from_tags:
        encode_tags([["O", "B-PER"], ["B-LOC"]], ["O", "B-PER", "I-PER"])
    assert str(from_tags.value) == (
        "`tags` sentence 1, word 0: label 'B-LOC' is not one of ['O', 'B-PER', 'I-PER']. Read the label set from "
        "the training file (`conll_labels`), or add the label.")
