"""One `TaskKind` per task family, picked from `run.KINDS`: every task served exactly once."""

from keras_bert_zoo.finetuning import run
from keras_bert_zoo.finetuning.config import TASKS
from keras_bert_zoo.finetuning.glue import GlueKind
from keras_bert_zoo.finetuning.kind import TaskKind
from keras_bert_zoo.finetuning.search.run import task_objective
from keras_bert_zoo.finetuning.squad import SquadKind
from keras_bert_zoo.finetuning.swag import SwagKind
from keras_bert_zoo.finetuning.tagging import TaggingKind


def test_every_task_has_exactly_one_kind():
    kinds = (GlueKind, SwagKind, SquadKind, TaggingKind)
    served = [task for kind in kinds for task in kind.tasks]
    assert sorted(served) == sorted(TASKS) and len(served) == len(set(served))
    assert run.KINDS == {task: kind for kind in kinds for task in kind.tasks}
    assert all(issubclass(kind, TaskKind) for kind in kinds)


def test_search_objectives_are_the_kinds():
    assert [task_objective(t) for t in ("cola", "mrpc", "stsb", "sst2", "swag", "squad2", "conll2003")] == [
        "matthews_corrcoef", "f1", "pearson", "accuracy", "accuracy", "f1", "f1"]
