"""The WordPiece vocabulary of an HF `tokenizer.json`, for folders that have no `vocab.txt`.

transformers 5 saves a BERT tokenizer as `tokenizer.json` and `tokenizer_config.json` only (4.x
also wrote `vocab.txt`), so a model fine-tuned and saved with it has no `vocab.txt` for our
tokenizer. Its `tokenizer.json` holds the same vocabulary (`model.vocab`: token → id, model type
`WordPiece`) and the casing (`normalizer.lowercase`, `strip_accents`). The tokens are written, in
id order, as a `vocab.txt` in our cache (keyed by the file's sha256; the user's folder is left
as it is) and that file is the folder's vocabulary from then on.
"""

import logging
import os

from keras_bert_zoo.presets import download
from keras_bert_zoo.utils import files

logger = logging.getLogger(__name__)

TOKENIZER_FILE = "tokenizer.json"


def wordpiece_tokens(path):
    """The tokens of an HF `tokenizer.json`'s WordPiece model, in id order.

    Raises:
        ValueError: not a WordPiece model, or ids that are not 0..n-1 each once, naming the file.
    """
    model = files.read_json(path).get("model") or {}
    if model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        raise ValueError(
            f"{path}: its model is {model.get('type')!r}, not a WordPiece vocabulary, and the folder has no "
            "vocab.txt. BERT checkpoints use WordPiece: give the folder its vocab.txt."
        )
    by_id = {}
    for token, index in model["vocab"].items():
        if not isinstance(index, int) or index in by_id:
            raise ValueError(f"{path}: the id of {token!r} ({index!r}) is not an integer or is taken twice.")
        by_id[index] = token
    if sorted(by_id) != list(range(len(by_id))):
        missing = next(i for i in range(len(by_id)) if i not in by_id)
        raise ValueError(f"{path}: no token has id {missing}; a vocabulary's ids run 0..{len(by_id) - 1}.")
    if any("\n" in token or "\r" in token for token in by_id.values()):
        raise ValueError(f"{path}: a token holds a line break, which a vocab.txt cannot hold.")
    return [by_id[i] for i in range(len(by_id))]


def stated_casing(lowercase, strip_accents):
    """`{"lowercase", "strip_accents"}` as booleans, each only where stated (not None)."""
    pairs = (("lowercase", lowercase), ("strip_accents", strip_accents))
    return {key: bool(value) for key, value in pairs if value is not None}


def casing(path):
    """The casing `tokenizer.json`'s BERT normalizer states (`stated_casing`)."""
    normalizer = files.read_json(path).get("normalizer") or {}
    return stated_casing(normalizer.get("lowercase"), normalizer.get("strip_accents"))


def vocabulary_from_tokenizer_json(directory):
    """The path of a `vocab.txt` holding `directory/tokenizer.json`'s vocabulary, or None without
    that file. Written once into the cache; the folder itself is not written to."""
    path = os.path.join(directory, TOKENIZER_FILE)
    if not os.path.isfile(path):
        return None
    digest = files.sha256_file(path)
    target = os.path.join(download.cache_dir(), "vocabularies", digest[:32], "vocab.txt")
    if not os.path.isfile(target):
        tokens = wordpiece_tokens(path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        files.atomic_write_text(target, "".join(token + "\n" for token in tokens))
        logger.info("%s has no vocab.txt: its tokenizer.json's %d WordPiece tokens are used (written to %s).",
                    directory, len(tokens), target)
    return target
