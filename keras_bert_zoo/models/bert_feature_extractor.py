"""`BertFeatureExtractor`: the feature-based approach of §5.3 (frozen BERT -> BiLSTM tagger)."""

import os

import keras
import numpy as np
import safetensors.numpy
import tensorflow as tf

from keras_bert_zoo.layers.initializers import bert_initializer
from keras_bert_zoo.models.bert_token_classifier import PACKED_KEYS, BertTokenClassifier
from keras_bert_zoo.presets.preset import open as open_preset
from keras_bert_zoo.utils import files

# The tagger has no counterpart in BERT checkpoints: a preset keeps it in a file of its own.
TAGGER_FILE = "tagger.safetensors"

# Table 7's feature choices -> (encoder_outputs indices as a function of num_layers, combination).
FEATURES = {
    "embeddings": (lambda n: [0], "single"),
    "second_to_last": (lambda n: [n - 1], "single"),
    "last": (lambda n: [n], "single"),
    "weighted_sum_last_four": (lambda n: list(range(max(n - 3, 1), n + 1)), "weighted_sum"),
    "concat_last_four": (lambda n: list(range(max(n - 3, 1), n + 1)), "concat"),
    "weighted_sum_all": (lambda n: list(range(1, n + 1)), "weighted_sum"),
}


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class ScalarMix(keras.layers.Layer):
    """`gamma * sum_k softmax(w)_k * layer_k` over axis -2 (ELMo's scalar mix); w starts at 0."""

    def build(self, input_shape):
        self.layer_weights = self.add_weight(shape=(input_shape[-2],), initializer="zeros", name="layer_weights")
        self.gamma = self.add_weight(shape=(), initializer="ones", name="gamma")

    def call(self, stacked):  # (batch, seq, layers, hidden)
        weights = keras.ops.softmax(keras.ops.cast(self.layer_weights, stacked.dtype))
        return self.gamma * keras.ops.einsum("bslh,l->bsh", stacked, weights)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class InferenceCall(keras.layers.Layer):
    """Calls a model in inference mode whatever the outer `training`: a frozen BERT keeps
    its dropout off while the tagger on top trains (a functional node's own
    `training=False` is overridden by the outer call in Keras 3)."""

    def __init__(self, model, **kwargs):
        super().__init__(**kwargs)
        self.model = model

    def call(self, inputs):
        return self.model(inputs, training=False)

    def compute_output_spec(self, inputs):
        # The wrapped model's own: tracing `call` on symbolic inputs fails on JAX and torch.
        return self.model.compute_output_spec(inputs)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertFeatureExtractor(BertTokenClassifier):
    """Tags words from a frozen BERT's features with a two-layer BiLSTM (§5.3, Table 7).

    The backbone is frozen and runs in inference mode (no dropout). The features are
    one of Table 7's choices, taken from the backbone's `encoder_outputs` (the
    embedding output, then every layer's): `"embeddings"`, `"second_to_last"`,
    `"last"`, `"weighted_sum_last_four"`, `"concat_last_four"` (the paper's best) or
    `"weighted_sum_all"` (all transformer layers; a backbone of fewer than four layers
    gives all of them for the "last four"); weighted sums learn softmax-
    normalised layer weights and a scale. Two bidirectional LSTM layers run over the
    window's pieces (masked by `padding_mask`) and a dense layer classifies every
    position; as in fine-tuning, the loss and accuracy read each word's first piece only
    (the `TokenClassifierPreprocessor`'s sample weights), so both rows of Table 7 share
    data, windows and metric. `fit` trains end to end with BERT frozen;
    `fit_cached` computes the features once and trains the tagger on them.

    Args:
        backbone: `keras_bert_zoo.BertBackbone` (set to `trainable=False`).
        num_classes: int. Labels (with "O").
        feature: str. One of `FEATURES`. Defaults to "concat_last_four".
        preprocessor: `keras_bert_zoo.text.TokenClassifierPreprocessor` or None.
        labels: list of str or None. Tag names (IOB2).
        lstm_units: int. Units per direction (768 in the paper). Defaults to 768.
        dropout: float. Dropout on the features and between layers. Defaults to 0.1.

    Examples:
    >>> data = keras_bert_zoo.data.read_conll("conll2003/eng.train")
    >>> labels = keras_bert_zoo.data.conll_labels(data.tags)
    >>> tagger = keras_bert_zoo.BertFeatureExtractor.from_preset(
    ...     "tiny_preset", labels=labels, feature="concat_last_four", lstm_units=8)
    >>> sentences, label_ids = keras_bert_zoo.data.conll_inputs(data, labels)
    >>> history = tagger.fit_cached(sentences, label_ids, epochs=2, verbose=0)
    >>> sorted(history.history)
    ['accuracy', 'loss']
    """

    def __init__(self, backbone, num_classes, feature="concat_last_four", preprocessor=None, labels=None,
                 lstm_units=768, dropout=0.1, **kwargs):
        if feature not in FEATURES:
            raise ValueError(f"`feature` must be one of {sorted(FEATURES)}. Received: feature={feature!r}.")
        if not isinstance(lstm_units, int) or isinstance(lstm_units, bool) or lstm_units < 1:
            raise ValueError(f"`lstm_units` must be a positive int. Received: lstm_units={lstm_units!r}.")
        # === Config === (read by `_head`)
        self.feature = feature
        self.lstm_units = lstm_units
        backbone.trainable = False
        super().__init__(backbone, num_classes, preprocessor=preprocessor, labels=labels, dropout=dropout, **kwargs)

    def _head(self, backbone, inputs, num_classes, dropout, policy):
        """Frozen features -> `feature_model`; features + mask -> `tagger` (BiLSTM x2 + dense)."""
        feature, lstm_units = self.feature, self.lstm_units
        indices, combination = FEATURES[feature][0](backbone.num_layers), FEATURES[feature][1]
        encoder_outputs = InferenceCall(backbone, name="frozen_backbone")(dict(inputs))["encoder_outputs"]
        chosen = [encoder_outputs[i] for i in indices]
        stacked = keras.ops.stack(chosen, axis=2)  # (batch, seq, layers, hidden)
        feature_model = keras.Model(inputs, stacked, name="feature_model")
        # The tagger: its own inputs, so cached features can be fed to it directly.
        features = keras.Input(shape=(None, len(indices), backbone.hidden_dim), name="features")
        mask = keras.Input(shape=(None,), dtype="int32", name="padding_mask")
        if combination == "weighted_sum":
            x = ScalarMix(dtype=policy, name="scalar_mix")(features)  # (batch, seq, hidden)
        else:
            x = keras.layers.Reshape((-1, len(indices) * backbone.hidden_dim), name="concat")(features)
        x = keras.layers.Dropout(dropout, name="feature_dropout")(x)
        keep = keras.ops.not_equal(mask, 0)
        for i in range(2):
            lstm = keras.layers.LSTM(lstm_units, return_sequences=True, dtype=policy)
            x = keras.layers.Bidirectional(lstm, name=f"bilstm_{i}")(x, mask=keep)  # (batch, seq, 2 units)
            x = keras.layers.Dropout(dropout, name=f"bilstm_{i}_dropout")(x)
        dense = keras.layers.Dense(num_classes, kernel_initializer=bert_initializer(), dtype=policy, name="logits")
        tagger = keras.Model([features, mask], dense(x), name="tagger")
        outputs = tagger([stacked, inputs["padding_mask"]])  # (batch, seq, num_classes)
        return outputs, {"feature_model": feature_model, "tagger": tagger, "output_dense": dense}

    def head_variables(self):
        """None: a BiLSTM tagger has no counterpart in Google's or HF's checkpoints
        (presets keep it in `tagger.safetensors`)."""
        return {}

    def save_to_preset(self, directory, vocabulary=None):
        """`Task.save_to_preset`, plus the tagger's weights in `tagger.safetensors`."""
        out = super().save_to_preset(directory, vocabulary=vocabulary)
        # Keyed by position (layer names are numbered per session), checked by shape on load.
        arrays = {f"{i:04d}": np.asarray(v) for i, v in enumerate(self.tagger.weights)}
        with files.atomic_path(os.path.join(directory, TAGGER_FILE)) as tmp:
            safetensors.numpy.save_file(arrays, tmp)
        return out

    @classmethod
    def from_preset(cls, preset, num_classes=None, labels=None, sequence_length=None, load_weights=True, **kwargs):
        """`BertTokenClassifier.from_preset`; a preset saved by this class also restores the tagger."""
        preset = open_preset(preset)  # once: the task and the tagger read the same folder
        model = super().from_preset(preset, num_classes=num_classes, labels=labels,
                                    sequence_length=sequence_length, load_weights=load_weights, **kwargs)
        path = os.path.join(preset.directory, TAGGER_FILE)
        if load_weights and os.path.isfile(path):
            arrays = safetensors.numpy.load_file(path)
            if len(arrays) != len(model.tagger.weights):
                raise ValueError(f"{path} holds {len(arrays)} tagger tensors; this model has "
                                 f"{len(model.tagger.weights)}. Build it with the saved feature and lstm_units.")
            for i, variable in enumerate(model.tagger.weights):
                value = arrays[f"{i:04d}"]
                if tuple(value.shape) != tuple(variable.shape):
                    raise ValueError(f"{path}: tensor {i} has shape {value.shape}; {variable.path} has "
                                     f"{tuple(variable.shape)}. Build the model with the saved settings.")
                variable.assign(value)
        return model

    @classmethod
    def config_from_checkpoint(cls, tensors):
        return {}

    def features(self, x, batch_size=None):
        """Packed ids (or raw sentences) -> the chosen layers, (windows, seq, layers, hidden)."""
        if not (isinstance(x, dict) and "token_ids" in x):
            x = {k: v for k, v in self.preprocessor.windows(x).items() if k in PACKED_KEYS}
        return self.feature_model.predict(x, batch_size=batch_size, verbose=0)

    def fit_cached(self, x, y, epochs=1, batch_size=32, learning_rate=1e-3, shuffle=True, seed=0, **kwargs):
        """Runs BERT once over the data, then trains the tagger on the stored features.

        The features live in memory as a `tf.data` source, so an epoch of the tagger
        does not re-run BERT. Adam at `learning_rate`; loss and accuracy on first pieces.

        Args:
            x, y: raw sentences and word labels, as for `fit`.
            epochs, batch_size: the tagger's. Defaults to 1 and 32.
            learning_rate: float. Defaults to 1e-3.
            shuffle: bool. Shuffle windows every epoch (seeded). Defaults to True.
            **kwargs: more `keras.Model.fit` arguments (callbacks, verbose).

        Returns:
            The `History` of the tagger's `fit`.
        """
        x, y, _ = self.checked_inputs(x, y, call="fit_cached")
        packed, labels, weights = self.preprocessor(x, y)
        features = self.features(packed, batch_size=batch_size)
        data = ((features, np.asarray(packed["padding_mask"])), np.asarray(labels), np.asarray(weights))
        dataset = tf.data.Dataset.from_tensor_slices(data)
        if shuffle:
            dataset = dataset.shuffle(len(features), seed=seed, reshuffle_each_iteration=True)
        self.tagger.compile(
            optimizer=keras.optimizers.Adam(learning_rate),
            loss=self.default_loss(),
            weighted_metrics=[keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
        )
        return self.tagger.fit(dataset.batch(batch_size), epochs=epochs, shuffle=False, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"feature": self.feature, "lstm_units": self.lstm_units})
        return config
