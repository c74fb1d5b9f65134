"""The fine-tuning tasks' facts, in one table: what every other module reads about a task by name.

One `Task` row per `--task` name says which fine-tuning kind runs it (`finetuning/<kind>.py`), the
model class it fine-tunes, the data reader, its dev metrics and official objective, the export's
string inputs, what a dev prediction is, and its recipe. `FinetuningConfig`, the kinds' table
(`finetuning/run.py`), the GLUE metrics, the search and `tools/finetune.py`'s `--task` choices read
them here; none keeps a list of task names of its own. Adding a task is a row here, plus what
docs/design.md's checklist names.

This module imports only the standard library and sits on the ground floor: the readers' and
metrics' floors read it, and a tool loads it by file before TensorFlow (`tools/_startup.py`).

Examples:
>>> from keras_bert_zoo.tasks import task_facts
>>> task_facts("swag").kind, task_facts("swag").task_class, task_facts("mrpc").objective
('swag', 'BertMultipleChoice', 'f1')
"""

import dataclasses

RECIPE = (3, 32, 5e-5)  # the paper's (epochs, batch size, peak learning rate) for GLUE, SWAG and SQuAD
PAIR = ("text_a", "text_b")  # a sentence-pair classifier's export inputs


@dataclasses.dataclass(frozen=True)
class Task:
    """The facts of one fine-tuning task."""

    name: str  # the `--task` name
    kind: str  # its fine-tuning kind: `finetuning/<kind>.py` ("glue", "swag", "squad", "tagging")
    task_class: str  # the task model it fine-tunes (`keras_bert_zoo.<task_class>`)
    reader: str  # the reader of its files (`keras_bert_zoo.data.<reader>`)
    metrics: tuple  # the dev metrics its kind reports, in their order
    objective: str  # the paper's official dev metric (the search's default objective)
    unit: str  # what one dev prediction is: "class", "score" (regression), "choice", "answer", "tag"
    pair: bool = False  # its inputs are two texts ([CLS] a [SEP] b [SEP]: a window needs 5 tokens)
    text_inputs: tuple = None  # the export's string inputs (None: the task class's own)
    sequence_length: int = 128  # tokens per input by default
    recipe: tuple = RECIPE  # (epochs, batch size, learning rate) a left-out flag takes; None: from the data
    tfds: str = None  # the tensorflow-datasets name of its splits (`tfds:<split>`); None: files only


def glue(name, metrics, pair, objective=None, unit="class", tfds=True):
    """A GLUE row: `BertClassifier` on `read_glue`'s files, or (`tfds`) glue/<name> of tfds."""
    return Task(name, "glue", "BertClassifier", "read_glue", metrics, objective or metrics[0], unit, pair=pair,
                text_inputs=PAIR if pair else None, tfds=f"glue/{name}" if tfds else None)


TASKS = (
    glue("cola", ("matthews_corrcoef", "accuracy"), pair=False),
    glue("sst2", ("accuracy",), pair=False),
    glue("mrpc", ("accuracy", "f1"), pair=True, objective="f1"),
    glue("qqp", ("accuracy", "f1"), pair=True, objective="f1"),
    glue("stsb", ("pearson", "spearman"), pair=True, unit="score"),
    glue("mnli", ("accuracy",), pair=True),
    glue("qnli", ("accuracy",), pair=True),
    glue("rte", ("accuracy",), pair=True),
    glue("wnli", ("accuracy",), pair=True),
    # SNLI 1.0's files, in MNLI's layout (`read_glue`); tfds's `snli` is not read (files only).
    glue("snli", ("accuracy",), pair=True, tfds=False),
    Task("swag", "swag", "BertMultipleChoice", "read_swag", ("accuracy",), "accuracy", "choice", pair=True),
    Task("squad1", "squad", "BertSpanExtractor", "read_squad", ("exact_match", "f1"), "f1", "answer",
         sequence_length=384, tfds="squad/v1.1"),
    Task("squad2", "squad", "BertSpanExtractor", "read_squad", ("exact", "f1", "HasAns_f1", "NoAns_f1", "best_f1"),
         "f1", "answer", sequence_length=384, tfds="squad/v2.0"),
    # CoNLL's batch and learning rate are picked from the training sentences (`config.tagging_recipe`).
    Task("conll2003", "tagging", "BertTokenClassifier", "read_conll", ("precision", "recall", "f1"), "f1", "tag",
         recipe=(3, None, None), tfds="conll2003"),
)
TABLE = {task.name: task for task in TASKS}
NAMES = tuple(TABLE)


def task_facts(name):
    """The `Task` row of `name`; a ValueError names the known tasks."""
    if name not in TABLE:
        raise ValueError(f"Unknown task. Received: task={name!r}. Use one of {NAMES}.")
    return TABLE[name]


def names_of(kind=None, **facts):
    """The task names of `kind` (None: any) whose facts equal `facts`, in the table's order.

    Examples:
    >>> from keras_bert_zoo.tasks import names_of
    >>> names_of("squad"), names_of(unit="score")
    (('squad1', 'squad2'), ('stsb',))
    """
    return tuple(task.name for task in TASKS if (kind is None or task.kind == kind)
                 and all(getattr(task, key) == value for key, value in facts.items()))
