"""The cloze set: format, common single-token answers, and no sentence taken from the corpus."""
from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from autograder.paths import REPO

CLOZE = REPO / "data" / "cloze" / "cloze.jsonl"
CORPUS = REPO / "data" / "corpus"
MIN_ANSWER_COUNT = 50  # "common": as data/cloze/README.md promises


def words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


@pytest.fixture(scope="module")
def items():
    return [json.loads(line) for line in CLOZE.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def corpus_text():
    return " ".join((CORPUS / f"austen_{part}.txt").read_text(encoding="utf-8") for part in ("train", "heldout"))


def test_format(items):
    assert len(items) >= 100
    assert len({item["id"] for item in items}) == len(items)
    assert len({item["text"] for item in items}) == len(items)
    for item in items:
        assert set(item) == {"id", "text", "answer", "kind"}, item
        assert item["text"].count("[MASK]") == 1, item
        assert item["kind"] in {"function", "noun", "verb", "adjective"}, item
        assert item["answer"] == item["answer"].lower() and item["answer"].isalpha(), item


def test_answers_are_common_single_tokens(items, corpus_text, repo_root):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(repo_root / "data" / "tokenizer" / "austen-wordpiece")
    counts = Counter(words(corpus_text))
    for item in items:
        assert tokenizer.tokenize(item["answer"]) == [item["answer"]], item
        assert counts[item["answer"]] >= MIN_ANSWER_COUNT, (item, counts[item["answer"]])
        # The [MASK] survives tokenisation as one special token.
        ids = tokenizer(item["text"])["input_ids"]
        assert ids.count(tokenizer.mask_token_id) == 1, item


def test_no_sentence_is_in_the_corpus(items, corpus_text):
    """Filled in and compared on lower-case words only, no item occurs in the novels."""
    haystack = " " + " ".join(words(corpus_text)) + " "
    for item in items:
        sentence = " ".join(words(item["text"].replace("[MASK]", item["answer"])))
        assert f" {sentence} " not in haystack, item


def test_everyday_content_word_part(items):
    """The second part (cloze-126 on): at least 100 everyday content-word items."""
    second = [item for item in items if int(item["id"].removeprefix("cloze-")) >= 126]
    content = [item for item in second if item["kind"] in {"noun", "verb", "adjective"}]
    assert len(content) >= 100, len(content)
