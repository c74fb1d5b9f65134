"""GLUE from `tensorflow-datasets` (`glue/*`), as the same `(x, y)` as the file readers.

Offline-safe: this never downloads. tfds's download path retries the network for
minutes when it is unreachable, so the dataset must already be prepared under
`data_dir` (by `tfds.builder("glue/sst2").download_and_prepare()` once online, or
copied from a machine that did). Rows come back in tfds's `idx` order and label ids
are mapped by name to `glue_labels(task)`'s order (tfds orders MNLI's differently).
"""

import numpy as np

from keras_bert_zoo.data.glue import glue_labels

# tfds config -> (our task, tfds feature names of sentence A (and B)).
TFDS_GLUE = {
    "cola": ("cola", ("sentence",)),
    "sst2": ("sst2", ("sentence",)),
    "mrpc": ("mrpc", ("sentence1", "sentence2")),
    "qqp": ("qqp", ("question1", "question2")),
    "stsb": ("stsb", ("sentence1", "sentence2")),
    "mnli": ("mnli", ("premise", "hypothesis")),
    "mnli_matched": ("mnli", ("premise", "hypothesis")),
    "mnli_mismatched": ("mnli", ("premise", "hypothesis")),
    "ax": ("mnli", ("premise", "hypothesis")),
    "qnli": ("qnli", ("question", "sentence")),
    "rte": ("rte", ("sentence1", "sentence2")),
    "wnli": ("wnli", ("sentence1", "sentence2")),
}


def load_glue_tfds(name, split, data_dir=None):
    """Reads a prepared tfds GLUE dataset without touching the network.

    Args:
        name: str. `"glue/sst2"` (optionally `"glue/sst2:2.0.0"`) or just `"sst2"`.
        split: str. A tfds split: "train", "validation", "test", MNLI's
            "validation_matched", "test_mismatched", ..., or a slice like "train[:10%]".
        data_dir: str or None. Where the dataset was prepared; None is tfds's default
            (`~/tensorflow_datasets`). Defaults to None.

    Returns:
        `(x, y)` as `keras_bert_zoo.data.glue.read_glue`: `x` a list of strings or a tuple
        `(texts_a, texts_b)`, `y` int32 label ids (float32 STS-B scores), None for a test
        split (tfds stores its labels as -1).

    Examples:
    >>> (texts_a, texts_b), y = keras_bert_zoo.data.load_glue_tfds(
    ...     "glue/mrpc", "validation", data_dir="tensorflow_datasets")
    >>> texts_a, y
    (['The man sits down.', 'The sun is a star.'], array([1, 0], dtype=int32))
    """
    import tensorflow_datasets as tfds  # lazy: tensorflow_datasets is optional and slow to import

    config = name[len("glue/"):] if name.startswith("glue/") else name
    config_name = config.split(":")[0]
    if config_name not in TFDS_GLUE:
        raise ValueError(f"Unknown tfds GLUE config. Received: name={name!r}. Use glue/ + one of {tuple(TFDS_GLUE)}.")
    task, columns = TFDS_GLUE[config_name]
    builder = tfds.builder(f"glue/{config}", data_dir=data_dir, try_gcs=False)
    if not builder.is_prepared():
        raise ValueError(
            f"tfds dataset glue/{config} is not prepared under data_dir={data_dir!r} and this loader does not "
            "download. Prepare it once where the network is reachable "
            f"(tfds.builder('glue/{config}', data_dir=...).download_and_prepare()) and pass that data_dir."
        )
    rows = {key: [] for key in columns + ("label", "idx")}
    for batch in builder.as_dataset(split=split, shuffle_files=False).batch(4096).as_numpy_iterator():
        for key in rows:
            rows[key].append(batch[key])
    rows = {key: np.concatenate(parts) if parts else np.zeros(0) for key, parts in rows.items()}
    order = np.argsort(rows["idx"], kind="stable")
    texts = [[value.decode("utf-8") for value in rows[key][order]] for key in columns]
    x = texts[0] if len(texts) == 1 else tuple(texts)
    return x, _labels(task, builder.info.features["label"], rows["label"][order])


def _labels(task, feature, labels):
    if labels.size and np.all(labels == -1):
        return None  # tfds's test splits carry label -1
    names = glue_labels(task)
    if names is None:
        return labels.astype("float32")
    mapping = np.array([names.index(n) for n in feature.names], "int32")
    if np.any(labels < 0):
        raise ValueError(f"Some but not all labels are -1 (unlabelled) in this split of glue/{task}.")
    return mapping[labels]
