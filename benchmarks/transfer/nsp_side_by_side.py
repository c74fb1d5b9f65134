"""Is next-sentence prediction stuck because of our code, or because of the scale? HF's
`BertForPreTraining` side by side with ours: the identical initial weights, the identical
batches in the identical order, the same optimizer and schedule, and both scored on the same
held-out batches every `--eval-every` steps.

Ours trains with `BertPretrainer.compile()` (BertAdamW with bias correction, linear warm-up
then decay, gradients clipped to global norm 1.0). HF trains with `torch.optim.AdamW` (the same
β, ε 1e-6, decoupled decay 0.01 except LayerNorm and biases, bias correction), the same schedule
and `clip_grad_norm_(1.0)`. The initial weights go from ours to HF through
`save_hf_checkpoint` (so both start equal; the first evaluation checks it). Dropout is 0 in both
(their random masks could not be made equal).

    python benchmarks/transfer/nsp_side_by_side.py --vocabulary runs/demo/vocab.txt \\
        --train-files 'runs/demo/corpus/wikipedia/train-*.txt,runs/demo/corpus/reviews-train.txt' \\
        --eval-files 'runs/demo/corpus/wikipedia/heldout-*.txt' --output runs/nsp_side_by_side.json

Needs the `bench` extra (torch and transformers). Writes a JSON of both curves and prints a table.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--train-files", required=True, help="Comma-separated text files/globs (the demo's corpus).")
    p.add_argument("--eval-files", required=True, help="Held-out text files/globs.")
    p.add_argument("--vocabulary", required=True)
    p.add_argument("--output", required=True, help="JSON file of both curves.")
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-batches", type=int, default=16)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--sequence-length", type=int, default=64)
    p.add_argument("--max-predictions", type=int, default=26)
    p.add_argument("--masked-lm-prob", type=float, default=0.4)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--warmup-fraction", type=float, default=0.1)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def _batches(args, files, count, seed):
    import glob

    import numpy as np

    from keras_bert_zoo.data.pretraining import pretraining_dataset
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    tokenizer = BertTokenizer(args.vocabulary)
    paths = sorted(p for pattern in files.split(",") for p in glob.glob(pattern))
    ds = pretraining_dataset(paths, tokenizer, args.batch_size, sequence_length=args.sequence_length,
                             max_predictions=args.max_predictions, masked_lm_prob=args.masked_lm_prob, seed=seed)
    return [({k: np.array(v) for k, v in x.items()}, {k: np.array(v) for k, v in y.items()})
            for x, y in ds.take(count)]


def _schedule(args):
    warmup = int(args.warmup_fraction * args.steps)

    def rate(step):  # LinearWarmupLinearDecay's rule
        decayed = args.learning_rate * (1.0 - min(step, args.steps) / args.steps)
        return args.learning_rate * step / warmup if warmup and step < warmup else decayed

    return rate, warmup


def _accuracies(mlm_logits, nsp_logits, y):
    import numpy as np

    weights = y["mlm_weights"] > 0
    mlm = np.argmax(mlm_logits, -1)[weights] == y["mlm_ids"][weights]
    return float(mlm.mean()), float(np.mean(np.argmax(nsp_logits, -1) == y["nsp_labels"]))


class Ours:
    def __init__(self, args, vocabulary_size):
        import keras

        from keras_bert_zoo.models.bert_backbone import BertBackbone
        from keras_bert_zoo.models.bert_pretrainer import BertPretrainer

        keras.utils.set_random_seed(args.seed)
        backbone = BertBackbone(vocabulary_size, args.layers, args.heads, args.hidden, 4 * args.hidden,
                                dropout=0.0, max_sequence_length=args.sequence_length)
        self.model = BertPretrainer(backbone)
        _, warmup = _schedule(args)
        self.model.compile(learning_rate=args.learning_rate, warmup_steps=max(1, warmup), total_steps=args.steps)

    def step(self, x, y):
        return float(self.model.train_on_batch(x, y, return_dict=True)["loss"])

    def evaluate(self, batches):
        import numpy as np

        scores = [_accuracies(*(lambda o: (np.asarray(o["mlm_logits"]), np.asarray(o["nsp_logits"])))(
            self.model.predict_on_batch(x)), y) for x, y in batches]
        return tuple(float(np.mean(s)) for s in zip(*scores))


class HF:
    def __init__(self, args, directory):
        import torch
        from transformers import BertForPreTraining

        torch.manual_seed(args.seed)
        torch.set_num_threads(int(os.environ.get("TF_NUM_INTRAOP_THREADS", os.cpu_count() or 2)))
        self.torch = torch
        self.model = BertForPreTraining.from_pretrained(directory, attn_implementation="eager")
        self.model.train()
        decay, no_decay = [], []
        for name, parameter in self.model.named_parameters():
            (no_decay if ("LayerNorm" in name or name.endswith("bias")) else decay).append(parameter)
        self.optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                                            {"params": no_decay, "weight_decay": 0.0}],
                                           lr=args.learning_rate, betas=(0.9, 0.999), eps=1e-6)
        rate, _ = _schedule(args)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: rate(s) / args.learning_rate)

    def _inputs(self, x, y):
        torch = self.torch
        labels = torch.full(x["token_ids"].shape, -100, dtype=torch.long)
        for row in range(labels.shape[0]):
            real = y["mlm_weights"][row] > 0
            labels[row, torch.as_tensor(x["mask_positions"][row][real], dtype=torch.long)] = torch.as_tensor(
                y["mlm_ids"][row][real], dtype=torch.long)
        return dict(input_ids=torch.as_tensor(x["token_ids"], dtype=torch.long),
                    token_type_ids=torch.as_tensor(x["segment_ids"], dtype=torch.long),
                    attention_mask=torch.as_tensor(x["padding_mask"], dtype=torch.long),
                    labels=labels, next_sentence_label=torch.as_tensor(y["nsp_labels"], dtype=torch.long))

    def step(self, x, y):
        out = self.model(**self._inputs(x, y))
        self.optimizer.zero_grad()
        out.loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        return float(out.loss.detach())

    def evaluate(self, batches):
        import numpy as np

        scores = []
        self.model.eval()
        with self.torch.no_grad():
            for x, y in batches:
                out = self.model(**{k: v for k, v in self._inputs(x, y).items()
                                    if k not in ("labels", "next_sentence_label")})
                logits = out.prediction_logits.numpy()
                picked = np.take_along_axis(logits, x["mask_positions"][:, :, None], axis=1)
                scores.append(_accuracies(picked, out.seq_relationship_logits.numpy(), y))
        self.model.train()
        return tuple(float(np.mean(s)) for s in zip(*scores))


def run(args):
    import tempfile

    from keras_bert_zoo.serving.hf_checkpoint import save_hf_checkpoint
    from keras_bert_zoo.text.bert_tokenizer import BertTokenizer

    train = _batches(args, args.train_files, args.steps, args.seed)
    held_out = _batches(args, args.eval_files, args.eval_batches, args.seed + 1)
    if len(train) < args.steps:
        raise ValueError(f"--train-files yields {len(train)} batches, fewer than --steps={args.steps}.")
    ours = Ours(args, BertTokenizer(args.vocabulary).vocabulary_size())
    with tempfile.TemporaryDirectory() as directory:
        save_hf_checkpoint(ours.model, directory, vocabulary=args.vocabulary)
        hf = HF(args, directory)
    curves = {"ours": [], "hf": []}
    for name, side in (("ours", ours), ("hf", hf)):
        started = time.perf_counter()
        for step in range(args.steps + 1):
            if step % args.eval_every == 0:
                mlm, nsp = side.evaluate(held_out)
                curves[name].append({"step": step, "mlm_accuracy": mlm, "nsp_accuracy": nsp,
                                     "seconds": time.perf_counter() - started})
                print(f"{name} step {step}: held-out MLM {mlm:.4f}, NSP {nsp:.4f}", flush=True)
            if step < args.steps:
                loss = side.step(*train[step])
                if not step % args.eval_every:
                    print(f"{name} step {step}: loss {loss:.4f}", flush=True)
    majority = max(sum(int(v) for x, y in held_out for v in y["nsp_labels"]), 0)
    total = sum(len(y["nsp_labels"]) for _, y in held_out)
    result = {"args": vars(args), "curves": curves,
              "nsp_majority_accuracy": max(majority, total - majority) / total}
    with open(args.output, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    print(f"{'step':>6} {'ours MLM':>9} {'HF MLM':>7} {'ours NSP':>9} {'HF NSP':>7}")
    for a, b in zip(curves["ours"], curves["hf"]):
        print(f"{a['step']:>6} {a['mlm_accuracy']:>9.4f} {b['mlm_accuracy']:>7.4f} {a['nsp_accuracy']:>9.4f} "
              f"{b['nsp_accuracy']:>7.4f}")
    print(f"NSP majority class on the held-out batches: {result['nsp_majority_accuracy']:.4f}")
    return result


if __name__ == "__main__":
    run(parse_args())
