"""Fine-tuned HF task checkpoints, as `transformers` itself writes them, load with their heads and
class names (issue 47): `BertForSequenceClassification` -> `BertClassifier` (id2label, regression),
`BertForTokenClassification` -> `BertTokenClassifier` (the tag set); our logits are transformers'
within 1e-4 on real sentences; contradicting arguments and unmappable labels are refused."""

import os

import numpy as np
import pytest

from keras_bert_zoo.models.bert_classifier import BertClassifier
from keras_bert_zoo.models.bert_multiple_choice import BertMultipleChoice
from keras_bert_zoo.models.bert_token_classifier import BertTokenClassifier

torch = pytest.importorskip("torch", reason="the HF checkpoints are written by transformers (the bench extra)")
transformers = pytest.importorskip("transformers", reason="the HF checkpoints are written by transformers (the bench extra)")

# A real-word vocabulary, so that the sentences are words, not [UNK]s.
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", "the", "a", "film", "was", "great", "dull",
         "and", "long", "john", "lives", "in", "paris", "mary", "met", "bob", "at", "berlin", "it", "is",
         "not", "bad", "really", "good", "##s", "##ing", "we", "loved", "story", "acting", "london"]
SENTENCES = ["The film was great.", "Dull and long, the film was not good", "John lives in Paris",
             "Mary met Bob at the Berlin film", "We loved the story and the acting"]
SENTIMENT = {0: "negative", 1: "positive", 2: "neutral"}
TAGS = {0: "O", 1: "B-PER", 2: "I-PER", 3: "B-LOC", 4: "I-LOC"}


def write_hf(tmp_path, cls_name, name="hf", **config):
    """A tiny random `transformers.<cls_name>` saved by transformers, with its tokenizer files."""
    torch.manual_seed(0)
    bert_config = transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32, initializer_range=0.3, **config)
    model = getattr(transformers, cls_name)(bert_config).eval()
    path = tmp_path / name
    model.save_pretrained(str(path))
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    transformers.BertTokenizer(str(tmp_path / "vocab.txt"), do_lower_case=True).save_pretrained(str(path))
    # transformers 5 saves tokenizer.json, not vocab.txt; hub folders carry both.
    (path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    return str(path), model


def hf_logits(model, ids):
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids["token_ids"], dtype=torch.long),
                    token_type_ids=torch.tensor(ids["segment_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(ids["padding_mask"], dtype=torch.long))
    return out.logits.numpy()


def packed(task, sentences):
    return {k: np.asarray(v) for k, v in task.preprocessor(sentences).items()}


def test_sequence_classifier_takes_its_classes_and_names_from_id2label(tmp_path):
    path, hf = write_hf(tmp_path, "BertForSequenceClassification", id2label=SENTIMENT,
                        label2id={v: k for k, v in SENTIMENT.items()})
    task = BertClassifier.from_preset(path, dropout=0.0, sequence_length=16)
    assert task.num_classes == 3 and task.labels == ["negative", "positive", "neutral"]
    ids = packed(task, SENTENCES)
    tokenizer = transformers.BertTokenizer.from_pretrained(path)
    first = tokenizer(SENTENCES[1], max_length=16, truncation=True)["input_ids"]
    np.testing.assert_array_equal(ids["token_ids"][1][: len(first)], first)
    expected = hf_logits(hf, ids)
    assert np.abs(expected).max() > 0.1  # a head that says something
    np.testing.assert_allclose(task.predict(SENTENCES, verbose=0), expected, atol=1e-4)
    answers = task.postprocess(task.predict(SENTENCES, verbose=0))
    assert list(answers["label"]) == [SENTIMENT[i] for i in expected.argmax(-1)]
    # The same names, passed again, are no contradiction.
    same = BertClassifier.from_preset(path, labels=["negative", "positive", "neutral"], num_classes=3)
    assert same.labels == task.labels


def test_regression_and_default_names(tmp_path):
    path, hf = write_hf(tmp_path, "BertForSequenceClassification", num_labels=1, problem_type="regression")
    task = BertClassifier.from_preset(path, dropout=0.0, sequence_length=16)
    assert task.num_classes == 1 and task.labels is None
    np.testing.assert_allclose(task.predict(SENTENCES, verbose=0), hf_logits(hf, packed(task, SENTENCES)), atol=1e-4)
    # transformers' LABEL_0, LABEL_1 are no names.
    path, _ = write_hf(tmp_path, "BertForSequenceClassification", name="default")
    task = BertClassifier.from_preset(path, sequence_length=16)
    assert task.num_classes == 2 and task.labels is None
    named = BertClassifier.from_preset(path, labels=["no", "yes"], sequence_length=16)
    assert named.labels == ["no", "yes"]


def test_contradictions_and_unmappable_heads_are_refused(tmp_path):
    path, _ = write_hf(tmp_path, "BertForSequenceClassification", id2label=SENTIMENT)
    with pytest.raises(ValueError, match=r"labels=\['bad', 'good', 'meh'\] contradict the checkpoint's, "
                                         r"\['negative', 'positive', 'neutral'\]"):
        BertClassifier.from_preset(path, labels=["bad", "good", "meh"])
    with pytest.raises(ValueError, match=r"num_classes=2 contradicts the checkpoint's head .* which has 3 classes "
                                         r"\['negative', 'positive', 'neutral'\]"):
        BertClassifier.from_preset(path, num_classes=2)
    with pytest.raises(ValueError, match=r"holds a BertClassifier head, not a BertTokenClassifier one"):
        BertTokenClassifier.from_preset(path)
    multi, _ = write_hf(tmp_path, "BertForSequenceClassification", name="multi", id2label=SENTIMENT,
                        problem_type="multi_label_classification")
    with pytest.raises(ValueError, match=r"multi_label_classification.*BertClassifier picks one class"):
        BertClassifier.from_preset(multi)


def test_token_classifier_takes_the_tag_set(tmp_path, caplog):
    path, hf = write_hf(tmp_path, "BertForTokenClassification", id2label=TAGS)
    with caplog.at_level("INFO", logger="keras_bert_zoo.weights"):
        task = BertTokenClassifier.from_preset(path, dropout=0.0, sequence_length=16)
    assert task.labels == ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"] and task.num_classes == 5
    assert "5 tags in IOB2" in caplog.text
    ids = {k: np.asarray(v) for k, v in task.preprocessor.windows(SENTENCES).items()}
    packed_ids = {k: ids[k] for k in ("token_ids", "segment_ids", "padding_mask")}
    ours = task.predict(packed_ids, verbose=0)
    expected = hf_logits(hf, packed_ids)
    mask = packed_ids["padding_mask"].astype(bool)
    np.testing.assert_allclose(ours[mask], expected[mask], atol=1e-4)
    words = task.predict_tags(SENTENCES)
    assert [len(w) for w in words] == [len(s.split()) for s in SENTENCES]


def test_token_labels_that_are_no_tags_need_names(tmp_path):
    path, _ = write_hf(tmp_path, "BertForTokenClassification", id2label={0: "O", 1: "PER", 2: "LOC"})
    with pytest.raises(ValueError, match=r"labels \['O', 'PER', 'LOC'\] .* are not all tags.*'I-PER' for 'PER'"):
        BertTokenClassifier.from_preset(path)
    task = BertTokenClassifier.from_preset(path, labels=["O", "I-PER", "I-LOC"], sequence_length=16)
    assert task.labels == ["O", "I-PER", "I-LOC"]


def test_question_answering_and_multiple_choice_heads_load(tmp_path):
    from keras_bert_zoo.models.bert_span_extractor import BertSpanExtractor

    path, hf = write_hf(tmp_path, "BertForQuestionAnswering")
    task = BertSpanExtractor.from_preset(path, dropout=0.0, sequence_length=16)
    np.testing.assert_allclose(task.span_dense.kernel.numpy().T, hf.qa_outputs.weight.detach().numpy(), atol=0)
    path, hf = write_hf(tmp_path, "BertForMultipleChoice", name="choice")
    task = BertMultipleChoice.from_preset(path, num_choices=2, dropout=0.0, sequence_length=16)
    pairs = (["John lives in Paris", "The film was great"], [["in berlin", "in london"], ["really", "not bad"]])
    ids = {k: np.asarray(v) for k, v in task.preprocessor(pairs).items()}
    np.testing.assert_allclose(task.predict(pairs, verbose=0), hf_logits(hf, ids), atol=1e-4)
    assert os.path.isfile(os.path.join(path, "model.safetensors"))
