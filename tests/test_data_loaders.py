"""The dataset loaders return Hugging Face datasets built from the shipped files."""
from __future__ import annotations

import json

import pytest


def _lines(path):
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_sentiment_loader_matches_files(repo_root):
    from week6_helpers import load_sentiment

    splits = load_sentiment()
    assert sorted(splits) == ["dev", "test", "train"]
    for name, split in splits.items():
        rows = [json.loads(line) for line in _lines(repo_root / "data" / "sentiment" / f"{name}.jsonl")]
        assert split.num_rows == len(rows)
        assert split.features["label"].names == ["negative", "positive"]
        assert split[0]["text"] == rows[0]["text"] and split[0]["label"] == rows[0]["label"]
        # The label agrees with the sign of the human rating on every row.
        assert all((score > 0) == bool(label) for score, label in zip(split["score"], split["label"]))


def test_out_of_domain_loader(repo_root):
    from week6_helpers import load_sentiment_ood

    amazon = load_sentiment_ood("amazon")
    assert amazon.num_rows == len(_lines(repo_root / "data" / "sentiment" / "ood_amazon.jsonl"))
    assert set(amazon["label"]) == {0, 1}


def test_corpus_loader(repo_root):
    from week6_helpers import load_corpus

    corpus = load_corpus()
    assert sorted(corpus) == ["heldout", "train"]
    for part in ("train", "heldout"):
        assert corpus[part].num_rows == len(_lines(repo_root / "data" / "corpus" / f"austen_{part}.txt"))
    assert corpus["train"].num_rows > 10 * corpus["heldout"].num_rows > 0


def test_missing_data_folder_names_the_fix(tmp_path, monkeypatch):
    from week6_helpers import MissingAssetError, load_sentiment

    monkeypatch.setenv("WEEK6_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(MissingAssetError, match="WEEK6_DATA"):
        load_sentiment()
    monkeypatch.setenv("WEEK6_DATA", str(tmp_path))
    with pytest.raises(MissingAssetError, match="build.py"):
        load_sentiment()
