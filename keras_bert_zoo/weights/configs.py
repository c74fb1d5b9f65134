"""Backbone configs from and to Google's `bert_config.json` and HF's `config.json`."""

import logging

logger = logging.getLogger("keras_bert_zoo.weights")

# Our name -> the name in bert_config.json / HF config.json.
_FOREIGN_KEYS = {
    "vocabulary_size": "vocab_size",
    "num_layers": "num_hidden_layers",
    "num_heads": "num_attention_heads",
    "hidden_dim": "hidden_size",
    "intermediate_dim": "intermediate_size",
    "max_sequence_length": "max_position_embeddings",
    "num_segments": "type_vocab_size",
}

# hidden_act -> our activation. "gelu_new", "gelu_pytorch_tanh" and "gelu_fast" are
# all the tanh approximation the original code switched to.
_ACTIVATIONS = {
    "gelu": "gelu",
    "gelu_new": "gelu_approximate",
    "gelu_pytorch_tanh": "gelu_approximate",
    "gelu_fast": "gelu_approximate",
}


def backbone_config_from_foreign(foreign, source="config"):
    """Maps a Google `bert_config.json` or HF `config.json` dict to `BertBackbone` arguments.

    Extra keys (`directionality`, `pooler_*`, `architectures`, …) are tolerated.

    Args:
        foreign: dict. The parsed JSON.
        source: str. Where it came from, for error messages.

    Returns:
        dict of `BertBackbone` constructor arguments (the seven sizes and `activation`).

    Raises:
        ValueError: a missing size key, an unsupported `hidden_act` or
            `position_embedding_type`.
    """
    missing = [key for key in _FOREIGN_KEYS.values() if key not in foreign]
    # type_vocab_size and max_position_embeddings have BERT defaults in HF.
    defaults = {"type_vocab_size": 2, "max_position_embeddings": 512}
    missing = [key for key in missing if key not in defaults]
    if missing:
        raise ValueError(
            f"{source} lacks the BERT config key(s) {missing}. Expected a Google "
            "`bert_config.json` or a HF BERT `config.json`."
        )
    config = {ours: int(foreign.get(theirs, defaults.get(theirs))) for ours, theirs in _FOREIGN_KEYS.items()}
    act = foreign.get("hidden_act", "gelu")
    if act not in _ACTIVATIONS:
        raise ValueError(
            f"Unsupported hidden_act in {source}. Received: hidden_act={act!r}. "
            f"Supported: {sorted(_ACTIVATIONS)}."
        )
    config["activation"] = _ACTIVATIONS[act]
    position_type = foreign.get("position_embedding_type", "absolute")
    if position_type != "absolute":
        raise ValueError(
            f"Unsupported position_embedding_type in {source}. Received: "
            f"position_embedding_type={position_type!r}. Only 'absolute' (BERT's) is supported."
        )
    eps = foreign.get("layer_norm_eps", 1e-12)
    if abs(float(eps) - 1e-12) > 1e-15:
        logger.warning("%s has layer_norm_eps=%s; keras_bert_zoo uses BERT's 1e-12.", source, eps)
    return config


def foreign_config_from_backbone(config, hf=False, architecture="BertForPreTraining"):
    """Returns a `bert_config.json` (or, with `hf=True`, HF `config.json`) dict for a backbone config."""
    out = {theirs: config[ours] for ours, theirs in _FOREIGN_KEYS.items() if ours in config}
    activation = config.get("activation", "gelu")
    out["hidden_act"] = "gelu" if activation == "gelu" else "gelu_new"
    dropout = config.get("dropout", 0.1)
    out["hidden_dropout_prob"] = dropout
    out["attention_probs_dropout_prob"] = dropout
    out["initializer_range"] = 0.02
    if hf:
        out.update(
            {
                "architectures": [architecture],
                "model_type": "bert",
                "layer_norm_eps": 1e-12,
                "pad_token_id": 0,
                "position_embedding_type": "absolute",
            }
        )
    return out
