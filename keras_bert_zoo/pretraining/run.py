"""`run_pretraining(PretrainingConfig)`: the core of `tools/pretrain.py` and of the demo.

A whole resumable pretraining run: text files or TFRecords in; a preset directory
(`from_preset` loads it) out. Running the same call again after a crash (or after its
time budget stopped it) resumes from `checkpoint_dir`. With `phase2_steps`
the run has the paper's two phases (§A.2: 90% of the steps at length 128, 10% at 512)
on one model, one position table and one learning-rate schedule; phase 2 checkpoints
in `<checkpoint_dir>/phase2`.
"""

import dataclasses
import functools
import hashlib
import logging
import os
import time

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.data.data_service import distribute
from keras_bert_zoo.pretraining import preflight
from keras_bert_zoo.training.distribute import get_strategy, is_chief
from keras_bert_zoo.pretraining.evaluation import baseline_accuracies, evaluate_pretraining, unigram_counts
from keras_bert_zoo.training.resumable_fit import fit_resumable
from keras_bert_zoo.pretraining.phases import max_sequence_length, phase_callbacks, phase_settings
from keras_bert_zoo.data.pretraining import pretraining_dataset
from keras_bert_zoo.data.tfrecords import read_pretraining_tfrecords
from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.bert_pretrainer import BertPretrainer
from keras_bert_zoo import presets
from keras_bert_zoo.presets.loading import get_preset_vocabulary, load_pretrainer_weights
from keras_bert_zoo.pretraining.config import PretrainingConfig
from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

logger = logging.getLogger("keras_bert_zoo.training")


def _vocabulary(vocabulary, preset):
    if vocabulary is None and preset is not None:
        try:
            vocabulary = get_preset_vocabulary(preset)
        except ValueError:
            return None, None
    if vocabulary is None:
        return None, None

    return vocabulary, BertTokenizer(vocabulary)


def _custom_backbone(size, vocabulary_size, precision):
    size = dict(size)
    given = size.pop("vocabulary_size", None)
    if given is not None and vocabulary_size is not None and given != vocabulary_size:
        raise ValueError(
            f"size['vocabulary_size']={given} does not match the vocabulary's "
            f"{vocabulary_size} tokens. Drop it or use the matching vocab.txt."
        )
    return BertBackbone(vocabulary_size=vocabulary_size or given, dtype=precision, **size)


def _build_model(config, vocabulary_size):
    """Returns `(compiled BertPretrainer, heads loaded from the preset)`."""
    size = dict(config.size)
    if config.objective == "ltr":
        size.setdefault("causal", True)
    if config.preset is not None:
        backbone = BertBackbone.from_preset(config.preset, load_weights=False, dtype=config.precision, **size)
    else:
        backbone = _custom_backbone(size, vocabulary_size, config.precision)
    model = BertPretrainer(backbone, nsp=config.nsp, objective=config.objective)
    heads = []
    if config.preset is not None and config.load_weights:
        heads = load_pretrainer_weights(model, config.preset)["heads"]  # logs a head it lacks
        logger.info("Started from %s: backbone + heads %s (others random).", config.preset, heads)
    model.compile(learning_rate=config.learning_rate, warmup_steps=max(1, config.warmup_steps),
                  total_steps=config.steps, bias_correction=config.bias_correction)
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


def read_batches(config, tokenizer, phase, batch, files=None, seed=None, num_epochs=None, drop_remainder=True):
    """The phase's pretraining batches (text made on the fly with the config's masking, or TFRecords)."""
    seed = phase["seed"] if seed is None else seed
    if config.train_files is not None or files is not None:
        return pretraining_dataset(files or config.train_files, tokenizer, batch,
                                   sequence_length=phase["sequence_length"],
                                   max_predictions=phase["max_predictions"], seed=seed, num_epochs=num_epochs,
                                   drop_remainder=drop_remainder, masked_lm_prob=config.masked_lm_prob,
                                   whole_word_masking=config.whole_word_masking)

    return read_pretraining_tfrecords(phase["tfrecords"], batch, shuffle=True, seed=seed, num_epochs=num_epochs,
                                      drop_remainder=drop_remainder)


def _make_dataset_fn(config, tokenizer, phase, through_service=False):
    def dataset_fn(index, count, batch, files=None, seed=phase["seed"]):
        ds = read_batches(config, tokenizer, phase, batch, files=files, seed=seed)
        if config.objective == "ltr":
            ds = ds.map(_drop_masking)
        if through_service:
            # Every trainer (worker, replica) of this run and phase consumes one shared job,
            # so each batch goes to one of them: no `shard` here.
            return ds.apply(distribute(config.data_service, job_name=_service_job(config, phase)))
        # Stream `index` of `count` (a replica under MirroredStrategy, a worker under
        # MultiWorkerMirroredStrategy; see replica_input) takes every count-th batch:
        # each builds the whole pipeline, simple and cheap next to a training step.
        return ds.shard(count, index) if count > 1 else ds

    return dataset_fn


def _service_job(config, phase):
    """One tf.data service job per run and phase, named after the run's checkpoint directory."""
    run = hashlib.sha1(os.path.abspath(os.fspath(config.checkpoint_dir)).encode()).hexdigest()[:12]
    return f"keras_bert_zoo-pretraining-{run}-{phase['name']}"


def _held_out_batches(config, dataset_fn):
    if not config.eval_every or not config.eval_batches:
        return None
    if config.eval_files is None:
        # A differently-seeded draw from the training data (not truly held out).
        ds = dataset_fn(0, 1, config.batch_size, seed=config.seed + 1)
    elif config.tfrecords is not None:
        ds = read_pretraining_tfrecords(config.eval_files, config.batch_size)
    else:
        ds = dataset_fn(0, 1, config.batch_size, files=config.eval_files)
    batches = [tf.nest.map_structure(np.asarray, b) for b in ds.take(config.eval_batches)]
    if not batches:
        raise ValueError(f"The held-out data yields no batch of {config.batch_size}. Received: "
                         f"eval_files={config.eval_files!r}. Add text, or drop --eval-files.")
    return batches


def _evaluation(config, tokenizer, phases, sample):
    """`(evaluate function, baselines, held-out batches)`, or Nones without evaluation."""
    batches = _held_out_batches(config, _make_dataset_fn(config, tokenizer, phases[0]))
    if not batches:
        return None, None, None
    # The unigram baseline guesses the most frequent masked target of the first training batches.
    unigram_id = (unigram_counts(sample).most_common(1) or [(0, 0)])[0][0]
    baselines = dict(baseline_accuracies(batches, unigram_id), unigram_id=unigram_id)
    return functools.partial(evaluate_pretraining, batches=batches), baselines, batches


def _run_phases(config, model, tokenizer, phases, evaluate, baselines, callbacks):
    """Runs each phase to its end step (or the time budget); returns `(global step, resumed_from,
    held-out history, stopped_early)`."""
    resumed_from, resuming, history, started = 0, True, [], time.perf_counter()
    for phase in phases:
        budget = config.time_budget
        if budget is not None and phase["offset"]:  # what phase 1 left of the budget
            budget -= time.perf_counter() - started
            if budget <= 0:
                return phase["offset"], resumed_from, history, True
        dataset_fn = _make_dataset_fn(config, tokenizer, phase, through_service=config.data_service is not None)
        phase_cbs, evaluation = phase_callbacks(config, evaluate, baselines, phase["offset"], budget)
        if len(phases) > 1:
            logger.info("%s: global steps %d-%d, length %d, batch %d.", phase["name"], phase["offset"] + 1,
                        phase["end"], phase["sequence_length"], phase["batch_size"])
        result = fit_resumable(model, dataset_fn, phase["batch_size"],
                               phase["end"] - phase["offset"], phase["checkpoint_dir"],
                               save_every=config.save_every, callbacks=[*phase_cbs, *callbacks],
                               save_input=config.data_service is None,
                               verbose=1 if config.progress else 0)
        if resuming:  # the global step this call started from (phases done before count whole)
            resumed_from = phase["offset"] + result["resumed_from"]
            resuming = result["resumed_from"] >= phase["end"] - phase["offset"]
        history.extend(evaluation.history if evaluation else [])
        if evaluation is not None and evaluation.stopped_by_budget:
            return phase["offset"] + result["step"], resumed_from, history, True
    return phase["offset"] + result["step"], resumed_from, history, False


def pretraining_record(config, phases, step, history=(), baselines=None):
    """What the saved preset records of the run: the longest length it trained at (a task built
    from it defaults to that), the steps, the masking, the optimizer's peak rate and the last
    held-out accuracies (a task reads the pooler only if next-sentence prediction learned)."""
    record = {"sequence_length": max(p["sequence_length"] for p in phases if p["offset"] < step),
              "steps": int(step), "batch_size": config.batch_size, "learning_rate": config.learning_rate,
              "bias_correction": config.bias_correction}
    if config.train_files is not None:
        record.update(masked_lm_prob=config.masked_lm_prob, whole_word_masking=config.whole_word_masking)
    if history:
        last = history[-1]
        record["held_out"] = {"step": int(last["step"]), "mlm_accuracy": float(last["mlm_accuracy"])}
        if last.get("nsp_accuracy") is not None:
            record["held_out"]["nsp_accuracy"] = float(last["nsp_accuracy"])
            record["held_out"]["nsp_majority_accuracy"] = float((baselines or {}).get("nsp_majority_accuracy", 0.5))
    return record


def run_pretraining(config, callbacks=()):
    """Pretrains BERT (MLM + NSP) with `model.fit`, resumably, in one or two phases; writes a preset.

    Phase 2 (`config.phase2_steps > 0`) continues phase 1's model (backbone, heads, the
    one position table), optimizer state and learning-rate schedule (warm-up once,
    linear decay to 0 at `steps`), with its own data pipeline.
    Before the first step it checks the output paths, that the data holds at least one
    batch, and that a checkpoint directory it resumes was written with the same model
    and data settings (stored in `<checkpoint_dir>/run_settings.json`).

    Args:
        config: `PretrainingConfig`. Every setting of the run.
        callbacks: more Keras callbacks for each phase's `fit` (e.g. a progress bar).

    Returns:
        dict: `step`, `resumed_from` (global steps), `output_dir`, `held_out` (list of
        `HeldOutEvaluation` records), `baselines` (`unigram_id`, `unigram_accuracy`,
        `nsp_majority_accuracy`, or None), `held_out_batches`, `stopped_early` (the time
        budget ended the run before `steps`), `heads_loaded` (heads taken from the
        preset), `phases`, `model`.

    Raises:
        ValueError: an output path it could not write, data with fewer instances than
            one batch, or a checkpoint directory of a run with other settings.
    """
    if not isinstance(config, PretrainingConfig):
        raise TypeError(f"`config` must be a PretrainingConfig. Received: {type(config).__name__}.")
    if config.preset is not None:  # located once; every helper below asks the opened preset
        config = dataclasses.replace(config, preset=presets.open(config.preset))
    phases = phase_settings(config, max_sequence_length(config.preset, config.size))
    preflight.check_output_paths(config)
    keras.utils.set_random_seed(config.seed)
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    vocab_path, tokenizer = _vocabulary(config.vocabulary, config.preset)
    vocabulary_size = tokenizer.vocabulary_size() if tokenizer else None
    preflight.check_run_settings(config, vocabulary_size)

    def one_pass(phase, batch):
        return read_batches(config, tokenizer, phase, batch, num_epochs=1, drop_remainder=False)

    sample = preflight.check_corpus(config, phases, one_pass, sample_batches=8 if config.eval_every else 1)
    evaluate, baselines, held_out_batches = _evaluation(config, tokenizer, phases, sample)
    keras.utils.set_random_seed(config.seed)  # the model's initial weights do not depend on the checks
    dist = get_strategy(config.strategy)
    with dist.scope():
        model, heads = _build_model(config, vocabulary_size)
    preflight.check_run_settings(config, vocabulary_size, write=is_chief(dist))
    step, resumed_from, history, stopped = _run_phases(config, model, tokenizer, phases, evaluate, baselines,
                                                       callbacks)
    if is_chief(dist):
        model.save_to_preset(os.fspath(config.output_dir), vocabulary=vocab_path,
                             pretraining=pretraining_record(config, phases, step, history, baselines))
    return {"step": step, "resumed_from": resumed_from, "output_dir": config.output_dir, "held_out": history,
            "baselines": baselines, "held_out_batches": held_out_batches, "stopped_early": stopped,
            "heads_loaded": heads, "phases": phases, "model": model}
