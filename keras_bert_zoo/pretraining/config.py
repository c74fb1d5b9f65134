"""`PretrainingConfig`: every setting of one pretraining run, validated in one place.

One field per `tools/pretrain.py` flag, with its default (as nanoGPT's `GPTConfig`).
`run_pretraining(config)` runs it; building the config checks every value, so a bad
setting fails before anything is built, read or written.
"""

import dataclasses
import logging
import numbers
import os

from keras_bert_zoo.data.data_service import check_service_address
from keras_bert_zoo.utils.precision import resolve_precision

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
PRECISION_CHOICES = ("auto",) + PRECISIONS  # "auto": keras_bert_zoo.utils.precision.auto_precision()
OBJECTIVES = ("mlm", "ltr")
SIZE_KEYS = ("num_layers", "num_heads", "hidden_dim", "intermediate_dim", "max_sequence_length")
PHASE2_KEYS = ("phase2_sequence_length", "phase2_max_predictions", "phase2_batch_size", "phase2_tfrecords")


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


@dataclasses.dataclass(frozen=True)
class PretrainingConfig:
    """The settings of a resumable pretraining run (one or two phases).

    Two phases (`phase2_steps > 0`), as the paper: the first `steps - phase2_steps`
    steps at `sequence_length`, the last `phase2_steps` at `phase2_sequence_length`, on
    one model, optimizer and learning-rate schedule (phase 2 checkpoints in
    `<checkpoint_dir>/phase2`). For the original's separate phase-2 run with its own
    warm-up, run again with `preset=<phase-1 output_dir>, load_weights=True`.

    Raises:
        ValueError: a setting is out of range or contradicts another (names both).

    Examples:
    >>> config = keras_bert_zoo.PretrainingConfig(
    ...     "runs/preset", "runs/ckpt", train_files="corpus.txt", vocabulary="vocab.txt",
    ...     size=dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512), steps=1000)
    >>> config.batch_size
    32
    """

    output_dir: str  # the preset directory written at the end (chief only)
    checkpoint_dir: str  # checkpoints; a rerun resumes from here (phase 2 in <checkpoint_dir>/phase2)
    train_files: object = None  # text files/globs (one sentence a line, blank line between documents)
    tfrecords: object = None  # pretraining TFRecords (original or our names); exclusive with train_files
    vocabulary: object = None  # vocab.txt (defaults to the preset's)
    preset: str = None  # architecture (and with load_weights, weights) to start from
    size: dict = dataclasses.field(default_factory=dict)  # SIZE_KEYS (+ dropout): custom size or preset overrides
    load_weights: bool = False  # start from the preset's backbone and the MLM / NSP heads it has
    strategy: str = "auto"  # see `get_strategy`
    precision: str = "float32"  # float32 unless asked: "auto" (bf16 where native; resolved here) or PRECISIONS
    steps: int = 1000  # training steps of the whole run (both phases): the schedule's length
    warmup_steps: int = 100  # linear learning-rate warm-up
    batch_size: int = 32  # global batch size (summed over replicas)
    learning_rate: float = 1e-4  # peak learning rate
    # Adam's bias correction (the original has none: harmless after its 10,000 warm-up steps,
    # but in a short run the early updates are 3-6x the rate and training stalls)
    bias_correction: bool = True
    sequence_length: int = 128  # text input, phase 1
    max_predictions: int = 20  # masked positions per sequence, text input, phase 1
    masked_lm_prob: float = 0.15  # share of each sequence's tokens masked (text input; capped by max_predictions)
    whole_word_masking: bool = False  # mask every piece of a chosen word together (text input)
    save_every: int = 100  # checkpoint interval in steps
    log_dir: str = None  # TensorBoard logs (training and held-out) at global steps
    eval_every: int = 0  # held-out MLM/NSP accuracy every N global steps (0: never)
    eval_batches: int = 4  # held-out batches (phase-1 length, the same in both phases)
    eval_files: object = None  # held-out text / TFRecords; None: differently-seeded training batches
    seed: int = 12345  # model initialisation and data order (held-out draw seed + 1, phase 2 seed + 2)
    progress: bool = True  # Keras progress bar
    deterministic: bool = True  # enable_op_determinism (bitwise-reproducible resume)
    time_budget: float = None  # seconds of training after which the run stops early (None: `steps` only)
    phase2_steps: int = 0  # steps of phase 2, counted inside `steps` (0: one phase)
    phase2_sequence_length: int = None  # text input; defaults to the model's max_sequence_length
    phase2_max_predictions: int = None  # text input; defaults to max_predictions scaled with the length
    phase2_batch_size: int = None  # global; defaults to batch_size
    phase2_tfrecords: object = None  # TFRecords written at the phase-2 length (TFRecord input)
    nsp: bool = True  # next-sentence head and loss (False: the "No NSP" ablation)
    objective: str = "mlm"  # "ltr": left-to-right ablation (causal backbone, nsp=False, no evaluation)
    data_service: str = None  # tf.data service dispatcher ("host:port"): the input runs on its workers (not resumed)

    def __post_init__(self):
        object.__setattr__(self, "size", dict(self.size or {}))
        self._check_sources()
        if self.precision not in PRECISION_CHOICES:
            raise ValueError(f"Unknown precision. Received: precision={self.precision!r}. Use one of {PRECISION_CHOICES}.")

        object.__setattr__(self, "precision", resolve_precision(self.precision))  # resolved once, recorded as such
        if self.train_files is not None and self.vocabulary is None and self.preset is None:
            raise ValueError("Text input needs a `vocabulary` (vocab.txt) or a `preset` that has one.")
        if self.preset is None and not self.size:
            raise ValueError(f"Give a `preset` or a `size` dict with {SIZE_KEYS}.")
        self._check_numbers()
        self._check_masking()
        self._check_objective()
        self._check_phase2()
        self._check_custom_size()
        if self.data_service is not None:
            check_service_address(self.data_service)

    def _check_sources(self):
        for name in ("output_dir", "checkpoint_dir"):
            value = getattr(self, name)
            if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
                raise ValueError(f"`{name}` must be a directory path. Received: {name}={value!r}.")
        if (self.train_files is None) == (self.tfrecords is None):
            raise ValueError(
                "Give exactly one of `train_files` (text) and `tfrecords`. Received: "
                f"train_files={self.train_files!r}, tfrecords={self.tfrecords!r}."
            )

    def _check_positive(self, names, minimum=1, allow_none=False):
        for name in names:
            value = getattr(self, name)
            if allow_none and value is None:
                continue
            if not _is_int(value) or value < minimum:
                kind = "a positive integer" if minimum == 1 else "an integer >= 0"
                raise ValueError(f"`{name}` must be {kind}. Received: {name}={value!r}.")

    def _check_numbers(self):
        self._check_positive(("steps", "batch_size", "save_every", "sequence_length", "max_predictions"))
        self._check_positive(("warmup_steps", "eval_every", "eval_batches"), minimum=0)
        budget = self.time_budget
        if budget is not None and (not isinstance(budget, numbers.Real) or isinstance(budget, bool) or budget <= 0):
            raise ValueError("`time_budget` is seconds of training (> 0) or None (stop at `steps` only). "
                             f"Received: time_budget={budget!r}.")

    def _check_masking(self):
        prob = self.masked_lm_prob
        if not isinstance(prob, float) or not 0.0 < prob < 1.0:
            raise ValueError(f"`masked_lm_prob` must be a float in (0, 1). Received: masked_lm_prob={prob!r}.")
        if not isinstance(self.whole_word_masking, bool) or not isinstance(self.bias_correction, bool):
            raise ValueError("`whole_word_masking` and `bias_correction` are booleans. Received: "
                             f"whole_word_masking={self.whole_word_masking!r}, bias_correction={self.bias_correction!r}.")
        if self.tfrecords is not None and (prob != 0.15 or self.whole_word_masking):
            raise ValueError("TFRecords hold their masks already (written by create_pretraining_data), so the "
                             f"masking settings cannot apply. Received: masked_lm_prob={prob!r}, "
                             f"whole_word_masking={self.whole_word_masking!r}. Drop them, or pass text (train_files).")
        if self.tfrecords is None and round(prob * self.sequence_length) > self.max_predictions:
            logging.getLogger("keras_bert_zoo.training").warning(
                "masked_lm_prob=%g of sequence_length=%d is %d tokens, more than max_predictions=%d: every "
                "full sequence masks only %d. Raise max_predictions to mask the share asked for.",
                prob, self.sequence_length, round(prob * self.sequence_length), self.max_predictions,
                self.max_predictions)

    def _check_objective(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"Unknown objective. Received: objective={self.objective!r}. Use one of {OBJECTIVES}.")
        if self.objective == "ltr" and self.eval_every:
            raise ValueError("Held-out evaluation measures masked-LM accuracy, which objective='ltr' has "
                             f"not. Received: eval_every={self.eval_every!r}. Pass eval_every=0.")
        if self.objective == "ltr" and self.nsp:
            raise ValueError("The left-to-right objective has no next-sentence task. Received: "
                             "objective='ltr', nsp=True. Pass nsp=False.")

    def _check_phase2(self):
        steps2 = self.phase2_steps
        if not _is_int(steps2) or not 0 <= steps2 < self.steps:
            raise ValueError(
                "`phase2_steps` counts the steps of phase 2 inside `steps`, so it must be an integer "
                f"in [0, steps). Received: phase2_steps={steps2!r}, steps={self.steps!r}. For the paper's "
                "recipe use steps=N and phase2_steps=N // 10."
            )
        given = [k for k in PHASE2_KEYS if getattr(self, k) is not None]
        if steps2 == 0 and given:
            raise ValueError(f"{given} only apply to phase 2, which has no steps (phase2_steps=0). "
                             "Set `phase2_steps` or drop them.")
        self._check_positive(PHASE2_KEYS[:3], allow_none=True)
        if steps2 and self.tfrecords is not None:
            if self.phase2_tfrecords is None:
                raise ValueError("TFRecord input fixes the sequence length, so phase 2 needs its own records: "
                                 "pass `phase2_tfrecords` (written at the phase-2 length). Received: None.")
            for name in ("phase2_sequence_length", "phase2_max_predictions"):
                if getattr(self, name) is not None:
                    raise ValueError(f"`{name}` is for text input; TFRecords carry their own lengths. "
                                     f"Received: {name}={getattr(self, name)!r}. Drop it.")
        if self.phase2_tfrecords is not None and self.train_files is not None:
            raise ValueError("`phase2_tfrecords` needs TFRecord input (`tfrecords`); text input makes phase-2 "
                             f"batches itself. Received: phase2_tfrecords={self.phase2_tfrecords!r}.")

    def _check_custom_size(self):
        if self.preset is not None:
            return
        missing = [k for k in ("num_layers", "num_heads", "hidden_dim", "intermediate_dim") if k not in self.size]
        if missing or (self.vocabulary is None and "vocabulary_size" not in self.size):
            raise ValueError(f"A custom size needs {missing or 'a vocabulary'}. Received: size={self.size!r}.")
