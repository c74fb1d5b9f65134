"""The module paths of before the re-house by stage, for one release.

`import keras_bert_zoo.training.finetuning_run` (or `from ... import run_finetuning`) keeps
working: it warns with a DeprecationWarning naming the new path and gives the new module
itself, so old and new names are the same objects. `keras_bert_zoo.export` is not listed:
it is the `export` function now, as it was at the top level before.
"""

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "keras_bert_zoo.export_client": "keras_bert_zoo.serving.client",
    "keras_bert_zoo.export_entities": "keras_bert_zoo.serving.entities",
    "keras_bert_zoo.export_features": "keras_bert_zoo.serving.features",
    "keras_bert_zoo.export_fill_mask": "keras_bert_zoo.serving.fill_mask",
    "keras_bert_zoo.export_hub": "keras_bert_zoo.serving.hub",
    "keras_bert_zoo.export_tasks": "keras_bert_zoo.serving.specs",
    "keras_bert_zoo.weights.hf_export": "keras_bert_zoo.serving.hf_checkpoint",
    "keras_bert_zoo.weights.preset_config": "keras_bert_zoo.presets.config",
    "keras_bert_zoo.weights.preset_format": "keras_bert_zoo.presets.preset_format",
    "keras_bert_zoo.weights.sources": "keras_bert_zoo.presets.sources",
    "keras_bert_zoo.weights.download": "keras_bert_zoo.presets.download",
    "keras_bert_zoo.weights.loading": "keras_bert_zoo.presets.loading",
    "keras_bert_zoo.models.task_presets": "keras_bert_zoo.presets.task",
    "keras_bert_zoo.training.pretraining_loop": "keras_bert_zoo.training.resumable_fit",
    "keras_bert_zoo.training.pretraining_eval": "keras_bert_zoo.pretraining.evaluation",
    "keras_bert_zoo.training.pretraining_config": "keras_bert_zoo.pretraining.config",
    "keras_bert_zoo.training.pretraining_phases": "keras_bert_zoo.pretraining.phases",
    "keras_bert_zoo.training.pretraining_preflight": "keras_bert_zoo.pretraining.preflight",
    "keras_bert_zoo.training.pretraining_run": "keras_bert_zoo.pretraining.run",
    "keras_bert_zoo.training.fill_mask": "keras_bert_zoo.pretraining.fill_mask",
    "keras_bert_zoo.training.finetuning_config": "keras_bert_zoo.finetuning.config",
    "keras_bert_zoo.training.finetuning_run": "keras_bert_zoo.finetuning.run",
    "keras_bert_zoo.training.finetuning_squad": "keras_bert_zoo.finetuning.squad",
    "keras_bert_zoo.training.finetuning_tagging": "keras_bert_zoo.finetuning.tagging",
    "keras_bert_zoo.training.tuning": "keras_bert_zoo.finetuning.search.tuner",
    "keras_bert_zoo.training.tuning_report": "keras_bert_zoo.finetuning.search.report",
    "keras_bert_zoo.training.tuning_run": "keras_bert_zoo.finetuning.search.run",
}


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module path with the module at its new path (see `MOVED`)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; the old path goes in the next release.",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module):
        """Nothing to run: the module is the new one, already imported."""


def install():
    """Puts the finder on `sys.meta_path` once (the package's `__init__` calls it)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
