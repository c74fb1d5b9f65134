"""A truncated or foreign TFRecord file is named before any batch is read (issue 21, R25);
TensorFlow alone says "truncated record at N" mid-training, without a file name."""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.data.tfrecords import original_feature_spec, read_pretraining_tfrecords


def _write(path, rows=4):
    with tf.io.TFRecordWriter(str(path)) as w:
        for i in range(rows):
            ex = tf.train.Example()
            for name, spec in original_feature_spec(8, 2).items():
                kind = "float_list" if spec.dtype == tf.float32 else "int64_list"
                getattr(ex.features.feature[name], kind).value.extend([i + 1] * spec.shape[0])
            w.write(ex.SerializeToString())
    return path


def test_r25_truncated_tfrecord_is_named_before_reading(tmp_path):
    good = _write(tmp_path / "a.tfrecord")
    bad = _write(tmp_path / "b.tfrecord")
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) - 10])  # an interrupted copy: the last record is cut
    with pytest.raises(ValueError, match=f"{bad} is truncated"):
        read_pretraining_tfrecords(str(tmp_path / "*.tfrecord"), 2)
    x, y = next(iter(read_pretraining_tfrecords(str(good), 4)))  # a complete file still reads
    np.testing.assert_array_equal(x["token_ids"][:, 0], [1, 2, 3, 4])


def test_r25_a_file_that_is_not_a_tfrecord_is_named(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_text("A sentence, not a TFRecord.\n" * 20)
    with pytest.raises(ValueError, match=f"{text} is truncated or not a TFRecord"):
        read_pretraining_tfrecords(str(text), 2)
