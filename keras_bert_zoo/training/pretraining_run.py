"""`run_pretraining`: the core of `tools/pretrain.py`, a whole resumable pretraining run.

Text files or TFRecords in; a preset directory (`from_preset` loads it) out. Running
the same call again after a crash resumes from `checkpoint_dir`.
"""

import os

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.training.callbacks import HeldOutEvaluation, ScalarLogger
from keras_bert_zoo.training.distribute import get_strategy, is_chief
from keras_bert_zoo.training.pretraining_loop import fit_resumable

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
    for name in ("steps", "batch_size"):
        if not isinstance(args[name], int) or args[name] < 1:
            raise ValueError(f"`{name}` must be a positive integer. Received: {name}={args[name]!r}.")


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


def _build_model(preset, size, vocabulary_size, precision, load_weights, learning_rate, warmup, steps):
    from keras_bert_zoo.models.bert_backbone import BertBackbone
    from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

    if preset is not None:
        backbone = BertBackbone.from_preset(preset, load_weights=load_weights, dtype=precision, **size)
    else:
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
        backbone = BertBackbone(vocabulary_size=vocabulary_size, dtype=precision, **size)
    model = BertPretrainer(backbone)
    model.compile(learning_rate=learning_rate, warmup_steps=max(1, warmup), total_steps=steps)
    return model


def _make_dataset_fn(a, tokenizer):
    def dataset_fn(index, count, batch, files=None, seed=a["seed"]):
        if a["train_files"] is not None or files is not None:
            from keras_bert_zoo.data.pretraining import pretraining_dataset

            ds = pretraining_dataset(files or a["train_files"], tokenizer, batch,
                                     sequence_length=a["sequence_length"],
                                     max_predictions=a["max_predictions"], seed=seed)
            # The tokenizer's ops hold resources (vocabulary tables) that tf.data calls
            # stateful, which blocks saving the iterator; their state is constant, so
            # it is safe to leave out. (Random draws in the pipeline are stateless.)
            options = tf.data.Options()
            options.experimental_external_state_policy = (
                tf.data.experimental.ExternalStatePolicy.IGNORE)
            ds = ds.with_options(options)
        else:
            from keras_bert_zoo.data.tfrecords import read_pretraining_tfrecords

            ds = read_pretraining_tfrecords(a["tfrecords"], batch, shuffle=True, seed=seed, num_epochs=None)
        # Worker `index` of `count` takes every count-th batch (each worker builds the
        # whole pipeline: simple, and cheap next to a training step).
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


def run_pretraining(output_dir, checkpoint_dir, train_files=None, tfrecords=None, vocabulary=None,
                    preset=None, size=None, load_weights=False, strategy="auto", precision="float32",
                    steps=1000, warmup_steps=100, batch_size=32, learning_rate=1e-4, sequence_length=128,
                    max_predictions=20, save_every=100, log_dir=None, eval_every=0, eval_batches=4,
                    eval_files=None, seed=12345, progress=True, deterministic=True):
    """Pretrains BERT (MLM + NSP) with `model.fit`, resumably, and writes a preset.

    Args:
        output_dir: str. The preset directory written at the end (chief only).
        checkpoint_dir: str. Checkpoints; a rerun resumes from here.
        train_files: str or list. Text files (one sentence per line, blank line
            between documents); exclusive with `tfrecords`.
        tfrecords: str or list. Pretraining TFRecords (original or our names).
        vocabulary: str or list. vocab.txt (defaults to the preset's).
        preset: str or None. Architecture (and, with `load_weights`, weights) to start from.
        size: dict or None. Custom size: `num_layers`, `num_heads`, `hidden_dim`,
            `intermediate_dim`, optional `max_sequence_length`, `dropout`; with a
            preset, overrides of its config.
        load_weights: bool. Start from the preset's weights. Defaults to False.
        strategy: str. See `get_strategy`. Defaults to `"auto"`.
        precision: `"float32"`, `"mixed_bfloat16"` or `"mixed_float16"` (loss scaling).
        steps, warmup_steps, batch_size (global), learning_rate: the schedule.
        sequence_length, max_predictions: text input only.
        save_every: int. Checkpoint interval in steps.
        log_dir: str or None. TensorBoard logs (training and held-out).
        eval_every: int. Held-out MLM/NSP accuracy every N steps (0: never).
        eval_batches: int. Held-out batches.
        eval_files: held-out text files / TFRecords; None draws differently-seeded
            batches from the training data.
        seed: int. Model initialisation and data order.
        progress: bool. Keras progress bar.
        deterministic: bool. `enable_op_determinism` (bitwise-reproducible resume).

    Returns:
        dict: `step`, `resumed_from`, `output_dir`, `held_out` (list of results),
        `model`.
    """
    a = dict(locals())
    a["size"] = dict(size or {})
    _check(a)
    keras.utils.set_random_seed(seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()
    dist = get_strategy(strategy)
    vocab_path, tokenizer = _vocabulary(vocabulary, preset)
    with dist.scope():
        model = _build_model(preset, a["size"], tokenizer.vocabulary_size() if tokenizer else None,
                             precision, load_weights, learning_rate, warmup_steps, steps)
    dataset_fn = _make_dataset_fn(a, tokenizer)
    callbacks = []
    if log_dir:
        callbacks.append(ScalarLogger(log_dir, every_n_steps=max(1, save_every // 10)))
    batches = _held_out_batches(a, dataset_fn)
    evaluation = None
    if batches:
        evaluation = HeldOutEvaluation(batches, eval_every, log_dir=log_dir)
        callbacks.append(evaluation)
    result = fit_resumable(model, lambda i, n, b: dataset_fn(i, n, b), batch_size, steps,
                           checkpoint_dir, save_every=save_every, callbacks=callbacks,
                           verbose=1 if progress else 0)
    if is_chief(dist):
        from keras_bert_zoo.weights.loading import save_to_preset

        save_to_preset(model, os.fspath(output_dir), vocabulary=vocab_path)
    return {"step": result["step"], "resumed_from": result["resumed_from"], "output_dir": output_dir,
            "held_out": evaluation.history if evaluation else [], "model": model}
