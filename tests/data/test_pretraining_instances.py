"""On-the-fly pretraining instances: statistics on a generated corpus of 3000 sentences,
structure, determinism, checkpointable iterators, and agreement with the Python port."""

import argparse

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.data import pretraining_report as report_lib
from keras_bert_zoo.data.pretraining import instance_windows, make_masker, pretraining_dataset
from tests.data import pretraining_corpus as corpus

S, P, EPOCHS = 64, 10, 5


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    d = tmp_path_factory.mktemp("pretraining_corpus")
    files = corpus.write_corpus(d, num_sentences=3000, shards=2)
    vocab_path = corpus.write_vocab(d)
    return files, vocab_path, corpus.make_tokenizer(vocab_path)


def _collect(files, tokenizer, epochs=EPOCHS, whole_word=False, seed=12345, window_size=256):
    masker = make_masker(tokenizer, P, 0.15, whole_word_masking=whole_word)
    feats, totals = [], report_lib.empty_totals(S)
    for f, s in instance_windows(files, tokenizer, masker, S, 0.1, seed, epochs, window_size):
        feats.append({k: v.numpy() for k, v in f.items()})
        report_lib.accumulate(totals, s)
    out = {k: np.concatenate([f[k] for f in feats]) for k in feats[0]}
    return out, report_lib.summarize(totals, {"masked_lm_prob": 0.15}, files, [], epochs)


@pytest.fixture(scope="module")
def generated(setup):
    files, _, tokenizer = setup
    return _collect(files, tokenizer)


def _unmasked(f):
    ids = f["token_ids"].copy()
    w = f["mlm_weights"] > 0
    rows = np.nonzero(w)[0]
    ids[rows, f["mask_positions"][w]] = f["mlm_ids"][w]
    return ids


def _doc_bytes(files, tokenizer):
    """Each document's token ids as bytes (vocab < 256), for substring checks."""
    docs = [[]]
    for path in files:
        for line in open(path, encoding="utf-8"):
            if line.strip():
                docs[-1].append(line.strip())
            elif docs[-1]:
                docs.append([])
    docs = [d for d in docs if d]
    ids = tokenizer(tf.constant([line for d in docs for line in d]))
    ids = tf.RaggedTensor.from_row_lengths(ids, [len(d) for d in docs]).merge_dims(1, 2)
    return [bytes(row.astype("uint8").tolist()) for row in ids.numpy()]


def test_statistics(generated):
    f, report = generated
    counts, rates = report["counts"], report["rates"]
    assert counts["instances"] == len(f["nsp_labels"]) > 3000
    assert abs(rates["nsp_random_next_coin"] - 0.5) < 0.02
    assert abs(rates["short_target_documents"] - 0.1) < 0.02
    assert abs(rates["mask_token_replaced"] - 0.8) < 0.02
    assert abs(rates["mask_token_kept"] - 0.1 - 0.1 / len(corpus.vocabulary())) < 0.02
    lengths = f["padding_mask"].sum(1)
    masked = (f["mlm_weights"] > 0).sum(1)
    rule = np.minimum(P, np.maximum(1, [int(round(n * 0.15)) for n in lengths]))
    np.testing.assert_array_equal(masked, rule)  # the original count rule, row by row
    long_rows = lengths >= 40
    rate = masked[long_rows].sum() / lengths[long_rows].sum()
    # The rule rounds per row (a full row of 64 gets round(9.6) = 10, 15.6%), so the rate
    # is compared with the rule's; each row is within half a token of 15% of its length.
    assert abs(rate - rule[long_rows].sum() / lengths[long_rows].sum()) < 0.005 and abs(rate - 0.15) < 0.5 / 40
    assert sum(report["length_histogram"]) == counts["instances"]
    assert counts["single_segment_chunks"] > 0 and rates["truncated"] > 0


def test_structure_specials_and_segments(generated):
    f, _ = generated
    ids, seg, mask = _unmasked(f), f["segment_ids"], f["padding_mask"]
    cls_id, sep_id = corpus.vocabulary().index("[CLS]"), corpus.vocabulary().index("[SEP]")
    assert not np.isin(f["mlm_ids"][f["mlm_weights"] > 0], [0, cls_id, sep_id]).any()
    for r in range(len(ids)):
        n = mask[r].sum()
        assert (mask[r, :n] == 1).all() and (mask[r, n:] == 0).all() and n <= S
        la = (seg[r, :n] == 0).sum() - 2
        assert ids[r, 0] == cls_id and ids[r, la + 1] == sep_id and ids[r, n - 1] == sep_id
        assert (ids[r, n:] == 0).all() and (seg[r, n:] == 0).all() and (seg[r, la + 2 : n] == 1).all()
        assert la >= 1 and n - la - 3 >= 1
        assert not np.isin(ids[r, 1 : la + 1], [cls_id, sep_id]).any()
        assert not np.isin(ids[r, la + 2 : n - 1], [cls_id, sep_id]).any()


def test_segments_come_from_the_documents(setup, generated):
    files, _, tokenizer = setup
    f, _ = generated
    docs = _doc_bytes(files, tokenizer)
    ids, seg, mask = _unmasked(f), f["segment_ids"], f["padding_mask"]
    for r in range(0, len(ids), 7):
        n = mask[r].sum()
        la = (seg[r, :n] == 0).sum() - 2
        a, b = bytes(ids[r, 1 : la + 1].astype("uint8")), bytes(ids[r, la + 2 : n - 1].astype("uint8"))
        if f["nsp_labels"][r] == 0:  # actual next: A then B in one document (truncation may cut between)
            assert any(a in d and b in d[d.index(a) + len(a):] for d in docs), r
        else:
            assert any(a in d for d in docs) and any(b in d for d in docs), r


def test_whole_word_groups_intact(setup):
    files, _, tokenizer = setup
    f, _ = _collect(files[:1], tokenizer, epochs=1, whole_word=True)
    vocab = corpus.vocabulary()
    cont = np.array([t.startswith("##") for t in vocab])
    ids = _unmasked(f)
    for r in range(len(ids)):
        n = f["padding_mask"][r].sum()
        chosen = set(f["mask_positions"][r][f["mlm_weights"][r] > 0].tolist())
        for p in range(2, n - 1):
            if cont[ids[r, p]] and ids[r, p - 1] not in (2, 3):  # p joins the word before it
                assert (p in chosen) == (p - 1 in chosen), (r, p)


def test_determinism_and_dynamic_masking(setup):
    files, _, tokenizer = setup
    a, _ = _collect(files[:1], tokenizer, epochs=2)
    b, _ = _collect(files[:1], tokenizer, epochs=1)  # a fresh pipeline, same seed
    half = len(b["nsp_labels"])
    for k in a:
        np.testing.assert_array_equal(a[k][:half], b[k])
    # Epoch 2 re-chunks and re-masks the same documents.
    assert not np.array_equal(a["token_ids"][:100], a["token_ids"][half : half + 100])
    assert not np.array_equal(a["mask_positions"][:100], a["mask_positions"][half : half + 100])


def test_batches_layout_and_checkpointable_iterator(setup, tmp_path):
    files, _, tokenizer = setup
    ds = pretraining_dataset(files, tokenizer, batch_size=4, sequence_length=S, max_predictions=P, window_size=32)
    x, y = ds.element_spec
    assert {k: (v.shape.as_list(), v.dtype) for k, v in x.items()} == {
        "token_ids": ([4, S], tf.int32), "segment_ids": ([4, S], tf.int32),
        "padding_mask": ([4, S], tf.int32), "mask_positions": ([4, P], tf.int32)}
    assert {k: (v.shape.as_list(), v.dtype) for k, v in y.items()} == {
        "mlm_ids": ([4, P], tf.int32), "mlm_weights": ([4, P], tf.float32), "nsp_labels": ([4], tf.int32)}
    it = iter(ds)
    for _ in range(2):
        next(it)
    ckpt = tf.train.Checkpoint(iterator=it)
    path = ckpt.write(str(tmp_path / "it"))
    first = [next(it) for _ in range(3)]
    ckpt.read(path)
    again = [next(it) for _ in range(3)]
    for u, v in zip(first, again):
        tf.nest.map_structure(np.testing.assert_array_equal, u, v)


def test_bad_options_refused(setup):
    files, _, tokenizer = setup
    for kwargs, name in [(dict(sequence_length=4), "sequence_length"), (dict(masked_lm_prob=1.5), "masked_lm_prob"),
                         (dict(window_size=1), "window_size"), (dict(max_predictions=0), "max_predictions")]:
        with pytest.raises(ValueError, match=name):
            pretraining_dataset(files, tokenizer, 2, **kwargs)
    with pytest.raises(ValueError, match="batch_size"):
        pretraining_dataset(files, tokenizer, 0)


def test_matches_the_python_port(setup, generated):
    """Same corpus: the pure-Python port of the original gives the same distributions."""
    from references.tokenizer import FullTokenizer
    from references import pretraining_data as port

    files, vocab_path, _ = setup
    opts = argparse.Namespace(max_seq_length=S, max_predictions_per_seq=P, random_seed=3, dupe_factor=EPOCHS,
                              masked_lm_prob=0.15, short_seq_prob=0.1, do_whole_word_mask=False)
    instances = port.create_training_instances(files, FullTokenizer(vocab_path, True), opts)
    _, report = generated
    ours = report["counts"]["instances"]
    assert abs(len(instances) - ours) / ours < 0.05
    port_len = np.mean([len(i.tokens) for i in instances])
    assert abs(port_len - report["rates"]["mean_length"]) < 1.5
    port_random = np.mean([i.is_random_next for i in instances])
    assert abs(port_random - report["rates"]["nsp_random_next"]) < 0.03


def test_rebuilding_the_pipeline_reuses_its_traces(setup):
    """A run builds its pipeline several times (corpus check, training, held-out): other seeds,
    epochs and batch sizes reuse the costly graphs' traces; other masking settings do not."""
    from keras_bert_zoo.data import pretraining

    files, _, tokenizer = setup
    first = pretraining_dataset(files[:1], tokenizer, 4, sequence_length=S, max_predictions=P, seed=1)
    tokenize, window = pretraining._window_functions(
        tokenizer, make_masker(tokenizer, P), S, 0.1, pretraining.special_token_ids(tokenizer))
    traces = (tokenize.experimental_get_tracing_count(), window.experimental_get_tracing_count())
    assert traces == (1, 1)
    again = pretraining_dataset(files[:1], tokenizer, 8, sequence_length=S, max_predictions=P, seed=2,
                                num_epochs=1, drop_remainder=False)
    assert (tokenize.experimental_get_tracing_count(), window.experimental_get_tracing_count()) == traces
    # The traced graphs take the seed as an argument: the batches still follow it.
    x1, x2 = next(iter(first))[0]["token_ids"].numpy(), next(iter(again))[0]["token_ids"].numpy()
    assert not np.array_equal(x1, x2[:4])
    pretraining_dataset(files[:1], tokenizer, 4, sequence_length=S, max_predictions=P + 1)
    other = pretraining._window_functions(tokenizer, make_masker(tokenizer, P + 1), S, 0.1,
                                          pretraining.special_token_ids(tokenizer))
    assert other[1] is not window and other[1].experimental_get_tracing_count() == 1


def test_the_kept_traces_do_not_keep_the_tokenizer_alive(setup):
    import gc
    import weakref

    from keras_bert_zoo.data import pretraining

    files, vocab_path, _ = setup
    tokenizer = corpus.make_tokenizer(vocab_path)
    next(iter(pretraining_dataset(files[:1], tokenizer, 4, sequence_length=S, max_predictions=P)))
    assert tokenizer in pretraining._FUNCTIONS
    gone = weakref.ref(tokenizer)
    del tokenizer
    gc.collect()
    assert gone() is None


def test_a_new_vocabulary_on_the_same_tokenizer_is_traced_again(setup):
    files, vocab_path, _ = setup
    tokenizer = corpus.make_tokenizer(vocab_path)
    first = next(iter(pretraining_dataset(files[:1], tokenizer, 4, sequence_length=S, max_predictions=P)))
    vocabulary = tokenizer.get_vocabulary()
    # Whole-word tokens swap ids; specials and `##` pieces keep theirs (so the masker is the same).
    words = [i for i, t in enumerate(vocabulary) if i >= 5 and not t.startswith("##")]
    swapped = list(vocabulary)
    for i, j in zip(words, words[::-1]):
        swapped[i] = vocabulary[j]
    tokenizer.set_vocabulary(swapped)
    second = next(iter(pretraining_dataset(files[:1], tokenizer, 4, sequence_length=S, max_predictions=P)))
    assert not np.array_equal(first[1]["mlm_ids"], second[1]["mlm_ids"])
