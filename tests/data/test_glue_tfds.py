"""load_glue_tfds on real tfds datasets built locally (named glue/*, tfds's features), offline."""

import numpy as np
import pytest

from keras_bert_zoo.data.glue_tfds import load_glue_tfds


def _store(data_dir, config, features, splits):
    import tensorflow_datasets as tfds

    tfds.dataset_builders.store_as_tfds_dataset(
        name="glue", version="2.0.0", config=config, data_dir=str(data_dir),
        features=tfds.features.FeaturesDict(features),
        split_datasets={split: list(enumerate(rows)) for split, rows in splits.items()},
    )


def test_pairs_in_idx_order_with_labels_mapped_by_name(tmp_path):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    features = {"premise": tfds.features.Text(), "hypothesis": tfds.features.Text(), "idx": tf.int32,
                # tfds's order; ours (the original run_classifier's) is contradiction, entailment, neutral.
                "label": tfds.features.ClassLabel(names=["entailment", "neutral", "contradiction"])}
    rows = [{"premise": "P1", "hypothesis": "H1", "label": 2, "idx": 1},
            {"premise": "P0", "hypothesis": "H0", "label": 0, "idx": 0},
            {"premise": "P2", "hypothesis": "H2", "label": 1, "idx": 2}]
    unlabelled = [dict(row, label=-1) for row in rows[:2]]
    _store(tmp_path, "mnli", features, {"validation_matched": rows, "test_matched": unlabelled})
    x, y = load_glue_tfds("glue/mnli", "validation_matched", data_dir=str(tmp_path))
    assert x == (["P0", "P1", "P2"], ["H0", "H1", "H2"])
    assert y.dtype == "int32" and y.tolist() == [1, 0, 2]  # entailment, contradiction, neutral
    x, y = load_glue_tfds("mnli", "test_matched", data_dir=str(tmp_path))
    assert x == (["P0", "P1"], ["H0", "H1"]) and y is None


def test_single_sentences_and_unprepared_datasets(tmp_path):
    import tensorflow as tf
    import tensorflow_datasets as tfds

    features = {"sentence": tfds.features.Text(), "idx": tf.int32,
                "label": tfds.features.ClassLabel(names=["negative", "positive"])}
    rows = [{"sentence": "a gorgeous film", "label": 1, "idx": 0}, {"sentence": "dull", "label": 0, "idx": 1}]
    _store(tmp_path, "sst2", features, {"train": rows})
    x, y = load_glue_tfds("glue/sst2", "train", data_dir=str(tmp_path))
    assert x == ["a gorgeous film", "dull"] and y.tolist() == [1, 0]
    with pytest.raises(ValueError, match="glue/cola is not prepared"):
        load_glue_tfds("glue/cola", "train", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="name='glue/sts'"):
        load_glue_tfds("glue/sts", "train", data_dir=str(tmp_path))
    np.testing.assert_array_equal(y, [1, 0])
