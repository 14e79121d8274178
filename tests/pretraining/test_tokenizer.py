"""The Austen WordPiece tokenizer: loads offline, has BERT's special tokens, rebuilds identically."""
from __future__ import annotations

import pytest
import torch

from autograder.paths import REPO

FOLDER = REPO / "data" / "tokenizer" / "austen-wordpiece"


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(FOLDER)  # HF_HUB_OFFLINE=1 (tests/conftest.py)


def test_loads_offline_as_bert_wordpiece(tokenizer):
    assert type(tokenizer).__name__ in ("BertTokenizer", "BertTokenizerFast")
    assert len(tokenizer) == 8000
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert tokenizer.convert_tokens_to_ids(specials) == [0, 1, 2, 3, 4]
    assert (tokenizer.pad_token, tokenizer.mask_token) == ("[PAD]", "[MASK]")


def test_bert_pipeline(tokenizer):
    ids = tokenizer("It is a truth universally acknowledged.")["input_ids"]
    assert tokenizer.convert_ids_to_tokens(ids) == [
        "[CLS]", "it", "is", "a", "truth", "universally", "acknowledged", ".", "[SEP]"]
    # Lower-casing and accent stripping (BERT normaliser); rare words fall into ## pieces.
    assert tokenizer.tokenize("CAFÉ") == tokenizer.tokenize("cafe")
    assert all(piece.startswith("##") for piece in tokenizer.tokenize("unmistakeably")[1:])
    # [MASK] written in the text is recognised as the special token.
    assert tokenizer.mask_token_id in tokenizer("The [MASK] sat.")["input_ids"]


@pytest.mark.slow
def test_training_is_deterministic(tmp_path):
    """Rebuilding from the corpus gives byte-identical files (about 5 s)."""
    from week6_pretraining.tokenizer import save_tokenizer, train_tokenizer

    save_tokenizer(train_tokenizer(), tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / name).read_bytes() == (FOLDER / name).read_bytes(), name


def test_sha256sums_match():
    import hashlib

    for line in (FOLDER.parent / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((FOLDER.parent / name).read_bytes()).hexdigest() == digest, name


def test_training_text_sources(tokenizer):
    """``--text``: the sources' files in the order given, each paragraph closed by [SEP]; the
    held-out rows are Austen's whatever the training text."""
    from week6_pretraining.data import SOURCES, token_stream

    austen = token_stream(tokenizer, "train")
    wider = token_stream(tokenizer, "train", sources=("austen", "wordnet", "novels"))
    assert torch.equal(wider[: len(austen)], austen)
    paragraphs = sum(len((REPO / "data" / "corpus" / SOURCES[s].file).read_text().splitlines()) for s in SOURCES)
    assert int((wider == tokenizer.sep_token_id).sum()) == paragraphs
    # The course tokenizer was trained on Austen; the new text must still be mostly whole words.
    assert float((wider == tokenizer.unk_token_id).float().mean()) < 0.005
    assert torch.equal(token_stream(tokenizer, "heldout", sources=("wordnet",)), token_stream(tokenizer, "heldout"))
    with pytest.raises(ValueError, match="unknown text source"):
        token_stream(tokenizer, "train", sources=("wikipedia",))


@pytest.mark.slow
def test_a_tokenizer_of_the_wider_text(tmp_path, tokenizer):
    """``--text austen wordnet novels``: the vocabulary is learnt from every file given, so words
    that Austen rarely writes become whole pieces; the same files give the same folder again."""
    from week6_pretraining.data import source_files
    from week6_pretraining.tokenizer import folder_digest, save_tokenizer, train_tokenizer

    files = source_files(("austen", "wordnet", "novels"))
    assert [f.name for f in files] == ["austen_train.txt", "wordnet_examples.txt", "novels_train.txt"]
    wide = save_tokenizer(train_tokenizer(files), tmp_path / "a")
    assert len(wide) == len(tokenizer) == 8000
    # "soap" and "television" occur in WordNet's examples, hardly in Austen.
    assert tokenizer.tokenize("soap television") != ["soap", "television"]
    assert wide.tokenize("soap television") == ["soap", "television"]
    save_tokenizer(train_tokenizer(files), tmp_path / "b")
    assert folder_digest(tmp_path / "a") == folder_digest(tmp_path / "b")
