"""Pure-Python re-implementation of the original BERT tokenizer (the test oracle).

Written from ../shared/REFERENCE.md (Tokenization): `BasicTokenizer` (clean text, split
CJK ideographs, whitespace split, lower-case + NFD + drop Mn, split punctuation) followed
by `WordpieceTokenizer` (greedy longest match, `##` continuations, words over 200
characters -> `[UNK]`). Deliberately slow and obvious; it is the reference the in-graph
`keras_bert_zoo.text.BertTokenizer` is compared against, id for id.
"""

import unicodedata

CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def load_vocab_list(vocab_file_or_list):
    """A vocab.txt path (one token per line, stripped) or a list of tokens -> list."""
    if isinstance(vocab_file_or_list, (list, tuple)):
        return list(vocab_file_or_list)
    with open(vocab_file_or_list, encoding="utf-8") as f:
        return [line.strip() for line in f]


def is_whitespace(char):
    if char in (" ", "\t", "\n", "\r"):
        return True
    return unicodedata.category(char) == "Zs"


def is_control(char):
    if char in ("\t", "\n", "\r"):
        return False
    return unicodedata.category(char) in ("Cc", "Cf")


def is_punctuation(char):
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def is_cjk(cp):
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


class BasicTokenizer:
    """Cleaning, CJK splitting, lower-casing/accent stripping, punctuation splitting."""

    def __init__(self, do_lower_case=True, strip_accents=None):
        self.do_lower_case = do_lower_case
        self.strip_accents = do_lower_case if strip_accents is None else strip_accents

    def tokenize(self, text):
        text = self._clean_text(text)
        text = "".join(f" {c} " if is_cjk(ord(c)) else c for c in text)
        tokens = []
        for token in text.strip().split():
            if self.do_lower_case:
                token = token.lower()
            if self.strip_accents:
                token = "".join(
                    c for c in unicodedata.normalize("NFD", token) if unicodedata.category(c) != "Mn"
                )
            tokens.extend(self._split_on_punc(token))
        return " ".join(tokens).strip().split()

    @staticmethod
    def _clean_text(text):
        out = []
        for char in text:
            cp = ord(char)
            if cp == 0 or cp == 0xFFFD or is_control(char):
                continue
            out.append(" " if is_whitespace(char) else char)
        return "".join(out)

    @staticmethod
    def _split_on_punc(token):
        pieces, start_new = [], True
        for char in token:
            if is_punctuation(char):
                pieces.append([char])
                start_new = True
            else:
                if start_new:
                    pieces.append([])
                start_new = False
                pieces[-1].append(char)
        return ["".join(p) for p in pieces]


class WordpieceTokenizer:
    """Greedy longest-match-first WordPiece."""

    def __init__(self, vocab, unk_token="[UNK]", max_input_chars_per_word=200):
        self.vocab = vocab
        self.unk_token = unk_token
        self.max_input_chars_per_word = max_input_chars_per_word

    def tokenize(self, text):
        output = []
        for token in text.strip().split():
            chars = list(token)
            if len(chars) > self.max_input_chars_per_word:
                output.append(self.unk_token)
                continue
            start, pieces = 0, []
            while start < len(chars):
                end, current = len(chars), None
                while start < end:
                    piece = "".join(chars[start:end])
                    if start > 0:
                        piece = "##" + piece
                    if piece in self.vocab:
                        current = piece
                        break
                    end -= 1
                if current is None:
                    pieces = None
                    break
                pieces.append(current)
                start = end
            output.extend([self.unk_token] if pieces is None else pieces)
        return output


class FullTokenizer:
    """BasicTokenizer + WordpieceTokenizer over a vocabulary file or token list.

    Args:
        vocab_file_or_list: path to vocab.txt or a list of tokens (id = index).
        do_lower_case: lower-case and strip accents, as the original.
        strip_accents: override accent stripping (None: follow `do_lower_case`).
    """

    def __init__(self, vocab_file_or_list, do_lower_case=True, strip_accents=None):
        tokens = load_vocab_list(vocab_file_or_list)
        self.vocab = {}
        for index, token in enumerate(tokens):
            self.vocab[token] = index
        self.inv_vocab = {v: k for k, v in self.vocab.items()}
        self.basic_tokenizer = BasicTokenizer(do_lower_case, strip_accents)
        self.wordpiece_tokenizer = WordpieceTokenizer(self.vocab)

    def tokenize(self, text):
        return [
            piece
            for token in self.basic_tokenizer.tokenize(text)
            for piece in self.wordpiece_tokenizer.tokenize(token)
        ]

    def convert_tokens_to_ids(self, tokens):
        return [self.vocab[t] for t in tokens]

    def convert_ids_to_tokens(self, ids):
        return [self.inv_vocab[i] for i in ids]
