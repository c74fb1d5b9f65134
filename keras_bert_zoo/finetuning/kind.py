"""`TaskKind`: what one task family (GLUE, SWAG, SQuAD, CoNLL tagging) does in a fine-tuning run.

`run_finetuning` and the search (`keras_bert_zoo.finetuning.search`) are the same for every task;
what differs is a kind's, one file per family (`glue.py`, `swag.py`, `squad.py`, `tagging.py`). A
kind takes a `FinetuningConfig` and the casing `check_preset` settled on, and supplies:

- `tasks`: the task names it serves (the rows of `keras_bert_zoo.tasks` that name it; `run.py`'s
  table is built from them);
- `objectives`: the dev metrics its `evaluate` returns, and `objective_for(task)`, the paper's
  official one (the task's row; the search's default);
- `read()`: the training `(x, y)` for `task.fit` (kept as `self.train`) and the dev set
  (`self.dev`); `settle_recipe()`, in a run, what the recipe takes from the data read;
- `build(learning_rate, seed)`: the compiled task from the preset, *without* entering a
  distribution strategy (the caller does: `run_finetuning` its own, the search keras-tuner's);
- `fit(task)`: the run's training (and per-epoch dev scoring); returns the training seconds;
- `evaluate(task)`: the official dev metrics over the whole dev set (the search's score), and
  `score(task)`: the run's dev scoring once trained (kinds that scored every epoch keep the last);
- `write(task)`: the run's dev predictions, `preset/` and test predictions in `output_dir`;
- `export(task)`: `config.export_dir` (`export_finetuned`), and `results(...)`: `results.json`'s
  contents;
- `task_class` and `text_inputs`: what reloads a saved preset and how its export takes text.

The shared helpers (`check_preset`, `recased`, `export_finetuned`, `write_results`) are here too.
"""

import logging
import os
import tempfile
import time
import warnings

import keras

from keras_bert_zoo.finetuning.config import flag
from keras_bert_zoo.finetuning.results_file import run_record
from keras_bert_zoo.presets.preset import CASED_SHARE, open as open_preset
from keras_bert_zoo.presets.model_card import write_card
from keras_bert_zoo.presets.task import preprocessor_settings
from keras_bert_zoo.serving.export import export, export_target
from keras_bert_zoo.tasks import task_facts
from keras_bert_zoo.text.vocabulary import load_vocabulary
from keras_bert_zoo.training.callbacks import BuildAwareProgbar
from keras_bert_zoo.training.epoch_log import EpochLog
from keras_bert_zoo.utils.files import atomic_write_json
from keras_bert_zoo.utils.output_dirs import check_writable
from keras_bert_zoo.utils.plotting import plot_finetuning_curves

logger = logging.getLogger("keras_bert_zoo.training")
TENSORBOARD_DIR = "tensorboard"  # output_dir's TensorBoard logs: train loss, learning rate, dev metrics per epoch
CURVES_FILE = "curves.png"  # the same per epoch as a figure, beside results.json


def check_preset(config, preset=None):
    """Refuses a preset or `lowercase` setting that contradicts the preset's vocabulary.

    The vocabulary decides what casing can be right: a cased one has many capitalised
    pieces (more than 1%), an uncased one (almost) none. Without `lowercase`, the
    preset's own casing (its registry entry, saved config or name, as the original
    `validate_case_matches_checkpoint`, else any capitalised token) must agree with it;
    an explicit `lowercase` must agree with the vocabulary and then wins (HF folders
    whose name says neither and whose vocabulary holds a capital symbol or two, such as
    all-MiniLM-L6-v2's "ℝ", read as cased otherwise). `preset`: `config.preset` opened
    (`presets.open`), where the caller has it; else it is opened here.

    Returns:
        `(lowercase, detected)`: the casing to use and the one the preset's settings give.
    """
    preset = open_preset(config.preset if preset is None else preset)
    try:
        tokens = load_vocabulary(preset.vocabulary_path())
    except (ValueError, OSError, KeyError) as e:
        raise ValueError(f"{flag('preset')}: cannot read its vocabulary ({e}). Received: {config.preset!r}.") from e
    capitalised = [t for t in tokens if not t.startswith("[") and any(c.isupper() for c in t)]
    vocabulary_uncased = len(capitalised) <= CASED_SHARE * len(tokens)
    found = f"{len(capitalised)} of {len(tokens)} tokens have capitals, e.g. {capitalised[:3]}"
    detected = preset.lowercase(tokens)
    if config.lowercase is not None:
        if bool(config.lowercase) != vocabulary_uncased:
            raise ValueError(
                f"{'--lowercase' if config.lowercase else '--no-lowercase'} contradicts the vocabulary of "
                f"{config.preset!r}, which is {'uncased' if vocabulary_uncased else 'cased'} ({found})."
            )
        return bool(config.lowercase), detected
    if detected != vocabulary_uncased:
        raise ValueError(
            f"{flag('preset')}: {config.preset!r} reads as {'uncased' if detected else 'cased'} (from its registry "
            "entry, saved config or name, else from any capitalised token), but its vocabulary is "
            f"{'uncased' if vocabulary_uncased else 'cased'} ({found}). Text would not be tokenized as the "
            f"checkpoint's training text. If the vocabulary is right, say so with "
            f"{'--lowercase' if vocabulary_uncased else '--no-lowercase'}; else use the checkpoint's own vocabulary."
        )
    return detected, detected


def recased(preprocessor, preset, lowercase):
    """The task's preprocessor rebuilt with the casing `check_preset` settled on (its other
    settings, e.g. `sequence_length` and window strides, kept)."""
    logger.warning("Tokenizing with lowercase=%s as asked; the preset %r read as the other casing.", lowercase, preset)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # from_preset warns of the contradiction check_preset has resolved
        return type(preprocessor).from_preset(preset, lowercase=lowercase, **preprocessor_settings(preprocessor))


def checked_export_target(path, flag, overwrite=False):
    """Where an export to `path` will go (`serving.export.export_target`: the folder itself, or
    the next TF Serving version folder in a model folder), checked before a run starts: writable,
    and never over anything but an earlier export, which only `overwrite` replaces. None: no export."""
    if path is None:
        return None
    check_writable(path, flag)
    return export_target(path, overwrite=overwrite,
                         options={"version": f"{flag} MODEL_DIR/<version>", "overwrite": "--overwrite"})


def export_finetuned(task, config, text_inputs=None, target=None, overwrite=False):
    """`task` exported as a SavedModel that answers raw strings (`keras_bert_zoo.serving.export`,
    all its signatures; `text_inputs`, e.g. a GLUE pair task's `("text_a", "text_b")`, names its
    string inputs), in the policy it was trained and scored in, at `target` (what
    `checked_export_target` chose before the run) or else `config.export_dir`. Returns the
    absolute path, or None without `export_dir`. A serving process then needs no reload of the preset."""
    if config.export_dir is None:
        return None
    return export(task, target or config.export_dir, text_inputs=text_inputs, overwrite=overwrite)


def write_results(config, results, label=None):
    """Writes `results` as `output_dir/results.json` (a run's last file) and logs its dev metrics
    after `label` (default "Fine-tuned <task>"). Every kind's results record the run's float policy.
    With `results["warnings"]` (e.g. every dev prediction one class) the line says them and is
    logged as a warning, so it reaches stderr without any logging set up."""
    results.setdefault("precision", config.precision)
    atomic_write_json(os.path.join(config.output_dir, "results.json"), results)
    line = f"{label or f'Fine-tuned {config.task}'}: dev {results['dev']}"
    notes = results.get("warnings") or []
    if notes:
        logger.warning("%s; %s", line, "; ".join(notes))
    else:
        logger.info("%s", line)
    return results


RESCUE_FOLDERS = (tempfile.gettempdir(), os.path.join(os.path.expanduser("~"), ".cache", "keras_bert_zoo"))
"""Where a trained model goes when its own folder cannot take it (another file system, often)."""


def save_or_rescue(task, directory):
    """`task.save_to_preset(directory)`; where that fails (a full disk, a folder made read-only
    meanwhile), the trained model is saved to a new folder under `RESCUE_FOLDERS` instead and the
    ValueError raised names it, so training is never lost to a failed save. Returns `directory`."""
    try:
        return task.save_to_preset(directory)
    except Exception as error:  # noqa: BLE001 (any failure of the save: the model must go somewhere)
        reason = " ".join(str(error).split()) or type(error).__name__
        tried = []
        for base in RESCUE_FOLDERS:
            try:
                os.makedirs(base, exist_ok=True)
                rescue = tempfile.mkdtemp(prefix="rescued-preset-", dir=base)
                task.save_to_preset(os.path.join(rescue, "preset"))
            except Exception as again:  # noqa: BLE001 (the next folder is tried)
                tried.append(f"{base} ({' '.join(str(again).split())[:120]})")
                continue
            raise ValueError(
                f"Could not save the trained model to {directory} ({reason[:300]}); it was saved to "
                f"{os.path.join(rescue, 'preset')} instead ({type(task).__name__}.from_preset loads it). Free space "
                "or fix the folder, move the preset where you want it, and rerun only what is missing.") from error
        raise ValueError(f"Could not save the trained model to {directory} ({reason[:300]}), nor to a rescue "
                         f"folder: {'; '.join(tried)}. The model is lost; free space and rerun.") from error


def per_second(count, seconds):
    """`count / seconds`, safe for a zero duration."""
    return count / max(seconds, 1e-9)


class TaskKind:
    """Base kind: the preset's casing settled once (`check_preset`), the task's default compile.

    Args:
        config: `FinetuningConfig`.
        lowercase: bool. The casing `check_preset` settled on.
        detected: bool. The casing the preset's own settings give.
    """

    tasks = ()  # the task names this kind serves
    objectives = ()
    default_objective = None
    text_inputs = None
    task_class = None

    def __init__(self, config, lowercase, detected):
        self.config, self.lowercase, self.detected = config, lowercase, detected
        self.preset = open_preset(config.preset)  # what `build` loads; `task_kind` passes the run's own
        self.default_objective = self.objective_for(config.task)
        self.train = self.dev = None
        self.files = {}  # data field -> its results.json "data" entry (`file_record`), filled by `read`

    @classmethod
    def objective_for(cls, task):
        """The paper's official dev metric of `task` (its row's; the search's default objective)."""
        return task_facts(task).objective

    def read(self):
        """Reads the training and dev data; returns `(self.train, self.dev)`."""
        raise NotImplementedError

    def settle_recipe(self):
        """After `read`, in a run (not a search, whose trials set their own): fills in what the
        recipe takes from the data (CoNLL's batch and learning rate). Nothing here."""

    def build(self, learning_rate, seed=None):
        """The compiled task (no distribution strategy entered here)."""
        raise NotImplementedError

    def evaluate(self, task):
        """The official dev metrics over the whole dev set: `{metric: float}`."""
        raise NotImplementedError

    def score(self, task):
        """The run's dev scoring once trained; returns the dev metrics (default: `evaluate`;
        kinds that scored every epoch in `fit` keep the last)."""
        return self.evaluate(task)

    def write(self, task):
        """The run's files in `output_dir` but `results.json` (dev predictions, `preset/`, test)."""
        raise NotImplementedError

    def results(self, task, train_seconds, start, export_dir):
        """`results.json`'s contents."""
        raise NotImplementedError

    def record(self, task, results, baseline, predicted, unit="class", one_class=True, **resolved):
        """`results` with what every results.json holds (`results_file.run_record`): the resolved
        config (the settled casing and the backbone's dropout filled in), `self.files`, the baseline,
        the dev predictions' counts and a warning where they are all one `unit`."""
        dropout = getattr(getattr(task, "backbone", None), "dropout", None)
        return run_record(results, self.config, self.files, baseline, predicted, unit=unit, one_class=one_class,
                          lowercase=self.lowercase, dropout=dropout, **resolved)

    def check_searchable(self):
        """Raises ValueError where the config asks for what the search does not search."""

    def summary_label(self, results):
        """What the log line of a finished run starts with."""
        return f"Fine-tuned {self.config.task}"

    def compile(self, task, learning_rate):
        """The task's default `compile()` (the paper's recipe) at `learning_rate`."""
        task.compile(learning_rate=learning_rate, warmup_ratio=self.config.warmup_ratio)
        return task

    def recase(self, task):
        """`task` with its preprocessor rebuilt in the settled casing, where the preset read otherwise."""
        if self.lowercase != self.detected:
            task.preprocessor = recased(task.preprocessor, self.preset, self.lowercase)
        return task

    def verbose(self):
        return 1 if self.config.progress else 0

    def run_callbacks(self, dev_callbacks=()):
        """`fit`'s callbacks in a run, in the order Keras calls them at an epoch's end: the progress
        bar (`progress`) first, so that its line ends before a dev scorer prints its own and does not
        show the dev metrics again; the dev scorers, which add `dev_*` to the epoch's logs; then the
        epoch log (the curves) and TensorBoard (`output_dir/tensorboard`), which record them."""
        bar = [BuildAwareProgbar()] if self.config.progress else []
        self.epoch_log = EpochLog()
        board = keras.callbacks.TensorBoard(os.path.join(self.config.output_dir, TENSORBOARD_DIR),
                                            write_graph=False, profile_batch=0)
        return bar + list(dev_callbacks) + [self.epoch_log, board]

    def fit(self, task):
        """Trains `task` on `self.train` with the run's epochs and batch size; returns the seconds."""
        x, y = self.train
        start = time.perf_counter()
        task.fit(x, y, batch_size=self.config.batch_size, epochs=self.config.epochs, verbose=self.verbose(),
                 callbacks=self.run_callbacks())
        return time.perf_counter() - start

    def write_curves(self, results):
        """`output_dir/curves.png`: the epochs' training loss, learning rate and dev metrics beside the
        baseline's (`utils.plotting.plot_finetuning_curves`); None for a run that recorded no epoch."""
        history = getattr(getattr(self, "epoch_log", None), "history", None)
        if not history:
            return None
        baseline = (results.get("baseline") or {}).get("dev")
        return plot_finetuning_curves(history, os.path.join(self.config.output_dir, CURVES_FILE), baseline,
                                      title=f"{self.config.task}: {os.path.basename(os.path.normpath(self.config.preset))}")

    def write_card(self, task, results):
        """Rewrites `output_dir/preset/README.md` (the card `save_preset` wrote) with the run's facts:
        its data files (rows and sha256), dev scores beside the baseline, and its command."""
        directory = os.path.join(self.config.output_dir, "preset")
        if not os.path.isdir(directory):
            return None
        facts = task.card_facts()
        baseline = results.get("baseline") or {}
        facts.update(
            source_preset=self.config.preset if not os.path.exists(self.config.preset)
            else os.path.abspath(self.config.preset),
            data=[{"name": f"{entry['flag']} {entry['path']}", "rows": entry.get("used", entry.get("read")),
                   "sha256": entry.get("sha256")} for entry in (results.get("data") or {}).values()],
            metrics=results.get("dev"), baseline={"predicts": baseline.get("predicts"), "metrics": baseline.get("dev")},
            precision=results.get("precision", self.config.precision), made_by={"command": results.get("command")})
        return write_card(directory, facts)

    def export(self, task):
        """`export_finetuned` with this kind's text inputs, into `config.export_dir` as checked before
        the run (a model folder's next version is taken when the export is published, not before)."""
        return export_finetuned(task, self.config, self.text_inputs, None, getattr(self, "export_overwrite", False))

    def save_preset(self, task):
        """`output_dir/preset/`: the fine-tuned task, which `task_class.from_preset` reloads
        (`save_or_rescue`: a failed save puts it elsewhere and names where)."""
        save_or_rescue(task, os.path.join(self.config.output_dir, "preset"))

    def output_names(self):
        """The names this kind's run may write into `output_dir` (what an interrupted run's
        rerun takes as its files; `output_dirs.claim_run_dir`). A kind adds its own."""
        return ["preset", "results.json", CURVES_FILE, TENSORBOARD_DIR]
