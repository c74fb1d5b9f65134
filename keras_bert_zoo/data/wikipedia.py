"""MediaWiki XML dump → the original BERT input format (one sentence per line,
a blank line between articles), streaming, in bounded memory and in parallel.

As the paper did for Wikipedia, only text passages are kept: lists, tables,
headers, captions and the trailing reference sections are dropped. The markup is
removed by gensim's `filter_wiki` (the well-kept filter behind `WikiCorpus`);
pages are streamed by gensim's `extract_pages`.
"""

import bz2
import collections
import multiprocessing
import os
import re
import zlib

import gensim
from gensim.corpora.wikicorpus import extract_pages, filter_wiki
from tqdm.auto import tqdm

from keras_bert_zoo.data.sentences import split_sentences  # noqa: F401  (part of this module's API)

SAMPLE_DUMP = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"

# Sections after which an article holds no more prose worth keeping.
_TAIL_SECTIONS = frozenset(
    ["references", "external links", "see also", "further reading", "notes",
     "bibliography", "sources", "footnotes", "citations", "notes and references"]
)
_HEADER = re.compile(r"^\s*(=+)\s*(.*?)\s*\1\s*$")
# List items, indents, definitions, tables and leftover template/markup lines.
_NON_PROSE_START = ("*", "#", ":", ";", "|", "!", "{", "}", "<", "[")
_EMPHASIS = re.compile(r"'{2,}")
_SPACES = re.compile(r"[ \t\u00a0]+")
# Empty brackets left where templates were removed: "born (; 1920)" → "born (1920)".
_EMPTY_PARENS = re.compile(r"\(\s*[,;]?\s*\)")
_LEADING_PUNCT_IN_PARENS = re.compile(r"\(\s*[,;]\s*")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?])")
_TERMINAL = (".", "!", "?", '."', ".'", "!\"", "?\"", ".)")

def sample_dump_path():
    """Returns the path of the real English Wikipedia sample dump inside gensim.

    Returns:
        str. Path of the `.xml.bz2` sample (106 articles, ~1.7 MB compressed) that
        ships in the gensim wheel, located through the installed package.

    Raises:
        FileNotFoundError: the installed gensim does not carry its test data.
    """
    path = os.path.join(os.path.dirname(gensim.__file__), "test", "test_data", SAMPLE_DUMP)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"The Wikipedia sample dump was not found at {path}. Reinstall gensim from its "
            "wheel (`pip install --force-reinstall 'gensim>=4.3'`) or pass your own dump."
        )
    return path


def article_paragraphs(wikitext, min_words=8):
    """Returns the prose paragraphs of one article's wiki markup.

    Args:
        wikitext: str. The raw MediaWiki markup of one page.
        min_words: int. Lines with fewer words (captions, stubs) are dropped.
            Defaults to 8.

    Returns:
        list of str. Plain-text paragraphs that end like a sentence; headers, lists,
        tables and everything from "References"/"External links"/... on are dropped.
    """
    if wikitext.lstrip()[:9].lower() == "#redirect":
        return []
    paragraphs = []
    for line in filter_wiki(_drop_tables(wikitext)).split("\n"):
        header = _HEADER.match(line)
        if header:
            if header.group(2).strip().lower() in _TAIL_SECTIONS:
                break
            continue
        line = line.strip()
        if not line or line.startswith(_NON_PROSE_START):
            continue
        line = _clean_line(line)
        if len(line.split()) >= min_words and line.endswith(_TERMINAL):
            paragraphs.append(line)
    return paragraphs


def _drop_tables(wikitext):
    # filter_wiki turns table cells into plain lines; the paper drops tables, so
    # remove `{| ... |}` blocks (nested ones too) before filtering.
    kept, depth = [], 0
    for line in wikitext.split("\n"):
        stripped = line.lstrip()
        if stripped.startswith("{|"):
            depth += 1
        elif depth and stripped.startswith("|}"):
            depth -= 1
        elif not depth:
            kept.append(line)
    return "\n".join(kept)


def _clean_line(line):
    line = _EMPHASIS.sub("", line)
    line = _EMPTY_PARENS.sub("", line)
    line = _LEADING_PUNCT_IN_PARENS.sub("(", line)
    line = _SPACES.sub(" ", line)
    return _SPACE_BEFORE_PUNCT.sub(r"\1", line).strip()


def article_sentences(wikitext, min_words=8):
    """Returns one article as a list of sentences (the original input format).

    Args:
        wikitext: str. The raw MediaWiki markup of one page.
        min_words: int. See `article_paragraphs`. Defaults to 8.

    Returns:
        list of str. Sentences in order; empty for redirects and markup-only pages.
    """
    sentences = []
    for paragraph in article_paragraphs(wikitext, min_words=min_words):
        sentences.extend(split_sentences(paragraph))
    return sentences


def _process_chunk(chunk):
    # Runs in a worker: [(title, wikitext)] → [(title, [sentence, ...])].
    return [(title, article_sentences(text)) for title, text in chunk]


def is_heldout(title, heldout_fraction):
    """Deterministic held-out assignment of an article by a hash of its title."""
    return zlib.crc32(title.encode("utf-8")) % 10_000 < round(heldout_fraction * 10_000)


class _CountingReader:
    """A binary file wrapper that reports bytes read (the progress of a stream)."""

    def __init__(self, f, on_read):
        self._f, self._on_read = f, on_read

    def read(self, size=-1):
        data = self._f.read(size)
        self._on_read(len(data))
        return data


def iter_pages(path, progress=None):
    """Streams `(title, wikitext)` of the main-namespace pages of a dump.

    Args:
        path: str. A MediaWiki XML dump, `.xml` or `.xml.bz2`.
        progress: optional callable(int). Called with the compressed bytes read.

    Yields:
        tuple of (str, str). Title and raw markup, one page at a time (the parsed
        element is cleared, so memory stays bounded on a full dump).
    """
    if not os.path.isfile(path):
        raise ValueError(
            f"`input_path` must be a MediaWiki XML dump (.xml or .xml.bz2). Received: "
            f"input_path={path!r}, which is not a file."
        )
    with open(path, "rb") as raw:
        source = _CountingReader(raw, progress) if progress else raw
        stream = bz2.open(source, "rb") if path.endswith(".bz2") else source
        for title, text, _ in extract_pages(stream, filter_namespaces=("0",)):
            yield title or "", text or ""


class _ShardWriter:
    """Writes articles to `<prefix>-NNNNN.txt` shards; each shard appears atomically."""

    def __init__(self, output_dir, prefix, shard_bytes):
        self.output_dir, self.prefix, self.shard_bytes = output_dir, prefix, shard_bytes
        self.files, self._f, self._size = [], None, 0

    def write(self, sentences):
        if self._f is None:
            self._path = os.path.join(self.output_dir, f"{self.prefix}-{len(self.files):05d}.txt")
            self._f = open(self._path + ".tmp", "w", encoding="utf-8")
            self._size = 0
        text = "\n".join(sentences) + "\n\n"
        self._f.write(text)
        self._size += len(text)
        if self._size >= self.shard_bytes:
            self.close()

    def close(self):
        if self._f is not None:
            self._f.close()
            os.replace(self._path + ".tmp", self._path)
            self.files.append(self._path)
            self._f = None


def _chunks(pages, chunk_size, max_articles):
    chunk, count = [], 0
    for title, text in pages:
        if max_articles is not None and count >= max_articles:
            break
        if text.lstrip()[:9].lower() == "#redirect":
            continue
        chunk.append((title, text))
        count += 1
        if len(chunk) == chunk_size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _processed_chunks(chunks, num_workers):
    """Maps `_process_chunk` over `chunks` in order, with at most 2×workers in flight."""
    if num_workers <= 1:
        yield from map(_process_chunk, chunks)
        return
    # fork: workers need only re/gensim, and spawn would re-import TensorFlow in each.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(num_workers) as pool:
        pending = collections.deque()
        for chunk in chunks:
            pending.append(pool.apply_async(_process_chunk, (chunk,)))
            if len(pending) >= 2 * num_workers:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def prepare_wikipedia(
    input_path,
    output_dir,
    heldout_fraction=0.0,
    num_workers=None,
    max_articles=None,
    min_sentences=2,
    shard_bytes=128 * 2**20,
    progress=True,
):
    """Converts a MediaWiki dump into BERT's input format, as sharded text files.

    Args:
        input_path: str. A `.xml.bz2` (or `.xml`) MediaWiki dump, e.g. a full
            `enwiki-latest-pages-articles.xml.bz2` or `sample_dump_path()`.
        output_dir: str. Created if needed; receives `train-NNNNN.txt` and
            `heldout-NNNNN.txt` (one sentence per line, blank line between articles).
        heldout_fraction: float in [0, 1). Share of articles (chosen by a hash of the
            title, so stable across runs) written to the held-out shards. Defaults to 0.
        num_workers: int. Processes cleaning markup; `None` uses all cores, 1 runs
            in-process. Defaults to None.
        max_articles: int or None. Stop after this many non-redirect pages.
        min_sentences: int. Articles with fewer sentences are dropped (NSP needs
            pairs). Defaults to 2.
        shard_bytes: int. Approximate size of one output shard. Defaults to 128 MiB.
        progress: bool. Show a tqdm progress bar over the compressed input.

    Returns:
        dict with `articles_read`, `articles_kept`, `sentences`, `words`,
        `train_files`, `heldout_files` (lists of paths).

    Examples:
    >>> stats = keras_bert_zoo.data.wikipedia.prepare_wikipedia(
    ...     keras_bert_zoo.data.wikipedia.sample_dump_path(), "corpus", heldout_fraction=0.05)
    """
    if not 0.0 <= heldout_fraction < 1.0:
        raise ValueError(
            f"`heldout_fraction` must be in [0, 1). Received: heldout_fraction={heldout_fraction}."
        )
    if num_workers is not None and num_workers < 1:
        raise ValueError(f"`num_workers` must be >= 1 or None. Received: num_workers={num_workers}.")
    num_workers = num_workers or os.cpu_count() or 1
    os.makedirs(output_dir, exist_ok=True)
    writers = {False: _ShardWriter(output_dir, "train", shard_bytes),
               True: _ShardWriter(output_dir, "heldout", shard_bytes)}
    stats = collections.Counter()
    bar = _progress_bar(input_path, progress)
    pages = iter_pages(input_path, progress=bar.update if bar else None)
    for results in _processed_chunks(_chunks(pages, 16, max_articles), num_workers):
        for title, sentences in results:
            stats["articles_read"] += 1
            if len(sentences) < min_sentences:
                continue
            writers[is_heldout(title, heldout_fraction)].write(sentences)
            stats["articles_kept"] += 1
            stats["sentences"] += len(sentences)
            stats["words"] += sum(len(s.split()) for s in sentences)
    for writer in writers.values():
        writer.close()
    if bar:
        bar.close()
    return dict(stats, train_files=writers[False].files, heldout_files=writers[True].files)


def _progress_bar(path, enabled):
    if not enabled or not os.path.isfile(path):
        return None
    return tqdm(total=os.path.getsize(path), unit="B", unit_scale=True, desc="prepare corpus")
