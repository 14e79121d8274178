"""Fast checks of the shipped data sets (no network, no rebuild).

The expected figures are the ones in data/sentiment/README.md and
data/corpus/README.md; if a rebuild changes them, both must change together.
Rebuild-level checks live in each folder's `build.py --check`.
"""
import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest

from autograder.paths import REPO

DATA = REPO / "data"
SENTIMENT = DATA / "sentiment"
CORPUS = DATA / "corpus"

SPLITS = ["train", "dev", "test"]
# file -> (negative, positive), as in data/sentiment/README.md
SENTIMENT_COUNTS = {
    "train.jsonl": (4261, 4193),
    "dev.jsonl": (532, 524),
    "test.jsonl": (532, 524),
    "ood_amazon.jsonl": (1479, 2120),
}
# file -> (paragraphs, words), as in data/corpus/README.md
CORPUS_COUNTS = {
    "austen_train.txt": (9493, 672500),
    "austen_heldout.txt": (496, 44162),
    "wordnet_examples.txt": (32923, 593082),
    "novels_train.txt": (6993, 346706),
}
TRAINING_TEXT = ["austen_train.txt", "wordnet_examples.txt", "novels_train.txt"]


def read_sums(folder: Path) -> dict:
    lines = (folder / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


def read_jsonl(path: Path) -> list:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def key(text: str) -> str:
    """Comparison key for leakage checks: case and spacing do not make a new text."""
    return " ".join(text.lower().split())


@pytest.fixture(scope="module")
def sentiment():
    return {name: read_jsonl(SENTIMENT / name) for name in SENTIMENT_COUNTS}


@pytest.fixture(scope="module")
def corpus():
    return {name: (CORPUS / name).read_text(encoding="utf-8").splitlines()
            for name in CORPUS_COUNTS}


@pytest.mark.parametrize("folder, expected", [(SENTIMENT, SENTIMENT_COUNTS),
                                              (CORPUS, CORPUS_COUNTS)])
def test_checksums_match(folder, expected):
    sums = read_sums(folder)
    assert set(sums) == set(expected), "SHA256SUMS must list exactly the shipped data files"
    for name, digest in sums.items():
        actual = hashlib.sha256((folder / name).read_bytes()).hexdigest()
        assert actual == digest, f"{folder.name}/{name} does not match SHA256SUMS"


def test_sentiment_schema(sentiment):
    for name, rows in sentiment.items():
        ids = [r["id"] for r in rows]
        assert len(ids) == len(set(ids)), f"repeated id in {name}"
        for r in rows:
            assert set(r) == {"id", "text", "label", "score"}
            assert isinstance(r["id"], str) and isinstance(r["text"], str)
            assert r["text"] == " ".join(r["text"].split()) != ""
            assert type(r["label"]) is int and r["label"] in (0, 1)
            assert isinstance(r["score"], float)
            # the label is the sign of the mean rating; neutral sentences were dropped
            assert r["label"] == (r["score"] > 0) and r["score"] != 0


@pytest.mark.parametrize("name", SENTIMENT_COUNTS)
def test_sentiment_counts(sentiment, name):
    labels = Counter(r["label"] for r in sentiment[name])
    assert (labels[0], labels[1]) == SENTIMENT_COUNTS[name]


def test_no_text_in_two_files(sentiment):
    owner = {}
    for name, rows in sentiment.items():
        for r in rows:
            k = key(r["text"])
            assert k not in owner, f"{r['text']!r} is in {owner[k]} and {name}"
            owner[k] = name


def test_splits_are_stratified(sentiment):
    def positive_fraction(rows):
        return sum(r["label"] for r in rows) / len(rows)

    overall = positive_fraction([r for s in SPLITS for r in sentiment[f"{s}.jsonl"]])
    for s in SPLITS:
        assert abs(positive_fraction(sentiment[f"{s}.jsonl"]) - overall) < 0.01, s


@pytest.mark.parametrize("name", CORPUS_COUNTS)
def test_corpus_counts(corpus, name):
    paragraphs = corpus[name]
    words = sum(len(p.split()) for p in paragraphs)
    assert (len(paragraphs), words) == CORPUS_COUNTS[name]


def test_corpus_is_clean(corpus):
    for name, paragraphs in corpus.items():
        assert paragraphs, f"{name} is empty"
        for p in paragraphs:
            assert p == " ".join(p.split()) != "", f"{name}: blank or badly spaced line"
            assert not p.upper().startswith("CHAPTER "), f"{name}: heading left in: {p!r}"
            assert "_" not in p, f"{name}: italics markup left in: {p[:60]!r}"


@pytest.mark.parametrize("name", TRAINING_TEXT)
def test_corpus_parts_are_disjoint(corpus, name):
    """No training file holds a held-out paragraph: every model is scored on Austen's held-out part."""
    shared = set(map(key, corpus[name])) & set(map(key, corpus["austen_heldout.txt"]))
    assert not shared, f"{len(shared)} paragraphs are in {name} and held out, e.g. {next(iter(shared))!r}"


def test_no_cloze_sentence_in_the_training_text(corpus):
    """The cloze set was written for the course: no filled-in sentence occurs in any training text."""
    import re

    def words(text):
        return " " + " ".join(re.findall(r"[a-z']+", text.lower())) + " "

    text = "".join(words(p) for name in TRAINING_TEXT for p in corpus[name])
    items = read_jsonl(DATA / "cloze" / "cloze.jsonl")
    found = [item["id"] for item in items if words(item["text"].replace("[MASK]", item["answer"])) in text]
    assert not found, f"cloze sentences found verbatim in the training text: {found}"
