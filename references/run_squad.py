"""Pure-Python port of the original `run_squad.py` feature conversion and decoding (test oracle).

Ported from google-research/bert `run_squad.py`: `read_squad_examples` (whitespace
words, character -> word map), `convert_examples_to_features` (question truncation,
doc-stride windows, labels), `_improve_answer_span`, `_check_is_max_context`, and the
span choice of `write_predictions` (n-best start/end indexes, validity rules, the v2.0
null score). Deliberately slow and obvious; the in-graph
`SpanExtractorPreprocessor`/`SpanDecoder` are compared against it.
"""

import dataclasses


def _is_squad_whitespace(c):
    return c in (" ", "\t", "\r", "\n") or ord(c) == 0x202F


def whitespace_words(context):
    """The reader's `doc_tokens` and `char_to_word_offset`."""
    words, char_to_word = [], []
    previous_space = True
    for c in context:
        if _is_squad_whitespace(c):
            previous_space = True
        else:
            if previous_space:
                words.append(c)
            else:
                words[-1] += c
            previous_space = False
        char_to_word.append(len(words) - 1)
    return words, char_to_word


@dataclasses.dataclass
class Feature:
    example_index: int
    doc_span_index: int
    tokens: list
    token_to_orig_map: dict
    token_is_max_context: dict
    input_ids: list
    input_mask: list
    segment_ids: list
    start_position: int = None
    end_position: int = None


def improve_answer_span(doc_tokens, start, end, tokenizer, answer_text):
    """The first sub-span of [start, end] whose tokens join to the answer's tokens."""
    target = " ".join(tokenizer.tokenize(answer_text))
    for new_start in range(start, end + 1):
        for new_end in range(end, new_start - 1, -1):
            if " ".join(doc_tokens[new_start : new_end + 1]) == target:
                return new_start, new_end
    return start, end


def check_is_max_context(doc_spans, span_index, position):
    """Whether `span_index` is the best window (max of min(left, right) + 0.01 len)."""
    best_score, best_index = None, None
    for index, (start, length) in enumerate(doc_spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return span_index == best_index


def convert_example(example_index, question, context, answer, tokenizer, max_seq_length, doc_stride,
                    max_query_length, is_training):
    """Features of one example. `answer`: (answer_start, text), or None for no answer."""
    words, char_to_word = whitespace_words(context)
    query_tokens = tokenizer.tokenize(question)[:max_query_length]
    tok_to_orig, orig_to_tok, doc_tokens = [], [], []
    for i, word in enumerate(words):
        orig_to_tok.append(len(doc_tokens))
        for sub in tokenizer.tokenize(word):
            tok_to_orig.append(i)
            doc_tokens.append(sub)
    tok_start = tok_end = None
    if is_training and answer is None:
        tok_start = tok_end = -1
    if is_training and answer is not None:
        answer_start, text = answer
        start_word = char_to_word[answer_start]
        end_word = char_to_word[answer_start + len(text) - 1]
        tok_start = orig_to_tok[start_word]
        tok_end = orig_to_tok[end_word + 1] - 1 if end_word < len(words) - 1 else len(doc_tokens) - 1
        tok_start, tok_end = improve_answer_span(doc_tokens, tok_start, tok_end, tokenizer, text)
    max_doc = max_seq_length - len(query_tokens) - 3
    spans = []
    offset = 0
    while offset < len(doc_tokens):
        length = min(len(doc_tokens) - offset, max_doc)
        spans.append((offset, length))
        if offset + length == len(doc_tokens):
            break
        offset += min(length, doc_stride)
    features = []
    for span_index, (span_start, span_length) in enumerate(spans):
        tokens = ["[CLS]"] + query_tokens + ["[SEP]"]
        segment_ids = [0] * len(tokens)
        to_orig, is_max = {}, {}
        for i in range(span_length):
            split = span_start + i
            to_orig[len(tokens)] = tok_to_orig[split]
            is_max[len(tokens)] = check_is_max_context(spans, span_index, split)
            tokens.append(doc_tokens[split])
            segment_ids.append(1)
        tokens.append("[SEP]")
        segment_ids.append(1)
        input_ids = tokenizer.convert_tokens_to_ids(tokens)
        mask = [1] * len(input_ids)
        pad = max_seq_length - len(input_ids)
        feature = Feature(example_index, span_index, tokens, to_orig, is_max, input_ids + [0] * pad,
                          mask + [0] * pad, segment_ids + [0] * pad)
        if is_training:
            inside = answer is not None and span_start <= tok_start and tok_end <= span_start + span_length - 1
            if inside:
                shift = len(query_tokens) + 2 - span_start
                feature.start_position, feature.end_position = tok_start + shift, tok_end + shift
            else:
                feature.start_position = feature.end_position = 0
        features.append(feature)
    return features


def best_indexes(logits, n_best_size):
    """Indexes of the n largest logits (stable: lower index first on ties)."""
    order = sorted(range(len(logits)), key=lambda i: logits[i], reverse=True)
    return order[:n_best_size]


def best_span(features, start_logits, end_logits, n_best_size=20, max_answer_length=30):
    """The original's best non-null (feature, start, end, score) and the null score.

    Returns:
        (best, null_score): best is None when no span is valid.
    """
    candidates = []
    null_score = None
    for f, (feature, starts, ends) in enumerate(zip(features, start_logits, end_logits)):
        null = starts[0] + ends[0]
        if null_score is None or null < null_score:
            null_score = null
        for s in best_indexes(starts, n_best_size):
            for e in best_indexes(ends, n_best_size):
                if s >= len(feature.tokens) or e >= len(feature.tokens):
                    continue
                if s not in feature.token_to_orig_map or e not in feature.token_to_orig_map:
                    continue
                if not feature.token_is_max_context.get(s, False):
                    continue
                if e < s or e - s + 1 > max_answer_length:
                    continue
                candidates.append((f, s, e, starts[s] + ends[e]))
    # Python's sort is stable, so ties keep the (feature, start rank, end rank) order.
    candidates.sort(key=lambda c: c[3], reverse=True)
    return (candidates[0] if candidates else None), null_score
