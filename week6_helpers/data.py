"""Loaders for the shipped datasets, returning Hugging Face ``datasets`` objects.

The files live in the repository's ``data/`` folder (see ``data/*/README.md`` for
their provenance and licences). They are read with the standard library and turned
into in-memory datasets, so nothing is fetched and nothing is written to a cache.
"""
from __future__ import annotations

import json
from pathlib import Path

from .assets import MissingAssetError, data_dir

SENTIMENT_SPLITS = ("train", "dev", "test")
SENTIMENT_LABELS = ("negative", "positive")
CORPUS_PARTS = ("train", "heldout")


def _read_jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        raise MissingAssetError(
            f"{path} is missing.",
            f"restore it with `git checkout -- {path.name}` or rebuild it with "
            f"`python {path.parent / 'build.py'}`",
        )
    with path.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _sentiment_dataset(rows: list[dict]):
    from datasets import ClassLabel, Dataset, Features, Value

    features = Features(
        {
            "id": Value("string"),
            "text": Value("string"),
            "label": ClassLabel(names=list(SENTIMENT_LABELS)),
            "score": Value("float32"),
        }
    )
    columns = {name: [row[name] for row in rows] for name in features}
    columns["id"] = [str(value) for value in columns["id"]]
    return Dataset.from_dict(columns, features=features)


def load_sentiment(folder: str | Path | None = None):
    """Movie-review snippets with binary labels, as a ``DatasetDict``.

    Splits ``train`` / ``dev`` / ``test``; columns ``id``, ``text``, ``label``
    (0 = negative, 1 = positive) and ``score`` (the mean human rating, -4..+4).
    """
    from datasets import DatasetDict

    folder = Path(folder) if folder else data_dir() / "sentiment"
    return DatasetDict(
        {split: _sentiment_dataset(_read_jsonl(folder / f"{split}.jsonl")) for split in SENTIMENT_SPLITS}
    )


def load_sentiment_ood(domain: str = "amazon", folder: str | Path | None = None):
    """Out-of-domain sentiment test set (same columns as ``load_sentiment``)."""
    folder = Path(folder) if folder else data_dir() / "sentiment"
    return _sentiment_dataset(_read_jsonl(folder / f"ood_{domain}.jsonl"))


def load_corpus(folder: str | Path | None = None):
    """Raw English text for toy pre-training: Jane Austen's six novels.

    A ``DatasetDict`` with parts ``train`` and ``heldout``; one paragraph per row
    in the column ``text``.
    """
    from datasets import Dataset, DatasetDict

    folder = Path(folder) if folder else data_dir() / "corpus"
    parts = {}
    for part in CORPUS_PARTS:
        path = folder / f"austen_{part}.txt"
        if not path.is_file():
            raise MissingAssetError(
                f"{path} is missing.", f"rebuild it with `python {folder / 'build.py'}`"
            )
        lines = path.read_text(encoding="utf-8").splitlines()
        parts[part] = Dataset.from_dict({"text": [line for line in lines if line.strip()]})
    return DatasetDict(parts)
