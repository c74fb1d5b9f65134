"""`run_pretraining`: the core of `tools/pretrain.py`, a whole resumable pretraining run.

Text files or TFRecords in; a preset directory (`from_preset` loads it) out. Running
the same call again after a crash resumes from `checkpoint_dir`. With `phase2_steps`
the run has the paper's two phases (§A.2: 90% of the steps at length 128, 10% at 512)
on one model, one position table and one learning-rate schedule; phase 2 checkpoints
in `<checkpoint_dir>/phase2`.
"""

import logging
import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.training.distribute import get_strategy, is_chief
from keras_bert_zoo.training.pretraining_loop import fit_resumable
from keras_bert_zoo.training.pretraining_phases import (
    check_phase2,
    check_positive,
    max_sequence_length,
    phase_callbacks,
    phase_settings,
)

logger = logging.getLogger("keras_bert_zoo.training")

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
SIZE_KEYS = ("num_layers", "num_heads", "hidden_dim", "intermediate_dim", "max_sequence_length")


def _check(args):
    if (args["train_files"] is None) == (args["tfrecords"] is None):
        raise ValueError(
            "Give exactly one of `train_files` (text) and `tfrecords`. Received: "
            f"train_files={args['train_files']!r}, tfrecords={args['tfrecords']!r}."
        )
    if args["precision"] not in PRECISIONS:
        raise ValueError(f"Unknown precision. Received: precision={args['precision']!r}. Use one of {PRECISIONS}.")
    if args["train_files"] is not None and args["vocabulary"] is None and args["preset"] is None:
        raise ValueError("Text input needs a `vocabulary` (vocab.txt) or a `preset` that has one.")
    if args["preset"] is None and not args["size"]:
        raise ValueError(f"Give a `preset` or a `size` dict with {SIZE_KEYS}.")
    check_positive(args, ("steps", "batch_size"))
    if args["objective"] == "ltr" and args["eval_every"]:
        raise ValueError("Held-out evaluation measures masked-LM accuracy, which objective='ltr' has "
                         f"not. Received: eval_every={args['eval_every']!r}. Pass eval_every=0.")
    check_phase2(args)


def _vocabulary(vocabulary, preset):
    if vocabulary is None and preset is not None:
        from keras_bert_zoo.weights.loading import get_preset_vocabulary

        try:
            vocabulary = get_preset_vocabulary(preset)
        except ValueError:
            return None, None
    if vocabulary is None:
        return None, None
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    return vocabulary, BertTokenizer(vocabulary)


def _custom_backbone(size, vocabulary_size, precision):
    from keras_bert_zoo.models.bert_backbone import BertBackbone

    size = dict(size)
    given = size.pop("vocabulary_size", None)
    if given is not None and vocabulary_size is not None and given != vocabulary_size:
        raise ValueError(
            f"size['vocabulary_size']={given} does not match the vocabulary's "
            f"{vocabulary_size} tokens. Drop it or use the matching vocab.txt."
        )
    vocabulary_size = vocabulary_size or given
    missing = [k for k in ("num_layers", "num_heads", "hidden_dim", "intermediate_dim") if k not in size]
    if missing or vocabulary_size is None:
        raise ValueError(f"A custom size needs {missing or 'a vocabulary'}. Received: size={size!r}.")
    return BertBackbone(vocabulary_size=vocabulary_size, dtype=precision, **size)


def _build_model(a, vocabulary_size):
    """Returns `(compiled BertPretrainer, heads loaded from the preset)`."""
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

    size = dict(a["size"])
    if a["objective"] == "ltr":
        size.setdefault("causal", True)
    if a["preset"] is not None:
        backbone = BertBackbone.from_preset(a["preset"], load_weights=False, dtype=a["precision"], **size)
    else:
        backbone = _custom_backbone(size, vocabulary_size, a["precision"])
    model = BertPretrainer(backbone, nsp=a["nsp"], objective=a["objective"])
    heads = []
    if a["preset"] is not None and a["load_weights"]:
        from keras_bert_zoo.weights.loading import load_pretrainer_weights

        heads = load_pretrainer_weights(model, a["preset"])["heads"]  # logs a head it lacks
        logger.info("Started from %s: backbone + heads %s (others random).", a["preset"], heads)
    model.compile(learning_rate=a["learning_rate"], warmup_steps=max(1, a["warmup_steps"]),
                  total_steps=a["steps"])
    return model, heads


def _drop_masking(x, y):
    """Left-to-right batches: the unmasked ids (the masked ones put back), no positions."""
    x = dict(x)
    positions = x.pop("mask_positions")
    rows = tf.broadcast_to(tf.range(tf.shape(positions)[0])[:, None], tf.shape(positions))
    real = y["mlm_weights"] > 0
    index = tf.stack([tf.boolean_mask(rows, real), tf.boolean_mask(positions, real)], axis=-1)
    x["token_ids"] = tf.tensor_scatter_nd_update(x["token_ids"], index, tf.boolean_mask(y["mlm_ids"], real))
    return x, y


def _make_dataset_fn(a, tokenizer, phase):
    def dataset_fn(index, count, batch, files=None, seed=phase["seed"]):
        if a["train_files"] is not None or files is not None:
            from keras_bert_zoo.data.pretraining import pretraining_dataset

            ds = pretraining_dataset(files or a["train_files"], tokenizer, batch,
                                     sequence_length=phase["sequence_length"],
                                     max_predictions=phase["max_predictions"], seed=seed)
        else:
            from keras_bert_zoo.data.tfrecords import read_pretraining_tfrecords

            ds = read_pretraining_tfrecords(phase["tfrecords"], batch, shuffle=True, seed=seed, num_epochs=None)
        if a["objective"] == "ltr":
            ds = ds.map(_drop_masking)
        # Stream `index` of `count` (a replica under MirroredStrategy, a worker under
        # MultiWorkerMirroredStrategy; see replica_input) takes every count-th batch:
        # each builds the whole pipeline, simple and cheap next to a training step.
        return ds.shard(count, index) if count > 1 else ds

    return dataset_fn


def _held_out_batches(a, dataset_fn):
    if not a["eval_every"] or not a["eval_batches"]:
        return None
    if a["eval_files"] is None:
        # A differently-seeded draw from the training data (not truly held out).
        ds = dataset_fn(0, 1, a["batch_size"], seed=a["seed"] + 1)
    elif a["tfrecords"] is not None:
        from keras_bert_zoo.data.tfrecords import read_pretraining_tfrecords

        ds = read_pretraining_tfrecords(a["eval_files"], a["batch_size"])
    else:
        ds = dataset_fn(0, 1, a["batch_size"], files=a["eval_files"])
    return [tf.nest.map_structure(np.asarray, b) for b in ds.take(a["eval_batches"])]


def _run_phases(a, model, tokenizer, phases):
    """Runs each phase to its end step; returns `(global step, resumed_from, held-out history)`."""
    batches = _held_out_batches(a, _make_dataset_fn(a, tokenizer, phases[0]))
    resumed_from, resuming, history = 0, True, []
    for phase in phases:
        dataset_fn = _make_dataset_fn(a, tokenizer, phase)
        callbacks, evaluation = phase_callbacks(a, batches, phase["offset"])
        if len(phases) > 1:
            logger.info("%s: global steps %d-%d, length %d, batch %d.", phase["name"], phase["offset"] + 1,
                        phase["end"], phase["sequence_length"], phase["batch_size"])
        result = fit_resumable(model, dataset_fn, phase["batch_size"],
                               phase["end"] - phase["offset"], phase["checkpoint_dir"],
                               save_every=a["save_every"], callbacks=callbacks,
                               verbose=1 if a["progress"] else 0)
        if resuming:  # the global step this call started from (phases done before count whole)
            resumed_from = phase["offset"] + result["resumed_from"]
            resuming = result["resumed_from"] >= phase["end"] - phase["offset"]
        history.extend(evaluation.history if evaluation else [])
    return phase["offset"] + result["step"], resumed_from, history


def run_pretraining(output_dir, checkpoint_dir, train_files=None, tfrecords=None, vocabulary=None,
                    preset=None, size=None, load_weights=False, strategy="auto", precision="float32",
                    steps=1000, warmup_steps=100, batch_size=32, learning_rate=1e-4, sequence_length=128,
                    max_predictions=20, save_every=100, log_dir=None, eval_every=0, eval_batches=4,
                    eval_files=None, seed=12345, progress=True, deterministic=True, phase2_steps=0,
                    phase2_sequence_length=None, phase2_max_predictions=None, phase2_batch_size=None,
                    phase2_tfrecords=None, nsp=True, objective="mlm"):
    """Pretrains BERT (MLM + NSP) with `model.fit`, resumably, in one or two phases; writes a preset.

    Two phases (`phase2_steps > 0`), as the paper: the first `steps - phase2_steps`
    steps at `sequence_length`, the last `phase2_steps` at `phase2_sequence_length`.
    Phase 2 continues phase 1's model (backbone, heads, the one position table),
    optimizer state and learning-rate schedule (warm-up once, linear decay to 0 at
    `steps`), with its own data pipeline. (The original ran phase 2 as a separate run
    with a new warm-up: do that with a second call, `preset=<phase-1 output_dir>`,
    `load_weights=True`, which now loads the heads as well.)

    Args:
        output_dir: str. The preset directory written at the end (chief only).
        checkpoint_dir: str. Checkpoints; a rerun resumes from here (phase 2 in
            `<checkpoint_dir>/phase2`).
        train_files: str or list. Text files (one sentence per line, blank line
            between documents); exclusive with `tfrecords`.
        tfrecords: str or list. Pretraining TFRecords (original or our names).
        vocabulary: str or list. vocab.txt (defaults to the preset's).
        preset: str or None. Architecture (and, with `load_weights`, weights) to start from.
        size: dict or None. Custom size: `num_layers`, `num_heads`, `hidden_dim`,
            `intermediate_dim`, optional `max_sequence_length`, `dropout`; with a
            preset, overrides of its config.
        load_weights: bool. Start from the preset's backbone and the MLM / NSP heads
            it has (ours, Google's `cls/...`, HF `BertForPreTraining`); a head it
            lacks stays random (logged). Defaults to False.
        strategy: str. See `get_strategy`. Defaults to `"auto"`.
        precision: `"float32"`, `"mixed_bfloat16"` or `"mixed_float16"` (loss scaling).
        steps, warmup_steps, batch_size (global), learning_rate: the schedule;
            `steps` counts both phases.
        sequence_length, max_predictions: text input only (phase 1).
        save_every: int. Checkpoint interval in steps.
        log_dir: str or None. TensorBoard logs (training and held-out), global steps.
        eval_every: int. Held-out MLM/NSP accuracy every N global steps (0: never);
            the same held-out batches (phase-1 length) in both phases.
        eval_batches: int. Held-out batches.
        eval_files: held-out text files / TFRecords; None draws differently-seeded
            batches from the training data.
        seed: int. Model initialisation and data order (phase 2 data: `seed + 2`).
        progress: bool. Keras progress bar.
        deterministic: bool. `enable_op_determinism` (bitwise-reproducible resume).
        phase2_steps: int. Steps of phase 2, counted inside `steps` (0: one phase).
        phase2_sequence_length: int or None. Text input; defaults to the model's
            `max_sequence_length` (512 for BERT).
        phase2_max_predictions: int or None. Text input; defaults to
            `max_predictions` scaled with the length (20 at 128 → 80 at 512).
        phase2_batch_size: int or None. Global; defaults to `batch_size`.
        phase2_tfrecords: TFRecords written at the phase-2 length (TFRecord input).
        nsp: bool. Next-sentence head and loss (False: the "No NSP" ablation).
        objective: `"mlm"` or `"ltr"` (left-to-right ablation: causal backbone,
            unmasked inputs, needs `nsp=False`; no held-out evaluation).

    Returns:
        dict: `step`, `resumed_from` (global steps), `output_dir`, `held_out` (list of
        results), `heads_loaded` (heads taken from the preset), `phases`, `model`.
    """
    a = dict(locals())
    a["size"] = dict(size or {})
    _check(a)
    phases = phase_settings(a, max_sequence_length(preset, a["size"]))
    keras.utils.set_random_seed(seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()
    dist = get_strategy(strategy)
    vocab_path, tokenizer = _vocabulary(vocabulary, preset)
    with dist.scope():
        model, heads = _build_model(a, tokenizer.vocabulary_size() if tokenizer else None)
    step, resumed_from, history = _run_phases(a, model, tokenizer, phases)
    if is_chief(dist):
        from keras_bert_zoo.weights.loading import save_to_preset

        save_to_preset(model, os.fspath(output_dir), vocabulary=vocab_path)
    return {"step": step, "resumed_from": resumed_from, "output_dir": output_dir, "held_out": history,
            "heads_loaded": heads, "phases": phases, "model": model}
