"""An independent NumPy BERT written from the equations (Devlin et al., 2018; modeling.py).

Weights come in a plain dict with the original Google variable names, so this file
shares no code with the package.
"""

import math

import numpy as np
from scipy.special import erf


def gelu(x, approximate=False):
    if approximate:
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def softmax(x):
    x = x - x.max(-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(-1, keepdims=True)


def encoder_layer(x, mask, w, prefix, num_heads, approximate=False, causal=False):
    """One post-LN layer. x (b, s, h) float64; mask (b, s) of 0/1."""
    b, s, h = x.shape
    d = h // num_heads

    def dense(t, name):
        return t @ w[f"{prefix}/{name}/kernel"] + w[f"{prefix}/{name}/bias"]

    def heads(t):
        return t.reshape(b, s, num_heads, d).transpose(0, 2, 1, 3)

    q, k, v = (heads(dense(x, f"attention/self/{n}")) for n in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d)
    allowed = np.broadcast_to(mask[:, None, None, :].astype(bool), scores.shape)
    if causal:
        allowed = allowed & np.tril(np.ones((s, s), bool))[None, None]
    scores = np.where(allowed, scores, -1e30)
    context = (softmax(scores) @ v).transpose(0, 2, 1, 3).reshape(b, s, h)
    attn = dense(context, "attention/output/dense")
    x = layer_norm(
        x + attn, w[f"{prefix}/attention/output/LayerNorm/gamma"], w[f"{prefix}/attention/output/LayerNorm/beta"]
    )
    inter = gelu(dense(x, "intermediate/dense"), approximate)
    out = dense(inter, "output/dense")
    return layer_norm(x + out, w[f"{prefix}/output/LayerNorm/gamma"], w[f"{prefix}/output/LayerNorm/beta"])


def bert(inputs, w, num_layers, num_heads, approximate=False, causal=False):
    """Returns (sequence_output, pooled_output, all layer outputs incl. embeddings)."""
    ids, seg, mask = inputs["token_ids"], inputs["segment_ids"], inputs["padding_mask"]
    s = ids.shape[1]
    x = (
        w["bert/embeddings/word_embeddings"][ids]
        + w["bert/embeddings/token_type_embeddings"][seg]
        + w["bert/embeddings/position_embeddings"][:s][None]
    )
    x = layer_norm(x, w["bert/embeddings/LayerNorm/gamma"], w["bert/embeddings/LayerNorm/beta"])
    outputs = [x]
    for i in range(num_layers):
        x = encoder_layer(x, mask, w, f"bert/encoder/layer_{i}", num_heads, approximate, causal)
        outputs.append(x)
    pooled = np.tanh(x[:, 0] @ w["bert/pooler/dense/kernel"] + w["bert/pooler/dense/bias"])
    return x, pooled, outputs


def layer_weights(layer, prefix):
    """Reads our TransformerEncoder's weights into the original names (float64)."""
    w = {}
    pairs = {
        "attention/self/query": layer.attention.query_dense,
        "attention/self/key": layer.attention.key_dense,
        "attention/self/value": layer.attention.value_dense,
        "attention/output/dense": layer.attention_output_dense,
        "intermediate/dense": layer.intermediate_dense,
        "output/dense": layer.output_dense,
    }
    for name, dense in pairs.items():
        w[f"{prefix}/{name}/kernel"] = np.array(dense.kernel, np.float64)
        w[f"{prefix}/{name}/bias"] = np.array(dense.bias, np.float64)
    for name, ln in (("attention/output/LayerNorm", layer.attention_layer_norm), ("output/LayerNorm", layer.output_layer_norm)):
        w[f"{prefix}/{name}/gamma"] = np.array(ln.gamma, np.float64)
        w[f"{prefix}/{name}/beta"] = np.array(ln.beta, np.float64)
    return w


def backbone_weights(backbone):
    """Reads a BertBackbone's weights into the original variable names (float64)."""
    emb = backbone.embeddings
    w = {
        "bert/embeddings/word_embeddings": np.array(emb.token_embedding.embeddings, np.float64),
        "bert/embeddings/token_type_embeddings": np.array(emb.segment_embedding.embeddings, np.float64),
        "bert/embeddings/position_embeddings": np.array(emb.position_embeddings, np.float64),
        "bert/embeddings/LayerNorm/gamma": np.array(emb.layer_norm.gamma, np.float64),
        "bert/embeddings/LayerNorm/beta": np.array(emb.layer_norm.beta, np.float64),
        "bert/pooler/dense/kernel": np.array(backbone.pooled_dense.kernel, np.float64),
        "bert/pooler/dense/bias": np.array(backbone.pooled_dense.bias, np.float64),
    }
    for i, layer in enumerate(backbone.transformer_layers):
        w.update(layer_weights(layer, f"bert/encoder/layer_{i}"))
    return w
