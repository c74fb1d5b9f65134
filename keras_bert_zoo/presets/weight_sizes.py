"""A preset's sizes checked before anything of them is allocated.

A config file is a hand-editable text: `num_layers: 100000` builds for minutes towards gigabytes
before the tensor check (which runs on the built model) can say the weights hold one layer, and a
`vocab.txt` longer than the embedding table loads and fails only at a prediction, with an
assertion that names neither. So, before a model is built:

- `check_config_against_weights`: each size the checkpoint's tensors show (`weights_config`:
  vocabulary, hidden width, layers, intermediate width, segments, positions) must be the
  config's (positions: at least as many), naming each field that differs and what the weights hold;
- `check_vocabulary_fits`: the vocabulary has exactly the embedding table's rows;
- `check_fits_memory`: without weights to compare with (a random model), a config whose
  parameters alone exceed the machine's memory is refused, naming the fields that make them, and
  so is one of more than `MAX_CONFIG_LAYERS` layers (each layer is Python objects built one by
  one: a hundred thousand tiny ones take minutes whatever their size; the constructor itself,
  called in code, takes any depth).

Each reads the tensors' shapes or the files' lines, so it answers in well under a second.
"""

import os
import re

from keras_bert_zoo.presets.config import parameter_count

LAYER = re.compile(r"bert/encoder/layer_(\d+)/")
MAX_CONFIG_LAYERS = 1024  # BERT's published configurations have at most a few dozen
SIZE_FIELDS = ("vocabulary_size", "num_layers", "hidden_dim", "intermediate_dim", "max_sequence_length")


def _shape(tensors, name):
    return tuple(getattr(tensors[name], "shape", ())) if name in tensors else ()


def weights_config(tensors):
    """The backbone sizes a checkpoint's tensors hold, `{field: value}` (only those it shows):
    `vocabulary_size` and `hidden_dim` (word embeddings), `num_layers` (the layer_N indices),
    `intermediate_dim`, `num_segments` and `max_sequence_length` (position rows: the most allowed)."""
    held = {}
    words = _shape(tensors, "bert/embeddings/word_embeddings")
    if len(words) == 2:
        held["vocabulary_size"], held["hidden_dim"] = words
    layers = {int(m.group(1)) for m in map(LAYER.match, tensors) if m}
    if layers:
        held["num_layers"] = max(layers) + 1
    inner = _shape(tensors, "bert/encoder/layer_0/intermediate/dense/bias")
    if len(inner) == 1:
        held["intermediate_dim"] = inner[0]
    segments = _shape(tensors, "bert/embeddings/token_type_embeddings")
    if len(segments) == 2:
        held["num_segments"] = segments[0]
    positions = _shape(tensors, "bert/embeddings/position_embeddings")
    if len(positions) == 2:
        held["max_sequence_length"] = positions[0]
    return held


def check_config_against_weights(config, tensors, source):
    """Refuses a backbone `config` whose sizes are not what `tensors` hold (see the module).

    Raises:
        ValueError: naming `source`, each field, the config's value and the weights' value.
    """
    wrong = []
    for key, value in weights_config(tensors).items():
        given = config.get(key)
        if given is None or isinstance(given, bool) or not isinstance(given, int):
            continue  # the backbone's own argument checks name a value of the wrong type
        if given > value if key == "max_sequence_length" else given != value:
            wrong.append(f"{key}={given!r} (the weights hold {value})")
    if wrong:
        raise ValueError(
            f"The config file of {source} does not match its weights: {'; '.join(wrong)}. Nothing was built. Set the "
            "config file (or the argument) to the weights' sizes, or restore the checkpoint's own files.")


def check_vocabulary_fits(vocabulary_path, tensors, source):
    """Refuses a vocabulary whose token count is not the word-embedding table's rows: its ids
    would index other rows than the model learnt (shorter), or rows that do not exist (longer).

    Raises:
        ValueError: naming the file, both counts and the fix.
    """
    rows = weights_config(tensors).get("vocabulary_size")
    if rows is None or vocabulary_path is None:
        return
    with open(vocabulary_path, "rb") as f:
        tokens = sum(1 for line in f if line.strip(b"\r\n"))
    if tokens != rows:
        why = ("its last ids point past the table's end" if tokens > rows else
               "its ids would name other words than the weights learnt")
        raise ValueError(
            f"{vocabulary_path} has {tokens} tokens, but the word embeddings of {source} have {rows} rows: it is not "
            f"the vocabulary these weights were trained with ({why}). Nothing was built. Restore the checkpoint's "
            "own vocab.txt.")


def total_memory_bytes():
    """The machine's physical memory in bytes, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits_memory(config, source):
    """Refuses a backbone `config` whose float32 parameters alone exceed this machine's memory
    (a model built without weights has nothing else to be checked against).

    Raises:
        ValueError: naming `source`, the sizes, the bytes needed and the memory there is.
    """
    layers = config.get("num_layers")
    if isinstance(layers, int) and layers > MAX_CONFIG_LAYERS:
        raise ValueError(
            f"The config file of {source} has num_layers={layers}, more than the {MAX_CONFIG_LAYERS} a preset's config "
            "is built with. Nothing was built. Check num_layers in the config file (build deeper models with "
            "keras_bert_zoo.BertBackbone(...) directly).")
    memory = total_memory_bytes()
    try:
        needed = 4 * parameter_count(config)
    except (KeyError, TypeError, ValueError):
        return  # the backbone's own argument checks name a missing or malformed field
    if memory and needed > memory:
        sizes = ", ".join(f"{key}={config[key]}" for key in SIZE_FIELDS if key in config)
        raise ValueError(
            f"The config file of {source} ({sizes}) makes {needed / 1e9:.1f} GB of float32 parameters; this machine has "
            f"{memory / 1e9:.1f} GB of memory. Nothing was built. Check those fields in the config file.")
