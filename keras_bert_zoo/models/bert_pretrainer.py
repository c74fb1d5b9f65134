"""`BertPretrainer`: the backbone plus the masked-LM and next-sentence heads, with their losses."""

import keras

from keras_bert_zoo.layers import argument_checks as args
from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.layers.masked_lm_head import MaskedLMHead
from keras_bert_zoo.models.bert_backbone import BertBackbone
from keras_bert_zoo.models.task import Task
from keras_bert_zoo.models.task_inputs import packed_inputs
from keras_bert_zoo.presets import loading
from keras_bert_zoo.presets.preset import open as open_preset
from keras_bert_zoo.presets.task import save_task_preset
from keras_bert_zoo.training import losses
from keras_bert_zoo.training.optimizer import BertAdamW, LinearWarmupLinearDecay
from keras_bert_zoo.weights import mapping
from keras_bert_zoo.utils import keras_internals

OBJECTIVES = ("mlm", "ltr")


def _check_arguments(backbone, nsp, objective):
    if not isinstance(backbone, BertBackbone):
        raise TypeError(
            "`backbone` must be a keras_bert_zoo.BertBackbone. "
            f"Received: an object of type {type(backbone).__name__}."
        )
    args.boolean("nsp", nsp)
    if objective not in OBJECTIVES:
        raise ValueError(
            f"`objective` must be one of {OBJECTIVES}. Received: objective={objective!r}. "
            "Use 'mlm' for BERT, 'ltr' for the left-to-right ablation (§5.1)."
        )
    if objective == "ltr" and nsp:
        raise ValueError(
            "The left-to-right ablation has no next-sentence task. Received: "
            "objective='ltr', nsp=True. Pass nsp=False."
        )
    if objective == "ltr" and not getattr(backbone, "causal", False):
        raise ValueError(
            "objective='ltr' needs a backbone with causal attention. Received a backbone "
            "with causal=False. Build it with `BertBackbone(..., causal=True)`."
        )
    if objective == "mlm" and getattr(backbone, "causal", False):
        raise ValueError(
            "objective='mlm' needs bidirectional attention. Received a backbone with "
            "causal=True. Build it with causal=False or use objective='ltr'."
        )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertPretrainer(Task):
    """BERT's pretraining task: masked LM + next-sentence prediction (Devlin et al., 2018 §3.1).

    Inputs (`objective="mlm"`): the backbone's `token_ids`, `segment_ids`,
    `padding_mask` plus `mask_positions` `(batch, predictions)`. Outputs: a dict with
    `mlm_logits` `(batch, predictions, vocabulary_size)` (float32) and, with `nsp=True`,
    `nsp_logits` `(batch, 2)`. Targets for `fit` are a dict: `mlm_ids` `(batch,
    predictions)`, `mlm_weights` (1.0 real prediction, 0.0 padding) and `nsp_labels`
    `(batch,)` (1 = random next, 0 = actual next, the original convention).

    Loss (as `run_pretraining.py`): masked-LM cross-entropy summed with `mlm_weights`
    over `Σ mlm_weights + 1e-5`, plus the mean next-sentence cross-entropy. Both are
    computed in float32, whatever the dtype policy. Metrics: `mlm_loss`,
    `mlm_accuracy` (weighted), `nsp_loss`, `nsp_accuracy`.

    The §5.1 ablations: `nsp=False` is "No NSP" (MLM only). `objective="ltr"` with
    a `causal=True` backbone and `nsp=False` is "LTR & No NSP": no masking, no
    `mask_positions` input, output `lm_logits` `(batch, seq, vocabulary_size)` where
    position t predicts token t+1; the targets come from `token_ids` themselves (`y`
    is ignored and may be None), weighted by `padding_mask`; metrics `lm_loss`,
    `lm_accuracy`.

    The sequence length is free per batch (up to `max_sequence_length`), so the paper's
    two phases (90% of steps at 128, 10% at 512) are two `fit` calls on the same model;
    position embeddings are one shared table.

    Args:
        backbone: `keras_bert_zoo.BertBackbone`.
        nsp: bool. Add the next-sentence head and loss. Defaults to True.
        objective: str. `"mlm"` (default) or `"ltr"`.
        preprocessor: a preprocessing layer or None (the caller feeds ids).

    Examples:
    >>> tokenizer = keras_bert_zoo.BertTokenizer("vocab.txt")
    >>> backbone = keras_bert_zoo.BertBackbone(tokenizer.vocabulary_size(), 2, 2, 16, 32)
    >>> pretrainer = keras_bert_zoo.BertPretrainer(backbone)
    >>> pretrainer.compile(warmup_steps=10, total_steps=100)
    >>> ds = keras_bert_zoo.data.pretraining_dataset("corpus.txt", tokenizer, 2, sequence_length=16,
    ...                                              max_predictions=3)
    >>> history = pretrainer.fit(ds, steps_per_epoch=1, verbose=0)
    >>> sorted(history.history)
    ['loss', 'mlm_accuracy', 'mlm_loss', 'nsp_accuracy', 'nsp_loss']
    >>> path = pretrainer.save_to_preset("my_pretrainer", vocabulary="vocab.txt")
    >>> keras_bert_zoo.BertPretrainer.from_preset(path).nsp
    True

    References:
        Devlin et al., 2018; google-research/bert `run_pretraining.py`.
    """

    # Pretraining rows are packed to the full length (little padding): evaluation stays on the
    # padded path of its verified numerics.
    skippable_padding = "never"

    def __init__(self, backbone, nsp=True, objective="mlm", preprocessor=None, **kwargs):
        _check_arguments(backbone, nsp, objective)
        # The backbone's layers keep their policy (a functional model drops its `dtype` argument).
        policy = getattr(backbone, "embeddings", backbone).dtype_policy
        # === Layers ===
        self.backbone = backbone
        self.preprocessor = preprocessor
        self.mlm_head = MaskedLMHead(
            backbone.token_embedding, activation=backbone.activation, dtype=policy, name="mlm_head"
        )
        self.nsp_head = None
        if nsp:
            self.nsp_head = keras.layers.Dense(
                2, kernel_initializer=bert_initializer(), dtype=policy, name="nsp_head"
            )
        # === Config ===
        self.nsp = bool(nsp)
        self.objective = objective
        # === Metrics ===
        prefix = "mlm" if objective == "mlm" else "lm"
        self.lm_loss_tracker = keras.metrics.Mean(name=f"{prefix}_loss")
        self.lm_accuracy = keras.metrics.SparseCategoricalAccuracy(name=f"{prefix}_accuracy")
        if nsp:
            self.nsp_loss_tracker = keras.metrics.Mean(name="nsp_loss")
            self.nsp_accuracy = keras.metrics.SparseCategoricalAccuracy(name="nsp_accuracy")
        # === Functional model ===
        inputs = packed_inputs(backbone)
        backbone_outputs = backbone(dict(inputs))
        outputs = {}
        if objective == "mlm":
            positions = keras.Input(shape=(None,), dtype="int32", name="mask_positions")
            inputs["mask_positions"] = positions
            outputs["mlm_logits"] = self.mlm_head(backbone_outputs["sequence_output"], positions)
        else:
            outputs["lm_logits"] = self.mlm_head(backbone_outputs["sequence_output"])
        if nsp:
            outputs["nsp_logits"] = self.nsp_head(backbone_outputs["pooled_output"])
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def head_variables(self):
        """The MLM head's (`cls/predictions/*`) and the NSP head's (`cls/seq_relationship/*`) variables."""
        variables = mapping.mlm_head_targets(self.mlm_head)
        if self.nsp_head is not None:
            variables.update(mapping.nsp_head_targets(self.nsp_head))
        return variables

    # === Losses and metrics ===
    def _lm_targets(self, x, y, y_pred):
        """Returns `(labels, logits, weights)` of the (masked or next-token) LM task."""
        if self.objective == "ltr":
            # Position t predicts token t+1; the last position predicts nothing.
            labels = x["token_ids"][:, 1:]  # (batch, seq - 1)
            logits = y_pred["lm_logits"][:, :-1, :]  # (batch, seq - 1, vocab)
            return labels, logits, keras.ops.cast(x["padding_mask"][:, 1:], "float32")
        _check_targets(y, ("mlm_ids", "mlm_weights") + (("nsp_labels",) if self.nsp else ()))
        return y["mlm_ids"], y_pred["mlm_logits"], y["mlm_weights"]

    def loss_terms(self, x, y, y_pred):
        """Returns a dict of float32 scalar losses: `lm` and, with NSP, `nsp`."""
        labels, logits, weights = self._lm_targets(x, y, y_pred)
        terms = {"lm": losses.weighted_cross_entropy(labels, logits, weights)}
        if self.nsp:
            terms["nsp"] = losses.mean_cross_entropy(y["nsp_labels"], y_pred["nsp_logits"])
        return terms

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The original's total loss; `sample_weight` is not supported (use `mlm_weights`)."""
        del training
        if sample_weight is not None:
            raise ValueError(
                "BertPretrainer weights predictions with y['mlm_weights'], not `sample_weight`. "
                "Received a sample_weight; drop it from the dataset."
            )
        total = sum(self.loss_terms(x, y, y_pred).values())
        for loss in self.losses:
            total = total + keras.ops.cast(loss, "float32")
        # Per-replica loss: scaled so the sum over replicas is the mean (as Keras' losses).
        return keras_internals.scale_loss_for_distribution(total)

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        terms = self.loss_terms(x, y, y_pred)
        labels, logits, weights = self._lm_targets(x, y, y_pred)
        self.lm_loss_tracker.update_state(terms["lm"])
        self.lm_accuracy.update_state(labels, logits, sample_weight=weights)
        if self.nsp:
            self.nsp_loss_tracker.update_state(terms["nsp"])
            self.nsp_accuracy.update_state(
                keras.ops.reshape(y["nsp_labels"], (-1,)), y_pred["nsp_logits"]
            )
        return super().compute_metrics(x, y, y_pred, sample_weight)

    def compile(
        self,
        optimizer="auto",
        learning_rate=1e-4,
        warmup_steps=10_000,
        total_steps=1_000_000,
        jit_compile="auto",
        bias_correction=True,
        **kwargs,
    ):
        """Compiles with the paper's optimizer unless `optimizer` is given.

        Args:
            optimizer: `"auto"` (BertAdamW with `LinearWarmupLinearDecay`) or any Keras
                optimizer. Under `mixed_float16` Keras wraps it in a
                `LossScaleOptimizer`.
            learning_rate: float. Peak learning rate for `"auto"`. Defaults to 1e-4.
            warmup_steps: int. Defaults to 10,000 (the paper).
            total_steps: int. Defaults to 1,000,000 (the paper).
            bias_correction: bool. Adam's bias correction for `"auto"`. The original has
                none, which is harmless after its 10,000 warm-up steps; with a short warm-up
                its early updates are 3-6x the learning rate and small runs stall on the
                unigram plateau (docs/demo.md). Defaults to True; False is the original.
            jit_compile: bool or `"auto"`. `"auto"` (default) is Keras' rule: XLA off on
                CPU-only machines, where we measured it to be no faster (docs/benchmarks.md).
            **kwargs: other `keras.Model.compile` arguments. `loss` is refused: the
                losses are built in.
        """
        if kwargs.get("loss") is not None:
            raise ValueError(
                "BertPretrainer computes its own losses. Received: loss="
                f"{kwargs['loss']!r}. Drop the `loss` argument."
            )
        kwargs.pop("loss", None)
        if optimizer == "auto":
            warmup_steps = min(warmup_steps, total_steps)
            schedule = LinearWarmupLinearDecay(learning_rate, warmup_steps, total_steps)
            optimizer = BertAdamW(schedule, bias_correction=bias_correction)
        super().compile(optimizer=optimizer, jit_compile=jit_compile, **kwargs)

    def compile_from_config(self, config):
        # Keras skips a custom `compile()` when loading; ours takes the same arguments.
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)

    # === Config and presets ===
    def get_config(self):
        return {
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "nsp": self.nsp,
            "objective": self.objective,
            "preprocessor": (
                None
                if self.preprocessor is None
                else keras.saving.serialize_keras_object(self.preprocessor)
            ),
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_preset(cls, preset, load_weights=True, nsp=True, objective="mlm", verify=True, **kwargs):
        """Builds the pretrainer of a preset, with the heads' weights where the checkpoint has them.

        Args:
            preset: str or `Preset`. A registry name, alias or local path (see `BertBackbone.from_preset`).
            load_weights: bool. Load backbone and head weights. Defaults to True.
            nsp: bool. Defaults to True.
            objective: str. `"mlm"` or `"ltr"` (sets `causal=True` on the backbone).
            verify: bool. Check a saved preset's files against its manifest; `False` accepts
                your own edits of its `config.json` / `vocab.txt`. Defaults to True.
            **kwargs: backbone config overrides (`dropout=0.0`, `dtype="mixed_bfloat16"`).

        Returns:
            A `BertPretrainer`.
        """
        preset = open_preset(preset)  # once: the backbone and the heads read the same files
        if objective == "ltr":
            kwargs.setdefault("causal", True)
        backbone = BertBackbone.from_preset(preset, load_weights=load_weights, verify=verify, **kwargs)
        pretrainer = cls(backbone, nsp=nsp, objective=objective)
        if load_weights:
            loading.load_pretrainer_weights(pretrainer, preset, verify=verify)
        return pretrainer

    def save_to_preset(self, directory, vocabulary=None, pretraining=None):
        """Writes the pretrainer as a preset: the backbone, the MLM (and NSP) head, the
        vocabulary, the task's settings (`nsp`, `objective`) and how it was pretrained.

        `BertPretrainer.from_preset(directory)` loads backbone and heads back; any task's
        `from_preset` takes its backbone (and vocabulary) from it.

        Args:
            directory: str. Created or replaced, atomically.
            vocabulary: path to `vocab.txt`, a list of tokens, a tokenizer with
                `get_vocabulary()`, or None (the preprocessor's tokenizer's, if any).
            pretraining: dict or None. Facts of the run (`run_pretraining` writes
                `sequence_length`, the longest it trained at, `steps`, masking); `nsp` is
                always recorded. A task built from the preset defaults to that length
                and, without NSP, to a head that does not read the untrained pooler.

        Returns:
            The directory.
        """
        facts = dict(pretraining or {}, nsp=self.nsp, objective=self.objective)
        return save_task_preset(self, directory, vocabulary=vocabulary, pretraining=facts)


def _check_targets(y, keys):
    if not isinstance(y, dict) or any(key not in y for key in keys):
        received = sorted(y) if isinstance(y, dict) else type(y).__name__
        raise ValueError(
            f"BertPretrainer targets must be a dict with keys {list(keys)}. "
            f"Received: {received}. Use keras_bert_zoo.data.pretraining.pretraining_dataset, "
            "which yields (x, y) in this format."
        )
