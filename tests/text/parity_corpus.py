"""A varied corpus (300+ strings) for id-for-id parity with the original tokenizer, and a
vocabulary built from it that exercises whole words, sub-words and [UNK]."""

import unicodedata

from references.tokenizer import CJK_RANGES, BasicTokenizer

ENGLISH = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "I can't believe it's not butter; they'd've known.",
    "Don't stop -- won't stop!!! (Really?)",
    "Visit https://www.example.com/path?q=1&r=two#frag for more.",
    "Email me at first.last+tag@example.co.uk, or call +1 (555) 123-4567.",
    "It costs $3.50, i.e. 3,500 cents or 50% off — a bargain.",
    "Pi is 3.14159; e is 2.71828... roughly.",
    "The year 1999 vs. 2024: 25 years later.",
    "She said, \"Yes!\" and he said, 'No.'",
    "Mr. O'Neil's dog-eared copy of 'Ulysses' (1922) is worth ~$10,000.",
    "C++ and C# are languages; so is F*.",
    "Use `git commit -m \"msg\"` then `git push`.",
    "A/B testing: 10/20/30 and 1:2:3 ratios.",
    "Snake_case, camelCase and kebab-case-names.",
    "#hashtag @mention ^caret |pipe| {brace} [bracket] <angle>",
    "Question? Answer! Interjection... Ellipsis…",
    "UPPER lower MiXeD CaSe",
    "Self-driving cars won't be here until 2030, they say.",
    "The U.S.A. and the U.K. signed the treaty in Washington, D.C.",
    "rock 'n' roll isn't dead",
    "Wait—what? That's–uh–interesting.",
    "Temperatures ranged from -40°C to +45°C.",
    "He scored 9/10 (90%) on the test; she scored 10/10.",
    "unaffable unbelievable undeniably understandable",
    "tokenization tokenizer tokens tokenize tokenized",
    "The \"quoted\" word and the 'single' one.",
    "file.txt, archive.tar.gz and image.PNG",
    "Section 3.2.1, paragraph (b)(ii).",
    "x = y + z * 2 - 1 / 3 % 4 ^ 5",
    "Ünïcödé in English text: naïve café résumé coöperate",
    "[MASK]",
    "[CLS] hello [SEP] world [SEP]",
    "[UNK] [PAD] [unused0]",
    "the [MASK] sat on the mat",
    "<s> </s> <pad> ##ing ## #",
    "   leading and trailing spaces   ",
    "multiple     internal     spaces",
    "tabs\tand\nnewlines\r\nand\rreturns",
    "",
    " ",
    "\t\n\r",
    "\u3000\u00a0\u2003",
    "The film, released in 2019, grossed $1.2 billion worldwide.",
    "According to the report (p. 17), growth slowed to 2.3% in Q4.",
    "Photosynthesis converts light energy into chemical energy.",
    "He'll be there at 5 p.m.; she'll arrive at 6:30.",
    "Its population was 8,336,817 at the 2020 census.",
    "The Eiffel Tower is 330 metres (1,083 ft) tall.",
    "WWII ended in 1945; the UN was founded that year.",
    "Y'all ain't seen nothin' yet!",
    "e.g., etc., vs., cf., et al.",
    "ftp://files.example.org/pub/README.md and mailto:x@y.z",
    "www.wikipedia.org/wiki/BERT_(language_model)",
    "10^6 = 1,000,000 and 2**10 == 1024",
    "Hyphenated-words, en–dashes and em—dashes.",
    "Newline-separated\nlines\nof\ntext",
    "COVID-19 vaccines were approved in December 2020.",
    "Machine-learning models (e.g. BERT-Large) have 340M parameters.",
    "A sentence with trailing whitespace.\t \n",
    "JSON: {\"key\": [1, 2, 3], \"ok\": true}",
    "Path C:\\Users\\name\\file.txt on Windows",
    "Ratio 16:9; time 23:59:59; score 3-2.",
]
WORLD = [
    "Ça va? Où êtes-vous? Très bien, merci!",
    "Straße, Maß, Fußball; STRASSE and ẞ",
    "Ångström, Øresund, Æsir, œuvre",
    "Zürich, München, Köln, Düsseldorf",
    "São Paulo, Brasília, Açores",
    "Crème brûlée à la française",
    "Łódź, Kraków, Gdańsk, Wrocław",
    "İstanbul, Iğdır, ılık; Diyarbakır",
    "Tiếng Việt có dấu: Hà Nội, Đà Nẵng",
    "ΟΔΟΣ ΣΟΦΟΣ. Ελληνικά: Αθήνα, Θεσσαλονίκη",
    "σοφός ΣΟΦΟΣ Σ ΣΣ ΑΣ.",
    "Русский язык: Москва, Санкт-Петербург, ЁЛКА ёлка",
    "Українська: Київ, Львів; Ґанок",
    "العربية: مرحبا بالعالم! كيف حالك؟",
    "مَرْحَبًا بِكُمْ",
    "हिन्दी: नमस्ते दुनिया। भारत",
    "עברית: שָׁלוֹם עוֹלָם",
    "ไทย: สวัสดีครับ",
    "한국어: 안녕하세요 세계",
    "日本語: こんにちは世界。カタカナ、ひらがな",
    "中文：你好，世界！我爱北京天安门。",
    "Ꭰ Ꭱ Cherokee ꭰ",
    "ǅungla ǄUNGLA ǆungla",
    "Ｆｕｌｌ－ｗｉｄｔｈ　ＡＢＣ　１２３！",
    "ﬁne ﬂow ﬀ ﬃ ﬄ ﬅ ﬆ ﬓ",
    "´acute ` grave ¨ diaeresis ˆ",
    "…ellipsis… ‥ two-dot",
    "e\u0301 a\u0308 o\u0302\u0323 n\u0303",
    "combining alone: \u0301\u0308 x\u20dd",
    "Å Å Ω Ω K K",
    "№ ℃ ™ ® © ℡ ℗",
    "½ ¼ ¾ ² ³ ⁴ ₁",
    "ℌ𝔢𝔩𝔩𝔬 𝐁𝐨𝐥𝐝 𝓢𝓬𝓻𝓲𝓹𝓽",
    "Ⓐⓑⓒ ⑴ ⒜",
    "«guillemets» „Anführung“ ‚einfach‘ ‹single›",
    "¿Qué? ¡Olé! ؟ ، ۔",
    "Math: ∑ ∫ √ ∞ ≠ ≤ ≥ ± × ÷ → ⇒",
    "Currency: € £ ¥ ₹ ₿ ¢ ₩",
    "Box ─│┌┐ and blocks ░▒▓█",
    "Private \ue000\uf8ff use; unassigned \u0378 \U000e0080",
]
EMOJI = [
    "I ❤️ NY 😀😃😄",
    "family 👨‍👩‍👧‍👦 emoji",
    "flags 🇺🇸🇬🇧🇯🇵",
    "skin 👍🏽👍🏿 tones",
    "keycap 1️⃣ #️⃣",
    "👩🏽‍💻 coder 🏳️‍🌈 flag",
    "text😀glued😀emoji",
    "🤷‍♀️🤦‍♂️",
]
CONTROL_CODEPOINTS = (
    list(range(0x00, 0x20))
    + list(range(0x7F, 0xA0))
    + [0xAD, 0x600, 0x61C, 0x6DD, 0x70F, 0x180E, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F]
    + list(range(0x202A, 0x202F))
    + list(range(0x2060, 0x2065))
    + [0x2066, 0x2069, 0xFEFF, 0xFFF9, 0xFFFA, 0xFFFB, 0xFFFD, 0x110BD, 0x1D173, 0xE0001, 0xE0020, 0xE007F]
    + [0x00A0, 0x1680, 0x2000, 0x2005, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000]
)


def _cjk_strings():
    out = []
    for lo, hi in CJK_RANGES:
        out.append("".join(chr(c) for c in (lo, lo + 1, hi - 1, hi)))
        out.append(f"a{chr(lo - 1)}b{chr(hi + 1)}c")  # just outside the range: not split
        out.append(f"x{chr(lo)}y{chr(hi)}z")
    return out


def _control_strings():
    return [f"ab{chr(cp)}cd ef{chr(cp)}" for cp in CONTROL_CODEPOINTS]


def _long_words():
    out = []
    for n in (99, 100, 101, 150, 199, 200, 201, 250, 300):
        out.append("the " + "a" * n + " end")
        out.append("ab" * (n // 2) + "a" * (n % 2))
    out += ["é" * 150, "é" * 201, "ж" * 200, "ж" * 201, "𝐀" * 200, "𝐀" * 201, "e\u0301" * 150]
    out += ["x" + "\u0301" * 250, "word," + "z" * 205 + ",word", "中" * 300]
    return out


def parity_corpus():
    """Returns the list of 300+ test strings."""
    corpus = ENGLISH + WORLD + EMOJI + _cjk_strings() + _control_strings() + _long_words()
    # Every printable ASCII symbol alone and glued between letters.
    corpus += [f"a{chr(c)}b" for c in range(33, 127) if not chr(c).isalnum()]
    return corpus


def build_vocabulary(corpus, seed_words=1000):
    """Specials, every character alone and as `##x`, every second word, 3-char prefixes
    and 2-char suffixes: enough for whole words, sub-words and [UNK] (characters seen
    only in odd positions of skipped words are left out on purpose)."""
    tokens = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words = []
    for lower in (True, False):
        basic = BasicTokenizer(do_lower_case=lower)
        for text in corpus:
            words.extend(basic.tokenize(text))
    chars = sorted({c for w in words for c in w})
    # Leave a few characters out so some words have no cover and become [UNK].
    dropped = set(chars[7::11])
    pieces = []
    for c in chars:
        if c not in dropped:
            pieces += [c, "##" + c]
    for i, w in enumerate(dict.fromkeys(words)):
        if i % 2 == 0:
            pieces.append(w)
        if len(w) > 3:
            pieces += [w[:3], "##" + w[-2:]]
    for p in pieces:
        # tensorflow-text's WordPiece op refuses tokens over 256 bytes (see BertTokenizer).
        if len(p.encode("utf-8")) > 256:
            continue
        if p not in tokens and unicodedata.normalize("NFC", p).strip():
            tokens.append(p)
    return tokens
