"""Passages, questions and answer spans shared by the span-extraction tests.

Real news articles (Lee corpus, in the gensim wheel) when installed, plus hand-written
passages with accents, combining marks, CJK runs (where the answer's characters also
occur earlier in the same whitespace "word") and irregular whitespace (tabs, doubled
spaces, newlines, U+202F, U+00A0, a zero-width space).
"""

import os
import random

HAND_PASSAGES = [
    "Zürich  is\tthe largest city in Switzerland\u202fand the capital of the canton of Zürich. "
    "It is located in north-central Switzerland,\n\nat the north-western tip of Lake Zürich. "
    "As of January 2020, the municipality had 434,335 inhabitants (the urban area: 1.315 million).",
    "Crème brûlée (French: « burnt cream »), also known as burnt cream or Trinity cream, is a dessert "
    "consisting of a rich custard base topped with a layer of hardened caramelized sugar. It is "
    "normally served at room temperature.  Café-owners in Besanc\u0327on and Mâcon sold it for 4,50\u00a0€.",
    "北京是中华人民共和国的首都，也是全国政治、文化中心。北京位于华北平原北部，背靠燕山。 "
    "The city (北京市) had 21.9 million residents in 2020; its name means \u201cNorthern Capital\u201d.",
    "São Paulo\u200b is the most populous city in Brazil. Straße and Maß appear in German texts; "
    "ΟΔΟΣ and Ελληνικά in Greek ones; Москва in Russian. Tiếng Việt: Hà Nội, Đà Nẵng.\t\tThe end.",
    "The Japanese electronics industry is the largest in the world. The leader was John Smith "
    "(1895-1943). Smith's company, Smith & Smith Ltd., exported 3,000,000 radios a year.",
]


def lee_passages(count=12):
    """The first `count` articles of gensim's Lee background corpus, or [] without gensim."""
    try:
        import gensim
    except ImportError:
        return []
    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", "lee_background.cor")
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f if line.strip()][:count]


def _word_spans(context):
    spans, start = [], None
    for i, c in enumerate(context + " "):
        space = c in " \t\r\n\u202f"
        if not space and start is None:
            start = i
        elif space and start is not None:
            spans.append((start, i))
            start = None
    return spans


def make_examples(passages, per_passage=6, seed=0):
    """(questions, contexts, spans) with answers as exact character spans; one question
    per passage has no answer (span (-1, -1)). Questions are real text of another
    passage, some longer than 64 tokens."""
    rng = random.Random(seed)
    questions, contexts, spans = [], [], []
    for i, context in enumerate(passages):
        words = _word_spans(context)
        other = passages[(i + 1) % len(passages)].split()
        for j in range(per_passage):
            q_start = rng.randrange(len(other))
            questions.append(" ".join(other[q_start : q_start + rng.choice([3, 8, 20, 90])]) + "?")
            contexts.append(context)
            if j == 0:
                spans.append((-1, -1))
                continue
            first = rng.randrange(len(words))
            last = min(len(words) - 1, first + rng.choice([0, 0, 1, 3]))
            start, end = words[first][0], words[last][1]
            if j % 3 == 1 and end - start > 2:  # a character sub-span (mid-word edges)
                start += rng.randrange(0, min(3, end - start - 1))
                end -= rng.randrange(0, min(3, end - start - 1))
            spans.append((start, end))
    return questions, contexts, spans
