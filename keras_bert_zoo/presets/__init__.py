"""keras_bert_zoo.presets: which preset a name, alias or path is, and where its files are.

- `open(preset)` → `Preset` (`preset.py`): a preset opened once (one resolution to its files),
  asked for its config, vocabulary, casing, tensors and saved task; every `from_preset` takes one;
- `registry`: the released checkpoints (`registry.json`), names and aliases;
- `sources`, `download`: resolving a preset to a local directory (download cache, layouts);
- `preset_format`: our own preset directory and its sha256 manifest;
- `config`, `loading`: a preset's backbone config, vocabulary and tensors, assigned to a model;
- `task`: the task part of a preset (`Task.save_to_preset` / `from_preset`).

A model is saved with its own method, `model.save_to_preset(directory)`.
"""

from keras_bert_zoo.presets.loading import get_preset_vocabulary
from keras_bert_zoo.presets.preset import Preset, open  # noqa: A004 (`presets.open`, the package's verb)
from keras_bert_zoo.presets.preset_format import rehash_preset, verify_preset
from keras_bert_zoo.presets.registry import list_presets

__all__ = ["Preset", "get_preset_vocabulary", "list_presets", "open", "rehash_preset", "verify_preset"]
