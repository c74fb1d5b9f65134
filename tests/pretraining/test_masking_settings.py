"""The masking settings of `PretrainingConfig` (rate, whole-word) reach the batches it trains on,
are refused where they cannot apply, and are recorded in the saved preset."""

import dataclasses

import numpy as np
import pytest

from keras_bert_zoo.pretraining.config import PretrainingConfig
from keras_bert_zoo.pretraining.phases import phase_settings
from keras_bert_zoo.pretraining.run import pretraining_record, read_batches
from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=32)


def _config(tmp_path, text, vocab, **overrides):
    kwargs = dict(train_files=text, vocabulary=vocab, size=dict(SIZE), steps=2, batch_size=16, sequence_length=32,
                  max_predictions=32, progress=False)
    kwargs.update(overrides)
    return PretrainingConfig(str(tmp_path / "preset"), str(tmp_path / "ckpt"), **kwargs)


def _masked_share(config, vocab):
    phase = phase_settings(config, 32)[0]
    x, y = next(iter(read_batches(config, BertTokenizer(vocab), phase, 64)))
    real = np.asarray(x["padding_mask"]).sum(1)  # the original counts [CLS] and [SEP] in the length it masks a share of
    return float(np.mean(np.asarray(y["mlm_weights"]).sum(1) / real))


def test_the_mask_rate_reaches_the_batches(tmp_path, corpus):
    assert _masked_share(_config(tmp_path, *corpus), corpus[1]) == pytest.approx(0.15, abs=0.04)
    assert _masked_share(_config(tmp_path, *corpus, masked_lm_prob=0.4), corpus[1]) == pytest.approx(0.4, abs=0.06)


def test_whole_word_masking_masks_every_piece_of_a_word(tmp_path):
    text, vocab = tmp_path / "corpus.txt", tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "walk", "talk", "##ing", "##ed", "."]))
    rng = np.random.default_rng(0)
    words = ["walking", "talked", "walk", "talking", "walked"]
    text.write_text("\n".join(" ".join(rng.choice(words, 6)) + " ." + ("\n" if i % 4 == 3 else "")
                              for i in range(200)) + "\n")
    config = _config(tmp_path, str(text), str(vocab), whole_word_masking=True, masked_lm_prob=0.3)
    phase = phase_settings(config, 32)[0]
    tokenizer = BertTokenizer(str(vocab))
    x, y = next(iter(read_batches(config, tokenizer, phase, 32)))
    pieces = tokenizer.get_vocabulary()
    for row in range(32):
        weights = np.asarray(y["mlm_weights"][row]) > 0
        masked = set(np.asarray(x["mask_positions"][row])[weights].tolist())
        ids = np.asarray(x["token_ids"][row]).copy()
        ids[list(masked)] = np.asarray(y["mlm_ids"][row])[weights]
        for position in masked:  # a masked "##" piece's word start is masked too, and the reverse
            # (truncation may cut a word, leaving a "##" piece just after [CLS] or [SEP]: it has no start)
            if pieces[ids[position]].startswith("##") and pieces[ids[position - 1]] not in ("[CLS]", "[SEP]"):
                assert position - 1 in masked
            if position + 1 < len(ids) and pieces[ids[position + 1]].startswith("##"):
                assert position + 1 in masked


def test_masking_settings_are_refused_for_tfrecords_and_checked(tmp_path, corpus):
    with pytest.raises(ValueError, match="TFRecords hold their masks already"):
        PretrainingConfig("p", "c", tfrecords="x.tfrecord", vocabulary=corpus[1], size=SIZE, masked_lm_prob=0.3)
    with pytest.raises(ValueError, match="`masked_lm_prob` must be a float in \\(0, 1\\)"):
        _config(tmp_path, *corpus, masked_lm_prob=1.5)


def test_the_preset_records_the_trained_length_and_masking(tmp_path, corpus):
    config = dataclasses.replace(_config(tmp_path, *corpus, masked_lm_prob=0.25, whole_word_masking=True),
                                 phase2_steps=1, phase2_sequence_length=32)
    record = pretraining_record(config, phase_settings(config, 32), step=2)
    assert record["masked_lm_prob"] == 0.25 and record["whole_word_masking"] is True
    assert record["sequence_length"] == 32 and record["steps"] == 2 and record["bias_correction"] is True
    short = _config(tmp_path, *corpus, sequence_length=16)
    assert pretraining_record(short, phase_settings(short, 32), step=2)["sequence_length"] == 16
