"""`fit(..., length_buckets=k)`: batches of rows of similar length, every row once per epoch,
reshuffled; the same training as random batches where the grouping cannot matter."""

import collections

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.models import task_inputs
from tests.helpers import assert_all_close
from tests.models.test_bert_classifier import tiny_classifier

SHORT = [f"w{i}" for i in range(1, 9)]  # 1 word piece each: 3 tokens with [CLS]/[SEP]
LONG = [" ".join(f"w{(i + j) % 50 + 1}" for j in range(12)) for i in range(8)]  # 14 tokens
TEXTS = [t for pair in zip(SHORT, LONG) for t in pair]  # interleaved: short, long, short, ...
LABELS = np.arange(len(TEXTS)) % 2


def _epoch(dataset):
    return [(list(x.numpy()), list(y.numpy())) for x, y in dataset]


def test_every_row_once_per_epoch_in_sorted_windows_reshuffled():
    keras.utils.set_random_seed(0)
    texts = np.array([("w1 " * n).strip() for n in range(1, 21)])
    dataset = task_inputs.bucketed_dataset(texts, np.arange(20), batch_size=4, window_batches=5)
    assert int(dataset.cardinality()) == 5
    epochs = [_epoch(dataset) for _ in range(3)]
    for batches in epochs:
        rows = [(t, int(y)) for x, y in batches for t, y in zip(x, y)]
        assert collections.Counter(rows) == collections.Counter((t.encode(), i) for i, t in enumerate(texts))
        assert [len(x) for x, _ in batches] == [4] * 5
        # One window holds every row: the batches partition the length order.
        spans = sorted((min(len(t) for t in x), max(len(t) for t in x)) for x, _ in batches)
        assert all(spans[i][1] <= spans[i + 1][0] for i in range(4))
    orders = {tuple(tuple(y) for _, y in batches) for batches in epochs}
    assert len(orders) > 1  # batch order (and membership within windows) differs between epochs


def test_buckets_cut_padding_to_each_batch_of_similar_rows():
    task = tiny_classifier()
    widths = {}
    for buckets in (None, 4):
        keras.utils.set_random_seed(1)
        dataset, _ = task._prepare(np.array(TEXTS), LABELS, batch_size=4, shuffle=True, buckets=buckets)
        widths[buckets] = sorted(int(x["token_ids"].shape[1]) for x, _ in dataset)
    # Sorted into 2 batches of short rows (3 tokens → 8) and 2 of long ones (14 → 16).
    assert widths[4] == [8, 8, 16, 16]
    assert sum(widths[None]) >= sum(widths[4])


def test_one_batch_trains_the_same_weights_as_without_buckets():
    trained = []
    for buckets in (None, 1):
        task = tiny_classifier()
        task.compile(optimizer=keras.optimizers.SGD(0.5))
        history = task.fit(TEXTS, LABELS, batch_size=len(TEXTS), epochs=2, verbose=0, length_buckets=buckets)
        trained.append(([v.numpy() for v in task.trainable_variables], history.history["loss"]))
    (weights_a, loss_a), (weights_b, loss_b) = trained
    assert_all_close(loss_b, loss_a, atol=1e-5, rtol=1e-5)
    for a, b in zip(weights_a, weights_b):
        assert_all_close(b, a, atol=1e-5, rtol=1e-5)
    assert not np.allclose(weights_a[0], tiny_classifier().trainable_variables[0].numpy())  # it trained


def test_length_buckets_bad_arguments_name_the_fix():
    task = tiny_classifier()
    task.compile()
    with pytest.raises(ValueError, match="length_buckets.*shuffle=False"):
        task.fit(TEXTS, LABELS, shuffle=False, length_buckets=2, verbose=0)
    dataset = tf.data.Dataset.from_tensor_slices((TEXTS, LABELS)).batch(4)
    with pytest.raises(ValueError, match="length_buckets.*Dataset"):
        task.fit(dataset, length_buckets=2, verbose=0)
    with pytest.raises(ValueError, match="int >= 1.*length_buckets=0"):
        task.fit(TEXTS, LABELS, length_buckets=0, verbose=0)


def _traces_of_one_epoch(texts, batch_size, **kwargs):
    task = tiny_classifier()
    task.compile()
    traces, train_step = [0], task.train_step

    def counted(data):  # Python runs only while the train function is traced
        traces[0] += 1
        return train_step(data)

    task.train_step = counted
    task.fit(texts, np.arange(len(texts)) % 2, batch_size=batch_size, epochs=1, verbose=0, **kwargs)
    return traces[0]


def test_batches_of_every_length_share_one_trace():
    # 8 length-bucketed batches cut to 8 or 16 tokens trace the train step as often as one batch
    # does: the per-batch cut does not retrace per shape.
    # Once, not twice: the optimizer's and metrics' variables exist before the first step
    # (`Task._build_state`), so TensorFlow does not trace again without variable creation.
    assert _traces_of_one_epoch(TEXTS[:4], batch_size=4) == 1
    assert _traces_of_one_epoch(TEXTS, batch_size=2, length_buckets=2) == 1
