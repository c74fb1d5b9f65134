"""How a `Task` is written as a preset and built from one (`Task.save_to_preset`/`from_preset`):
the task's config, the preprocessor's settings and casing beside the weights, and the head
from the checkpoint where it has one."""

import inspect
import logging

import keras

from keras_bert_zoo.utils import quantization
from keras_bert_zoo.presets import loading, preset_format, task_heads, weight_sizes
from keras_bert_zoo.presets.preset import open as open_preset
from keras_bert_zoo.weights import mapping

logger = logging.getLogger("keras_bert_zoo.models")


def save_task_preset(task, directory, vocabulary=None, pretraining=None):
    """Writes `task` as a preset (see `Task.save_to_preset`).

    `pretraining` (a dict, `BertPretrainer.save_to_preset`'s) records how the weights were
    pretrained (`sequence_length`, `nsp`, steps, masking): a task built from the preset reads
    it to default to the trained length and to a head that reads what was trained.

    `vocabulary` (a `vocab.txt` path, a token list or a tokenizer) is written when given,
    else the preprocessor's tokenizer's vocabulary (a task without one writes none).
    A quantised task is written as its dequantised float weights plus the mode
    (`task.quantization`); `from_preset` quantises them again, which gives back the
    same int8 kernels."""
    extra = {"task": {"class_name": type(task).__name__, "config": task.task_config()}}
    if pretraining:
        extra["pretraining"] = dict(pretraining)
    card = task.card_facts()
    tokenizer = getattr(task.preprocessor, "tokenizer", None)
    if task.preprocessor is not None:
        extra["preprocessor"] = preprocessor_settings(task.preprocessor)
    if tokenizer is not None:
        extra["lowercase"] = bool(tokenizer.lowercase)
    mode = quantization.quantization_mode(task)
    if mode is None:
        return loading.write_model_preset(task, directory, vocabulary=vocabulary, extra=extra, card=card)
    extra["task"]["quantization"] = mode
    floats = quantization.dequantized_variables(task)
    tensors = mapping.collect_tensors({n: floats.get(id(v), v) for n, v in task.declared_variables().items()})
    if vocabulary is None:
        vocabulary = tokenizer
    return preset_format.write_preset(
        directory, tensors, loading.backbone_config(task.backbone), vocabulary=vocabulary, extra=extra, card=card
    )


def task_from_preset(cls, preset, load_weights, sequence_length, kwargs):
    """Builds the `Task` subclass `cls` from a preset (see `Task.from_preset`); `kwargs` is
    consumed: task and preprocessor arguments are taken out, the rest configures the backbone.
    The preset is opened once (`presets.open`) and that `Preset` is what backbone and preprocessor
    are built from."""
    preset = open_preset(preset)
    saved = preset.task_config
    task = saved.get("task") or {}
    task_kwargs = dict(task.get("config", {})) if task.get("class_name") == cls.__name__ else {}
    own = set(inspect.signature(cls.__init__).parameters) - {"self", "backbone", "preprocessor", "kwargs"}
    explicit = {k: kwargs.pop(k) for k in list(kwargs) if k in own}
    if task.get("source"):  # a foreign checkpoint's head: the caller's arguments must not contradict it
        merged = task_heads.merge_arguments(cls.__name__, task, {k: v for k, v in explicit.items() if v is not None})
        if task["class_name"] == cls.__name__:
            task_kwargs = merged
            explicit = {k: v for k, v in explicit.items() if k not in ("num_classes", "labels")}
    # The saved preprocessor settings, each overridden by a value the caller gives.
    accepted = _preset_arguments(cls.preprocessor_cls.from_preset) - {"sequence_length", "lowercase"}
    stored = saved.get("preprocessor") or {}
    settings = {k: v for k, v in stored.items() if k in accepted}
    settings.update({k: v for k, v in ((k, kwargs.pop(k)) for k in list(kwargs) if k in accepted)
                     if v is not None})
    settings.update(_foreign_casing(preset, settings))
    task_kwargs.update({k: v for k, v in explicit.items() if v is not None})
    # An argument of both the task and its preprocessor (a span extractor's `rules`) sets both.
    settings.update({k: v for k, v in explicit.items() if k in accepted and v is not None})
    if explicit.get("dropout") is not None:
        kwargs.setdefault("dropout", explicit["dropout"])
    tensors = source = None
    if load_weights:
        tensors, source = preset.tensors()
        # Before anything is built: the config's sizes and the vocabulary against the weights.
        weight_sizes.check_config_against_weights({**preset.config, **kwargs}, tensors, source)
        weight_sizes.check_vocabulary_fits(preset.vocabulary_file, tensors, source)
        for key, value in cls.config_from_checkpoint(tensors).items():
            if task.get("source") and key in task_kwargs and task_kwargs[key] != value:
                raise ValueError(f"{task['source']} says {key}={task_kwargs[key]}, its weights {key}={value}: "
                                 "the checkpoint contradicts itself. Nothing was loaded.")
            task_kwargs.setdefault(key, value)
    for key, value in cls.preset_defaults.items():
        task_kwargs.setdefault(key, value)
    pretrained = dict(saved.get("pretraining") or {})
    if task.get("class_name") == "BertPretrainer":  # presets written before the record
        pretrained.setdefault("nsp", task.get("config", {}).get("nsp", True))
    if task.get("class_name") != cls.__name__:
        task_kwargs.update(_head_for_pretraining(cls, pretrained, explicit))
    backbone = cls.backbone_cls.from_preset(preset, load_weights=False, **kwargs)
    length = _sequence_length(cls, backbone, sequence_length or stored.get("sequence_length"), pretrained)
    preprocessor = cls.preprocessor_cls.from_preset(preset, sequence_length=length, **settings)
    model = cls(backbone, preprocessor=preprocessor, **task_kwargs)
    if load_weights:
        loading.assign_declared_weights(model, tensors, source, missing_heads="fresh")
    if task.get("class_name") == cls.__name__ and task.get("quantization"):
        model.quantize(task["quantization"])
    model.model_card.update(_loaded_card(cls, preset))
    return model


# Held-out next-sentence accuracy at which a pretrained pooler counts as trained (the bar;
# real BERT reaches ~0.97, chance is 0.5).
POOLER_TRAINED_AT = 0.75


def _head_for_pretraining(cls, pretrained, explicit):
    """A task whose head can read the pooler or the tokens (`pooling`) reads the tokens' mean when
    the preset's pooler was never trained: pretrained without next-sentence prediction, or with it
    but held-out NSP accuracy (recorded by `run_pretraining`) below `POOLER_TRAINED_AT`."""
    if "pooling" not in inspect.signature(cls.__init__).parameters or explicit.get("pooling") is not None:
        return {}
    nsp_accuracy = (pretrained.get("held_out") or {}).get("nsp_accuracy")
    if not pretrained.get("nsp", True):
        why = "was pretrained without next-sentence prediction, so its pooler was never trained"
    elif nsp_accuracy is not None and nsp_accuracy < POOLER_TRAINED_AT:
        why = (f"reached held-out next-sentence accuracy {nsp_accuracy:.3f} (below {POOLER_TRAINED_AT}), so its "
               "pooler did not learn")
    else:
        return {}
    logger.info("%s: the preset %s; the head reads the mean of the tokens' vectors (pooling='mean'; pass "
                "pooling='pooled_output' for the pooler).", cls.__name__, why)
    return {"pooling": "mean"}


def _sequence_length(cls, backbone, length, pretrained):
    """The preprocessor's length: the one asked for, else the class default capped by the
    backbone's position table and the length the preset was pretrained at."""
    trained = pretrained.get("sequence_length")
    if length is None:
        length = min(cls.default_sequence_length, backbone.max_sequence_length)
        if trained and trained < length:
            logger.info("%s: sequence_length=%d, the length the preset was pretrained at (positions beyond "
                        "it were never trained); pass sequence_length= to change it.", cls.__name__, trained)
            length = trained
    if length > backbone.max_sequence_length:
        raise ValueError(
            f"`sequence_length` must be at most the backbone's max_sequence_length="
            f"{backbone.max_sequence_length}. Received: sequence_length={length}."
        )
    if trained and length > trained:
        logger.warning("%s: sequence_length=%d, but the preset was pretrained at length %d: position "
                       "embeddings %d-%d were never trained.", cls.__name__, length, trained, trained, length - 1)
    return length


def _loaded_card(cls, preset):
    """The model card facts a task loaded from `preset` starts with (`Task.model_card`).

    From a preset whose card describes this task class (one this package saved): that card's
    facts, true of the loaded weights until they train again, plus `loaded_from`. From any other
    preset (a registry name, a hub handle, a folder): the preset as `source_preset`,
    `base_model` and `loaded_from`, and the `from_preset` call that made the task. `preset` is a `Preset`."""
    card = preset.card()
    name = preset.name
    if card and card.get("task") == cls.__name__:
        return {**card, "loaded_from": name}
    return {"source_preset": name, "base_model": (card or {}).get("base_model") or name, "loaded_from": name,
            "made_by": {"code": [f"task = keras_bert_zoo.{cls.__name__}.from_preset({name!r})"]}}


def _foreign_casing(preset, settings):
    """The casing an HF or keras-hub checkpoint's tokenizer files state, for the preprocessor:
    `lowercase` unless the caller set it, and `strip_accents` where it differs from `lowercase`
    (keras-hub's uncased BERT lowercases without stripping accents). `preset` is a `Preset`."""
    stated = preset.tokenizer_settings
    out = {}
    if "lowercase" in stated and settings.get("lowercase") is None:
        out["lowercase"] = stated["lowercase"]
    lowercase = settings.get("lowercase", out.get("lowercase"))
    if stated.get("strip_accents") is not None and lowercase is not None and stated["strip_accents"] != lowercase:
        out["strip_accents"] = stated["strip_accents"]
    return out


def _preset_arguments(function):
    """The named arguments of a `from_preset` (no `preset`, no `**kwargs`)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {name for name, p in inspect.signature(function).parameters.items() if p.kind in kinds} - {"preset"}


def preprocessor_settings(preprocessor):
    """What a preset stores of a preprocessor: its constructor arguments that are plain
    values (`sequence_length`, `truncate`, `doc_stride`, `max_query_length`,
    `window_stride`, ...), not the tokenizer; `type(preprocessor).from_preset(preset,
    **settings)` rebuilds it with the preset's vocabulary."""
    config = preprocessor.get_config()
    names = _preset_arguments(type(preprocessor).__init__) - {"self", "tokenizer"}
    plain = (bool, int, float, str, type(None))
    return {name: config[name] for name in sorted(names) if name in config and isinstance(config[name], plain)}


def keras_config(task):
    """`Task.get_config`: backbone and preprocessor serialised, plus the quantisation mode."""
    config = {
        "backbone": keras.saving.serialize_keras_object(task.backbone),
        "preprocessor": (
            None if task.preprocessor is None else keras.saving.serialize_keras_object(task.preprocessor)
        ),
        "name": task.name,
        "trainable": task.trainable,
    }
    mode = quantization.quantization_mode(task)
    if mode:
        config["quantization"] = mode  # from_config quantises before the weights load
    return config


def task_from_keras_config(cls, config):
    """`Task.from_config`: the inverse of `keras_config`."""
    config = dict(config)
    mode = config.pop("quantization", None)
    for key in ("backbone", "preprocessor"):
        if isinstance(config.get(key), dict):
            config[key] = keras.saving.deserialize_keras_object(config[key])
    task = cls(**config)
    if mode:
        task.quantize(mode)
    return task
