"""A straightforward pure-Python port of the original `create_pretraining_data.py`.

Single process, whole corpus in memory, one `random.Random(seed)` driving every draw,
tokenization with the pure-Python `FullTokenizer` (references/tokenizer.py),
`tf.train.Example` protos written with `tf.io.TFRecordWriter` — what the original does.
It is the baseline of `benchmarks/pretraining_data.py` and a statistical reference in
tests; the library's pipeline is `keras_bert_zoo.data.pretraining_writer`.

    python references/pretraining_data.py --input_file a.txt --output_file a.tfrecord \
        --vocab_file vocab.txt
"""

import argparse
import collections
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

Instance = collections.namedtuple("Instance", "tokens segment_ids masked_lm_positions masked_lm_labels is_random_next")


def read_documents(input_files, tokenizer, rng):
    """Tokenized documents (lists of non-empty segments), shuffled, empty ones dropped."""
    all_documents = [[]]
    for path in input_files:
        with open(path, encoding="utf-8", errors="ignore") as f:
            for line in f:
                line = line.strip()
                if not line:
                    all_documents.append([])
                tokens = tokenizer.tokenize(line)
                if tokens:
                    all_documents[-1].append(tokens)
    all_documents = [d for d in all_documents if d]
    rng.shuffle(all_documents)
    return all_documents


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc_tokens = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        if rng.random() < 0.5:
            del trunc_tokens[0]
        else:
            trunc_tokens.pop()


def create_masked_lm_predictions(tokens, masked_lm_prob, max_predictions, vocab_words, rng, whole_word=False):
    cand_indexes = []
    for i, token in enumerate(tokens):
        if token in ("[CLS]", "[SEP]"):
            continue
        if whole_word and cand_indexes and token.startswith("##"):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    rng.shuffle(cand_indexes)
    output_tokens = list(tokens)
    num_to_predict = min(max_predictions, max(1, int(round(len(tokens) * masked_lm_prob))))
    masked = []
    for index_set in cand_indexes:
        if len(masked) >= num_to_predict:
            break
        if len(masked) + len(index_set) > num_to_predict:
            continue
        for index in index_set:
            if rng.random() < 0.8:
                new = "[MASK]"
            elif rng.random() < 0.5:
                new = tokens[index]
            else:
                new = vocab_words[rng.randint(0, len(vocab_words) - 1)]
            output_tokens[index] = new
            masked.append((index, tokens[index]))
    masked.sort()
    return output_tokens, [i for i, _ in masked], [t for _, t in masked]


def _random_segment_b(all_documents, document_index, target_b_length, rng):
    for _ in range(10):
        random_document_index = rng.randint(0, len(all_documents) - 1)
        if random_document_index != document_index:
            break
    random_document = all_documents[random_document_index]
    tokens_b = []
    for j in range(rng.randint(0, len(random_document) - 1), len(random_document)):
        tokens_b.extend(random_document[j])
        if len(tokens_b) >= target_b_length:
            break
    return tokens_b


def create_instances_from_document(all_documents, document_index, opts, vocab_words, rng):
    document = all_documents[document_index]
    max_num_tokens = opts.max_seq_length - 3
    target_seq_length = max_num_tokens
    if rng.random() < opts.short_seq_prob:
        target_seq_length = rng.randint(2, max_num_tokens)
    instances, current_chunk, current_length, i = [], [], 0, 0
    while i < len(document):
        current_chunk.append(document[i])
        current_length += len(document[i])
        if i == len(document) - 1 or current_length >= target_seq_length:
            a_end = rng.randint(1, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
            tokens_a = [t for seg in current_chunk[:a_end] for t in seg]
            if len(current_chunk) == 1 or rng.random() < 0.5:
                is_random_next = True
                tokens_b = _random_segment_b(all_documents, document_index, target_seq_length - len(tokens_a), rng)
                i -= len(current_chunk) - a_end
            else:
                is_random_next = False
                tokens_b = [t for seg in current_chunk[a_end:] for t in seg]
            truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            tokens = ["[CLS]"] + tokens_a + ["[SEP]"] + tokens_b + ["[SEP]"]
            segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
            tokens, positions, labels = create_masked_lm_predictions(
                tokens, opts.masked_lm_prob, opts.max_predictions_per_seq, vocab_words, rng, opts.do_whole_word_mask
            )
            instances.append(Instance(tokens, segment_ids, positions, labels, is_random_next))
            current_chunk, current_length = [], 0
        i += 1
    return instances


def create_training_instances(input_files, tokenizer, opts):
    rng = random.Random(opts.random_seed)
    all_documents = read_documents(input_files, tokenizer, rng)
    vocab_words = list(tokenizer.vocab.keys())
    instances = []
    for _ in range(opts.dupe_factor):
        for document_index in range(len(all_documents)):
            instances.extend(create_instances_from_document(all_documents, document_index, opts, vocab_words, rng))
    rng.shuffle(instances)
    return instances


def write_instances(instances, tokenizer, opts, output_file):
    import tensorflow as tf

    def ints(values):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=list(values)))

    s, p = opts.max_seq_length, opts.max_predictions_per_seq
    with tf.io.TFRecordWriter(output_file) as writer:
        for inst in instances:
            ids = tokenizer.convert_tokens_to_ids(inst.tokens)
            n, m = len(ids), len(inst.masked_lm_positions)
            features = collections.OrderedDict()
            features["input_ids"] = ints(ids + [0] * (s - n))
            features["input_mask"] = ints([1] * n + [0] * (s - n))
            features["segment_ids"] = ints(inst.segment_ids + [0] * (s - n))
            features["masked_lm_positions"] = ints(inst.masked_lm_positions + [0] * (p - m))
            features["masked_lm_ids"] = ints(tokenizer.convert_tokens_to_ids(inst.masked_lm_labels) + [0] * (p - m))
            features["masked_lm_weights"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=[1.0] * m + [0.0] * (p - m))
            )
            features["next_sentence_labels"] = ints([1 if inst.is_random_next else 0])
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())
    return len(instances)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input_file", required=True)
    parser.add_argument("--output_file", required=True)
    parser.add_argument("--vocab_file", required=True)
    parser.add_argument("--do_lower_case", type=lambda s: s.lower() in ("1", "true", "yes"), default=True)
    parser.add_argument("--do_whole_word_mask", action="store_true")
    parser.add_argument("--max_seq_length", type=int, default=128)
    parser.add_argument("--max_predictions_per_seq", type=int, default=20)
    parser.add_argument("--random_seed", type=int, default=12345)
    parser.add_argument("--dupe_factor", type=int, default=10)
    parser.add_argument("--masked_lm_prob", type=float, default=0.15)
    parser.add_argument("--short_seq_prob", type=float, default=0.1)
    return parser.parse_args(argv)


def main(argv=None):
    import glob

    from references.tokenizer import FullTokenizer

    opts = parse_args(argv)
    files = sorted(f for pattern in opts.input_file.split(",") for f in glob.glob(pattern))
    tokenizer = FullTokenizer(opts.vocab_file, do_lower_case=opts.do_lower_case)
    instances = create_training_instances(files, tokenizer, opts)
    n = write_instances(instances, tokenizer, opts, opts.output_file)
    print(f"Wrote {n} instances to {opts.output_file}")


if __name__ == "__main__":
    main()
