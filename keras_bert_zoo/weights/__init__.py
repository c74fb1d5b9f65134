"""keras_bert_zoo.weights: reads and writes foreign checkpoints under one set of names.

Google's TF1 checkpoints (`google_checkpoint`) and HF's safetensors (`safetensors_checkpoint`)
are read into, and written from, `{canonical name: array}` in the original BERT's names and
layouts (`mapping`); `configs` translates their config files. Models load them through their
`from_preset`; this floor imports nothing of `presets/` or `models/` (they import it).
"""

from keras_bert_zoo.weights.google_checkpoint import read_google_tensors, write_google_checkpoint
from keras_bert_zoo.weights.safetensors_checkpoint import read_hf_tensors, write_hf_checkpoint

__all__ = ["read_google_tensors", "read_hf_tensors", "write_google_checkpoint", "write_hf_checkpoint"]
