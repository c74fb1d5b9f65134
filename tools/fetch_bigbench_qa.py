"""Fetches the two BIG-bench question-answering files that `keras_bert_zoo.data.bigbench_qa` reads.

    python tools/fetch_bigbench_qa.py                  # into <venv>/share/keras_bert_zoo/data/bigbench
    python tools/fetch_bigbench_qa.py --tarball bigbench-1.0.0.tar.gz --output DIR

The `bigbench==1.0.0` sdist on PyPI (358 MB) carries every BIG-bench task's `task.json`;
`pip download` cannot fetch it (its metadata does not build), so this script downloads the
file itself, checks its sha256, extracts only

    disfl_qa/task.json                                               (Disfl-QA, 8,000 questions)
    natural_instructions/subtask002_quoref_answer_generation/task.json  (Quoref, 6,500 questions)

under OUTPUT with their `benchmark_tasks/` relative paths, and deletes the tarball. Every
file lands atomically (a temporary name, then a rename); a wrong hash or a missing member
fails loudly and leaves nothing behind. Standard library only, so `make test` runs it
before anything else is importable. Files already there are kept (`--force` refetches).

BIG-bench data carries a canary: use it for fine-tuning and evaluation, never as
pretraining text.
"""

import argparse
import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request

URL = ("https://files.pythonhosted.org/packages/95/f8/c019b3579df548a04cac12342cfcb878e50ddf6cfcd7fddba8cfc721c157/"
       "bigbench-1.0.0.tar.gz")
SHA256 = "1bb398a5512c6d798cdebe0dfa0ac03f67f6033fa6b39c6ef71df978c7cbc5c2"
PREFIX = "bigbench-1.0.0/bigbench/benchmark_tasks/"
MEMBERS = (
    "disfl_qa/task.json",
    "natural_instructions/subtask002_quoref_answer_generation/task.json",
)
_CHUNK = 1 << 20


def default_output():
    """`<sys.prefix>/share/keras_bert_zoo/data/bigbench`, where the reader looks by default."""
    return os.path.join(sys.prefix, "share", "keras_bert_zoo", "data", "bigbench")


def download(url, target, sha256, timeout=60):
    """Streams `url` into `target` (a new file), hashing as it goes.

    Raises:
        ValueError: the downloaded bytes' sha256 is not `sha256` (`target` is removed).
    """
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=timeout) as response, open(target, "wb") as f:
        for chunk in iter(lambda: response.read(_CHUNK), b""):
            digest.update(chunk)
            f.write(chunk)
    if digest.hexdigest() != sha256:
        os.remove(target)
        raise ValueError(f"{url} has sha256 {digest.hexdigest()}, expected {sha256}. Nothing was extracted; "
                         "check the URL (or the proxy in between) and run again.")


def check_sha256(path, sha256):
    """Raises `ValueError` unless the file at `path` hashes to `sha256`."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    if digest.hexdigest() != sha256:
        raise ValueError(f"{path} has sha256 {digest.hexdigest()}, expected {sha256} (bigbench-1.0.0.tar.gz "
                         "from PyPI). Delete it and download it again.")


def extract(tarball, output, members=MEMBERS):
    """Copies `PREFIX + member` of the tarball to `output/member`, each atomically.

    The archive is read as a stream in one pass; names inside it never become paths
    (only the fixed `members` are written), so a hostile archive cannot write elsewhere.

    Raises:
        ValueError: a member is missing from the archive (nothing is written then).
    """
    wanted = {PREFIX + member: member for member in members}
    staged = {}
    tmp_dir = tempfile.mkdtemp(prefix=".tmp-fetch-", dir=output)
    try:
        with tarfile.open(tarball, "r|gz") as archive:
            for info in archive:
                member = wanted.get(info.name)
                if member is None or not info.isfile():
                    continue
                staged[member] = os.path.join(tmp_dir, str(len(staged)))
                with archive.extractfile(info) as src, open(staged[member], "wb") as dst:
                    shutil.copyfileobj(src, dst, _CHUNK)
                if len(staged) == len(wanted):
                    break
        missing = sorted(set(members) - set(staged))
        if missing:
            raise ValueError(f"{tarball} has no {', '.join(PREFIX + m for m in missing)}; is it bigbench-1.0.0?")
        for member, path in staged.items():
            final = os.path.join(output, member)
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.chmod(path, 0o644)
            os.replace(path, final)
    finally:
        shutil.rmtree(tmp_dir, ignore_errors=True)
    return [os.path.join(output, member) for member in members]


def fetch(output, tarball=None, url=URL, sha256=SHA256, force=False):
    """Gets the member files into `output`; returns their paths.

    Args:
        output: str. Directory for the `benchmark_tasks/`-relative files.
        tarball: str or None. A local copy of the sdist (verified, kept); None downloads
            `url` into `output` and deletes it afterwards.
        url: str. Where to download from. Defaults to PyPI's file.
        sha256: str. The sdist's expected hash.
        force: bool. Refetch even when every file is already there.
    """
    paths = [os.path.join(output, member) for member in MEMBERS]
    if not force and all(os.path.isfile(p) for p in paths):
        return paths
    os.makedirs(output, exist_ok=True)
    if tarball is not None:
        check_sha256(tarball, sha256)
        return extract(tarball, output)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-bigbench-", suffix=".tar.gz", dir=output)
    os.close(fd)
    try:
        download(url, tmp, sha256)
        return extract(tmp, output)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default=default_output(), help="Directory for the files (default: %(default)s).")
    parser.add_argument("--tarball", help="Use this local bigbench-1.0.0.tar.gz instead of downloading.")
    parser.add_argument("--url", default=URL, help="Download from here (default: PyPI).")
    parser.add_argument("--sha256", default=SHA256, help="Expected sha256 of the tarball.")
    parser.add_argument("--force", action="store_true", help="Fetch again even if the files are there.")
    args = parser.parse_args(argv)
    try:
        paths = fetch(args.output, tarball=args.tarball, url=args.url, sha256=args.sha256, force=args.force)
    except urllib.error.HTTPError as e:  # the registry's own words say why (an OSError too)
        body = e.read(300).decode("utf-8", "replace").strip() if e.fp is not None else ""
        print(f"fetch_bigbench_qa: {args.url} answered HTTP {e.code} ({body or e.reason}); nothing was written. "
              "Give a local copy of the sdist with --tarball, or another --url.", file=sys.stderr)
        return 1
    except (OSError, ValueError, tarfile.TarError) as e:
        print(f"fetch_bigbench_qa: {e}", file=sys.stderr)
        return 1
    for path in paths:
        print(f"{path} ({os.path.getsize(path):,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
