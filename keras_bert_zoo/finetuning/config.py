"""`FinetuningConfig`: every setting of one fine-tuning run, validated in one place.

One field per `tools/finetune.py` flag, with its default. `run_finetuning(config)` runs
it; building the config checks every value and that every input file exists, so a bad
flag fails before anything is read, built or written, naming the flag.
"""

import dataclasses
import os

from keras_bert_zoo.tasks import NAMES, names_of, task_facts
from keras_bert_zoo.text.span_windows import RULES
from keras_bert_zoo.training.distribute import STRATEGIES
from keras_bert_zoo.utils.precision import resolve_precision

# The task names, by what a flag below is for; each task's facts are its row in keras_bert_zoo.tasks.
TASKS = NAMES
SQUAD_TASKS = names_of("squad")  # SQuAD v1.1 / v2.0 JSON (keras_bert_zoo.data.squad)
TAGGING_TASKS = names_of("tagging")  # CoNLL-format NER columns (keras_bert_zoo.data.conll)
# The §5.3 feature choices (keras_bert_zoo.models.bert_feature_extractor.FEATURES; a test keeps them equal).
FEATURE_CHOICES = ("embeddings", "second_to_last", "last", "weighted_sum_last_four", "concat_last_four",
                   "weighted_sum_all")
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
PRECISION_CHOICES = ("auto",) + PRECISIONS  # "auto": keras_bert_zoo.utils.precision.auto_precision()
TFDS_PREFIX = "tfds:"  # `--train-file tfds:train`: the task's GLUE split from tensorflow-datasets
# The recipe a flag left out takes, (epochs, batch_size, learning_rate), is the task's row's: the paper's
# for GLUE, SWAG and SQuAD. CoNLL fine-tuning: 3 epochs (the paper's and HF's run_ner.py's), batch and
# learning rate picked from the training sentences (`tagging_recipe`, None there). The feature-based
# tagger trains with Adam on frozen features: Table 7's 10 epochs, batch 32, 1e-3.
FEATURE_BASED_RECIPE = (10, 32, 1e-3)
# A tagger leaves the all-O class prior only after enough updates (docs/ner.md: WNUT with MiniLM at
# 1e-4 stayed all O after 126 steps, reached entity F1 0.20-0.37 after 375-378 and 0.42 after 625),
# so `tagging_recipe` takes the largest batch that still gives this many steps.
NER_MIN_STEPS = 375
NER_BATCHES = (32, 16, 8)  # 8 is HF TrainingArguments' default batch, which its run_ner.py example trains with
# Special tokens around the text of one input: [CLS] a [SEP], or [CLS] a [SEP] b [SEP] for a pair
# (GLUE's pair tasks; SWAG: context and ending). A window needs them plus one token of each text.
PAIR_TASKS = names_of(pair=True)
SQUAD_QUERY_LENGTH = 64  # SpanExtractorPreprocessor's max_query_length when the flag is left out


def tagging_recipe(sentences, epochs, batch_size=None):
    """`(batch_size, learning_rate)` of a CoNLL fine-tuning run whose flags left them out.

    The batch is the largest of `NER_BATCHES` whose run has at least `NER_MIN_STEPS` steps
    (`ceil(sentences / batch) * epochs`), else the smallest; the learning rate is the paper's 5e-5
    at batch 32 (CoNLL-2003's 14,041 sentences) and 1e-4 at smaller batches, as docs/ner.md's runs.
    A `batch_size` given is kept (the learning rate then follows it).
    """
    if batch_size is None:
        batch_size = next((b for b in NER_BATCHES if -(-sentences // b) * epochs >= NER_MIN_STEPS), NER_BATCHES[-1])
    return batch_size, (5e-5 if batch_size >= 32 else 1e-4)


def flag(field):
    """The command-line flag of a config field: `train_file` -> `--train-file`."""
    return "--" + field.replace("_", "-")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class FinetuningConfig:
    """The settings of a fine-tuning run: one task, its files, a preset, the recipe.

    Data files are the task's own as distributed (GLUE TSVs, SWAG CSVs; see
    `keras_bert_zoo.data.glue` and `.swag`), or `"tfds:<split>"` for a GLUE split that
    tensorflow-datasets prepared under `tfds_data_dir` (e.g. `"tfds:validation_matched"`).
    Any sentence-polarity data in SST-2's layout (`sentence<TAB>label`, a header row)
    runs as `task="sst2"`; `keras_bert_zoo.data.polarity.write_polarity_tsv` writes the
    Rotten Tomatoes snippets so.

    Raises:
        ValueError: a setting is out of range, contradicts another or names a missing
            file; the message names the flag.

    Examples:
    >>> config = keras_bert_zoo.FinetuningConfig("mrpc", "MRPC/train.tsv", "MRPC/dev.tsv",
    ...                                          "bert_base_en_uncased", "runs/mrpc", epochs=3)
    >>> config.batch_size, config.learning_rate
    (32, 5e-05)
    """

    task: str  # one of TASKS (keras_bert_zoo.tasks): a GLUE task, "swag", "squad1", "squad2" or "conll2003"
    train_file: str  # training data (the task's file as distributed, or "tfds:<split>")
    dev_file: str  # labelled dev set, scored with the task's official metrics after every epoch
    preset: str  # checkpoint to start from: registry name, our/Google/HF directory, zip or ckpt
    output_dir: str  # results.json, dev_predictions.tsv, preset/, GLUE's submission file
    test_file: str = None  # unlabelled test set: GLUE's submission file (SWAG: test_predictions.tsv)
    dev_mismatched_file: str = None  # MNLI only: the mismatched dev set, scored too
    # None: the task's recipe (its row's, e.g. 3 epochs, batch 32, 5e-5; `FEATURE_BASED_RECIPE`), filled in once.
    epochs: int = None  # passes over the training data
    batch_size: int = None  # global batch size (summed over replicas)
    learning_rate: float = None  # peak learning rate (the paper's grid: 5e-5, 4e-5, 3e-5, 2e-5)
    warmup_ratio: float = 0.1  # share of the run's steps with linear warm-up (then linear decay to 0)
    dropout: float = None  # dropout of the backbone and the task's head (None: the preset's; the paper's 0.1)
    sequence_length: int = None  # tokens per input, [CLS]/[SEP] included (None: 128; SQuAD 384, windowed)
    seed: int = 12345  # head initialisation, dropout and data order
    max_train_examples: int = None  # use only the first N training rows (None: all)
    strategy: str = "auto"  # see `keras_bert_zoo.get_strategy`
    # float32 by default, as every command and a task built without `dtype`; "auto" on request (bf16
    # where native; resolved here): a run's numbers (and a v2.0 null threshold tuned on its scores) are
    # then the same on every CPU kind, and a short bf16 run can stall where float32 learns (the demo's
    # all-MiniLM-L6-v2 on 512 examples stayed at the majority class in bf16, 0.705 in float32).
    # (A bf16 run's dev predictions used to fail under MultiWorkerMirroredStrategy: fixed, tested.)
    precision: str = "float32"
    lowercase: bool = None  # None: the preset's casing; a value that contradicts it is refused
    tfds_data_dir: str = None  # where "tfds:<split>" datasets were prepared (None: tfds's default)
    skip_malformed: bool = False  # drop malformed rows (counted in the log) instead of failing
    progress: bool = True  # a progress bar per epoch and the dev metrics printed after each
    # Also export the fine-tuned task here, a SavedModel that answers raw strings (keras_bert_zoo.serving.export;
    # GLUE pair tasks take text_a/text_b), in the run's precision: the model the dev scores are of.
    export_dir: str = None
    # SQuAD only (task squad1/squad2); None: the task's default (sequence_length 384 for SQuAD).
    doc_stride: int = None  # context tokens between window starts (run_squad.py: 128)
    max_query_length: int = None  # question tokens kept (run_squad.py: 64)
    max_answer_length: int = None  # longest answer in tokens when decoding (run_squad.py: 30)
    rules: str = None  # windows and decoding: "original" (run_squad.py, the default) or "hf_pipeline"
    # CoNLL only: train a BiLSTM tagger on frozen BERT features (paper §5.3) instead of fine-tuning.
    feature_based: str = None  # one of FEATURE_CHOICES, or None to fine-tune
    lstm_units: int = None  # feature-based only: BiLSTM units per direction (None: 768, the paper's)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"{flag('task')}: unknown task. Received: task={self.task!r}. Use one of {TASKS}.")
        if self.sequence_length is None:  # frozen: the task's default is filled in once, here
            object.__setattr__(self, "sequence_length", task_facts(self.task).sequence_length)
        recipe = FEATURE_BASED_RECIPE if self.feature_based is not None else task_facts(self.task).recipe
        for name, value in zip(("epochs", "batch_size", "learning_rate"), recipe):
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        for name in ("epochs", "batch_size", "sequence_length"):
            if getattr(self, name) is not None or not self.picks_recipe_from_data():
                self._check_int(name, minimum=1)
        self._check_int("seed", minimum=0)
        if self.max_train_examples is not None:
            self._check_int("max_train_examples", minimum=1)
        if self.learning_rate is None and self.picks_recipe_from_data():
            pass  # `for_training_rows` fills it in once the training file is read
        elif not isinstance(self.learning_rate, (int, float)) or not self.learning_rate > 0:
            raise ValueError(f"{flag('learning_rate')} must be positive. Received: learning_rate={self.learning_rate!r}.")
        if not isinstance(self.warmup_ratio, (int, float)) or not 0.0 <= self.warmup_ratio <= 1.0:
            raise ValueError(f"{flag('warmup_ratio')} must be in [0, 1]. Received: warmup_ratio={self.warmup_ratio!r}.")
        if self.dropout is not None and (isinstance(self.dropout, bool) or not isinstance(self.dropout, (int, float))
                                         or not 0.0 <= self.dropout < 1.0):
            raise ValueError(f"{flag('dropout')} must be in [0, 1). Received: dropout={self.dropout!r}. "
                             "Leave it out to keep the preset's (BERT's 0.1).")
        if self.precision not in PRECISION_CHOICES:
            raise ValueError(f"{flag('precision')}: unknown precision. Received: precision={self.precision!r}. "
                             f"Use one of {PRECISION_CHOICES}.")
        # Resolved once: the run, its results.json and its tuning trials all see the concrete policy.
        object.__setattr__(self, "precision", resolve_precision(self.precision))
        if self.strategy not in STRATEGIES:
            raise ValueError(f"{flag('strategy')}: unknown strategy. Received: strategy={self.strategy!r}. "
                             f"Use one of {STRATEGIES}.")
        for name in ("doc_stride", "max_query_length", "max_answer_length"):
            if getattr(self, name) is not None:
                if self.task not in SQUAD_TASKS:
                    raise ValueError(f"{flag(name)} is SQuAD's (task squad1 or squad2). "
                                     f"Received it with task={self.task!r}.")
                self._check_int(name, minimum=1)
        if self.rules is not None:
            if self.task not in SQUAD_TASKS:
                raise ValueError(f"{flag('rules')} is SQuAD's (task squad1 or squad2). "
                                 f"Received it with task={self.task!r}.")
            if self.rules not in RULES:
                raise ValueError(f"{flag('rules')}: unknown rules. Received: rules={self.rules!r}. Use one of {RULES}.")
        if self.feature_based is not None:
            if self.task not in TAGGING_TASKS:
                raise ValueError(f"{flag('feature_based')} is for token classification (task conll2003). "
                                 f"Received it with task={self.task!r}.")
            if self.feature_based not in FEATURE_CHOICES:
                raise ValueError(f"{flag('feature_based')}: unknown feature choice. Received: "
                                 f"feature_based={self.feature_based!r}. Use one of {FEATURE_CHOICES}.")
        if self.lstm_units is not None:
            if self.feature_based is None:
                raise ValueError(f"{flag('lstm_units')} sizes the feature-based tagger; give --feature-based too. "
                                 f"Received: lstm_units={self.lstm_units!r}.")
            self._check_int("lstm_units", minimum=1)
        self._check_sequence_length()
        if self.dev_mismatched_file is not None and self.task != "mnli":
            raise ValueError(f"{flag('dev_mismatched_file')} is MNLI's. Received it with task={self.task!r}.")
        for name in ("train_file", "dev_file", "test_file", "dev_mismatched_file"):
            self._check_source(name)
        if not isinstance(self.preset, str) or not self.preset:
            raise ValueError(f"{flag('preset')} is required (a preset name or path). Received: preset={self.preset!r}.")
        for name in ("output_dir", "export_dir"):
            value = getattr(self, name)
            if value is not None and os.path.isfile(value):
                raise ValueError(f"{flag(name)} is a file, not a directory. Received: {value!r}.")

    def picks_recipe_from_data(self):
        """Whether the batch size or learning rate left out is picked from the training rows
        (`tagging_recipe`: CoNLL fine-tuning) rather than fixed here."""
        return self.task in TAGGING_TASKS and self.feature_based is None

    def for_training_rows(self, rows):
        """`(config, note)`: this config with the batch size and learning rate `tagging_recipe` picks
        for `rows` training sentences where they were left out, and the line that says so (None when
        nothing was picked)."""
        if not self.picks_recipe_from_data() or (self.batch_size is not None and self.learning_rate is not None):
            return self, None
        batch_size, learning_rate = tagging_recipe(rows, self.epochs, self.batch_size)
        learning_rate = self.learning_rate if self.learning_rate is not None else learning_rate
        picked = dataclasses.replace(self, batch_size=batch_size, learning_rate=learning_rate)
        steps = -(-rows // batch_size) * self.epochs
        rate = f"{learning_rate:.0e}".replace("e-0", "e-")  # 1e-4, as the rule below writes it
        return picked, (f"recipe: batch {batch_size}, peak learning rate {rate} for {rows} training sentences x "
                        f"{self.epochs} epochs ({steps} steps): the largest batch of {', '.join(map(str, NER_BATCHES))} with at least "
                        f"{NER_MIN_STEPS} steps, 5e-5 at batch 32, else 1e-4 (docs/ner.md; {flag('batch_size')} "
                        f"and {flag('learning_rate')} set them)")

    def _check_int(self, name, minimum):
        value = getattr(self, name)
        if not _is_int(value) or value < minimum:
            raise ValueError(f"{flag(name)} must be an integer >= {minimum}. Received: {name}={value!r}.")

    def _check_sequence_length(self):
        """Refuses a length that leaves no text in a window: every row would be cut to its specials."""
        length = self.sequence_length
        if self.task in SQUAD_TASKS:
            query = self.max_query_length or SQUAD_QUERY_LENGTH
            if length <= query + 3:
                raise ValueError(
                    f"{flag('sequence_length')} must exceed the question's tokens + 3 ([CLS] and two [SEP]) so a "
                    f"window holds context: {flag('max_query_length')} is {query}, so at least {query + 4}. "
                    f"Received: sequence_length={length}. Raise it (SQuAD's default 384) or lower "
                    f"{flag('max_query_length')}.")
            if self.rules == "hf_pipeline" and self.doc_stride is not None and self.doc_stride >= length - query - 3:
                raise ValueError(
                    f"{flag('doc_stride')}: with --rules hf_pipeline it is the overlap of consecutive windows and "
                    f"must be less than the context tokens a window holds, {flag('sequence_length')} - "
                    f"{flag('max_query_length')} - 3 = {length - query - 3}. Received: doc_stride={self.doc_stride}.")
            return
        pair = self.task in PAIR_TASKS
        minimum = 5 if pair else 3
        if length < minimum:
            shape = "[CLS] a [SEP] b [SEP] plus one token of each text" if pair else "[CLS] text [SEP] plus one token"
            raise ValueError(f"{flag('sequence_length')} must be at least {minimum} for task={self.task!r}: an input "
                             f"is {shape}, so a shorter one cuts every row to nothing. Received: "
                             f"sequence_length={length}. Leave it out for the default 128.")

    def _check_source(self, name):
        value = getattr(self, name)
        if value is None and name in ("test_file", "dev_mismatched_file"):
            return
        if not isinstance(value, str) or not value:
            raise ValueError(f"{flag(name)} is required. Received: {name}={value!r}.")
        if value.startswith(TFDS_PREFIX):
            if task_facts(self.task).tfds is None:
                raise ValueError(f"{flag(name)}: tensorflow-datasets has no {self.task.upper()}. "
                                 f"Received: {name}={value!r}. Give the task's file as distributed.")
            if not value[len(TFDS_PREFIX):]:
                raise ValueError(f"{flag(name)}: name a tfds split after 'tfds:'. Received: {name}={value!r}.")
        elif not os.path.isfile(value):
            raise ValueError(f"{flag(name)}: no such file. Received: {name}={value!r}.")

    def dropout_kwargs(self):
        """`{"dropout": rate}` for a task's `from_preset` (backbone and head), or `{}` for the preset's."""
        return {} if self.dropout is None else {"dropout": float(self.dropout)}

    def is_tfds(self, name):
        """Whether the data field `name` names a tensorflow-datasets split."""
        value = getattr(self, name)
        return value is not None and value.startswith(TFDS_PREFIX)
