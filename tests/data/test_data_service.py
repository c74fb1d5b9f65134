"""tf.data service: the pretraining pipeline on two workers behind an in-process dispatcher.

Everything listens on 127.0.0.1 (ports chosen by the OS). With dynamic sharding every input
file is read by exactly one worker per epoch: the summed per-window counts (documents,
segments, tokens) equal the local pipeline's, while the instances themselves may differ
(windows form per worker; stated in `keras_bert_zoo.data.data_service`).
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.data.data_service import distribute
from keras_bert_zoo.data.pretraining import instance_windows, make_masker, pretraining_dataset
from keras_bert_zoo.text.bert_tokenizer import BertTokenizer
from tests.data.pretraining_corpus import write_corpus, write_vocab

COUNTS = ("documents", "segments", "tokens", "unknown_tokens")


@pytest.fixture(scope="module")
def service():
    service_lib = tf.data.experimental.service
    dispatcher = service_lib.DispatchServer(service_lib.DispatcherConfig(port=0))
    address = dispatcher.target.split("://")[1]
    workers = [service_lib.WorkerServer(service_lib.WorkerConfig(dispatcher_address=address,
                                                                 worker_address="127.0.0.1:%port%",
                                                                 heartbeat_interval_ms=100))
               for _ in range(2)]
    yield dispatcher.target
    for worker in workers:
        worker.stop()
    dispatcher.stop()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("service")
    paths = write_corpus(root, 800, shards=6)
    return paths, BertTokenizer(write_vocab(root), lowercase=True)


def _windows(corpus):
    paths, tokenizer = corpus
    masker = make_masker(tokenizer, 5, 0.15)
    return instance_windows(paths, tokenizer, masker, sequence_length=32, seed=3, epochs=1, window_size=8)


def _counts(dataset):
    totals = dict.fromkeys(COUNTS, 0)
    for _, stats in dataset:
        for key in COUNTS:
            totals[key] += int(stats[key])
    return totals


def test_data_service_reads_every_document_once_per_epoch(service, corpus):
    windows = _windows(corpus)
    local = _counts(windows)
    remote = _counts(windows.apply(distribute(service, job_name="counts")))
    assert local["documents"] > 50
    assert remote == local


def test_data_service_feeds_pretraining_batches(service, corpus):
    paths, tokenizer = corpus
    ds = pretraining_dataset(paths, tokenizer, 8, sequence_length=32, max_predictions=5, num_epochs=1,
                             window_size=8)
    local = sum(int(np.sum(y["mlm_weights"] > 0)) for _, y in ds)
    batches = list(ds.apply(distribute(service.split("://")[1], job_name="batches")))
    x, y = batches[0]
    assert x["token_ids"].shape == (8, 32) and y["mlm_ids"].shape == (8, 5)
    cls = tokenizer.cls_token_id
    assert all(np.all(b[0]["token_ids"].numpy()[:, 0] == cls) for b in batches)
    # Windows differ per worker, so the number of instances (and masked positions) may
    # differ a little from the local pipeline's; the documents read are the same.
    remote = sum(int(np.sum(b[1]["mlm_weights"].numpy() > 0)) for b in batches)
    assert abs(remote - local) <= 0.1 * local


def test_data_service_shares_one_job_between_trainers(service, corpus):
    windows = _windows(corpus)
    local = _counts(windows)
    # Two trainers on one job name split the epoch between them.
    first = iter(windows.apply(distribute(service, job_name="shared")))
    second = iter(windows.apply(distribute(service, job_name="shared")))
    totals = dict.fromkeys(COUNTS, 0)
    for iterator in _alternate(first, second):
        for key in COUNTS:
            totals[key] += int(iterator[1][key])
    assert totals == local


def _alternate(*iterators):
    live = list(iterators)
    while live:
        for it in list(live):
            try:
                yield next(it)
            except StopIteration:
                live.remove(it)


def test_data_service_refuses_bad_addresses():
    for bad in ("localhost", "http://x:1", "", None, "host:port"):
        with pytest.raises(ValueError, match="dispatcher address"):
            distribute(bad)
    with pytest.raises(ValueError, match="job_name"):
        distribute("localhost:5050", job_name="")


def test_data_service_drives_pretraining_and_a_resume_restores_the_model(service, corpus, tmp_path):
    """`run_pretraining(data_service=...)`: batches come from the service; after the run, a
    longer run on the same checkpoints resumes the model and step (the input starts afresh)."""
    from keras_bert_zoo.pretraining.config import PretrainingConfig
    from keras_bert_zoo.pretraining.run import run_pretraining

    paths, tokenizer = corpus
    vocab = os.path.join(os.path.dirname(paths[0]), "vocab.txt")
    settings = dict(train_files=paths, vocabulary=vocab, strategy="cpu", warmup_steps=1, batch_size=4,
                    learning_rate=1e-3, sequence_length=32, max_predictions=5, save_every=2, progress=False,
                    size=dict(num_layers=1, num_heads=2, hidden_dim=16, intermediate_dim=32,
                              max_sequence_length=32), data_service=service.split("://")[1])
    first = run_pretraining(PretrainingConfig(str(tmp_path / "a"), str(tmp_path / "ckpt"), steps=2, **settings))
    assert first["step"] == 2
    trained = [w.numpy() for w in first["model"].backbone.weights]
    start = {}

    class RecordStart(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            start["weights"] = [w.numpy() for w in self.model.backbone.weights]

    second = run_pretraining(PretrainingConfig(str(tmp_path / "b"), str(tmp_path / "ckpt"), steps=4, **settings),
                             callbacks=[RecordStart()])
    assert second["resumed_from"] == 2 and second["step"] == 4
    # The second run started from the first one's trained weights (restored from the checkpoint).
    for a, b in zip(start["weights"], trained):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="dispatcher address"):
        PretrainingConfig(str(tmp_path / "c"), str(tmp_path / "ckpt"), steps=4, **dict(settings, data_service="x"))
