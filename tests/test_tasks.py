"""The task table (`keras_bert_zoo/tasks.py`) against what reads it: the readers' formats, the
GLUE metrics, the kinds and the config's defaults."""

import pytest

from keras_bert_zoo.data.glue import GLUE_FORMATS
from keras_bert_zoo.data.glue_tfds import TFDS_GLUE
from keras_bert_zoo.finetuning import run
from keras_bert_zoo.finetuning.config import PAIR_TASKS, FinetuningConfig
from keras_bert_zoo.metrics.glue import TASK_METRICS
from keras_bert_zoo.tasks import NAMES, TASKS, names_of, task_facts


def test_rows_agree_with_the_readers_metrics_and_kinds():
    assert len(set(NAMES)) == len(NAMES) and set(run.KINDS) == set(NAMES)
    for task in TASKS:
        assert run.KINDS[task.name].__module__.endswith(f"finetuning.{task.kind}"), task.name
        assert task.objective in task.metrics, task.name
        if task.reader == "read_glue":
            assert task.pair == (len(GLUE_FORMATS[task.name].text_columns) == 2), task.name
            assert task.unit == ("score" if not GLUE_FORMATS[task.name].file_labels else "class"), task.name
            assert task.tfds is None or TFDS_GLUE[task.tfds[len("glue/"):]][0] == task.name, task.name
    assert set(TASK_METRICS) == set(names_of("glue") + names_of("swag"))
    assert PAIR_TASKS == names_of(pair=True)


def test_snli_is_a_glue_layout_pair_task_read_from_files_only(tmp_path):
    snli = task_facts("snli")
    assert (snli.kind, snli.task_class, snli.metrics, snli.objective, snli.text_inputs, snli.tfds) == (
        "glue", "BertClassifier", ("accuracy",), "accuracy", ("text_a", "text_b"), None)
    with pytest.raises(ValueError, match="--train-file: tensorflow-datasets has no SNLI"):
        FinetuningConfig("snli", "tfds:train", __file__, "bert_tiny_en_uncased", str(tmp_path))
    with pytest.raises(ValueError, match="Unknown task. Received: task='snli_1.0'"):
        task_facts("snli_1.0")
