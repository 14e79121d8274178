"""The shipped checkpoints: load offline, have the documented sizes, match their sums, predict sensibly."""
from __future__ import annotations

import hashlib
import json
import pytest
import torch

from autograder.notebook import REPO

CHECKPOINTS = REPO / "data" / "checkpoints"
FOLDERS = ["austen-bert-mlm", "austen-gpt-clm"]
# As in the model cards: 4 layers, hidden 128, 4 heads, feed-forward 512, context 128,
# 8,000-piece vocabulary, output layer tied to the input embeddings.
PARAMETERS = {"austen-bert-mlm": 1_858_752, "austen-gpt-clm": 1_833_728}
MAX_BYTES = 15_000_000


@pytest.fixture(scope="module")
def mlm():
    from week6_helpers.small_models import load_mlm

    return load_mlm()


@pytest.fixture(scope="module")
def gpt():
    from week6_helpers.small_models import load_small_gpt

    return load_small_gpt()


@pytest.mark.parametrize("folder", FOLDERS)
def test_sha256sums_match(folder):
    lines = (CHECKPOINTS / folder / "SHA256SUMS").read_text().splitlines()
    listed = {}
    for line in lines:
        digest, name = line.split("  ", 1)
        listed[name] = digest
    present = {p.name for p in (CHECKPOINTS / folder).iterdir() if p.is_file()} - {"SHA256SUMS"}
    assert set(listed) == present, "SHA256SUMS must list every file of the folder"
    for name, digest in listed.items():
        assert hashlib.sha256((CHECKPOINTS / folder / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("folder", FOLDERS)
def test_folder_contents_and_size(folder):
    path = CHECKPOINTS / folder
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "train_log.json", "train_log.csv", "README.md", "eval_results.json"):
        assert (path / name).is_file(), name
    assert (path / "model.safetensors").stat().st_size <= MAX_BYTES
    # The card quotes the measured numbers.
    card = (path / "README.md").read_text()
    results = json.loads((path / "eval_results.json").read_text())
    key = "cloze_top5" if "bert" in folder else "heldout_perplexity"
    shown = f"{results[key]:.1%}" if key == "cloze_top5" else f"{results[key]:.1f}"
    assert shown in card


def test_mlm_architecture(mlm):
    from week6_helpers import count_parameters

    tokenizer, model = mlm
    config = model.config
    assert type(model).__name__ == "BertForMaskedLM" and not model.training
    assert (config.num_hidden_layers, config.hidden_size, config.num_attention_heads) == (4, 128, 4)
    assert (config.intermediate_size, config.max_position_embeddings, config.vocab_size) == (512, 128, 8000)
    assert len(tokenizer) == 8000 and tokenizer.mask_token == "[MASK]"
    assert count_parameters(model) == PARAMETERS["austen-bert-mlm"]
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


def test_gpt_architecture(gpt):
    from week6_helpers import count_parameters

    tokenizer, model = gpt
    config = model.config
    assert type(model).__name__ == "GPT2LMHeadModel" and not model.training
    assert (config.n_layer, config.n_embd, config.n_head, config.n_inner) == (4, 128, 4, 512)
    assert (config.n_positions, config.vocab_size) == (128, 8000)
    assert count_parameters(model) == PARAMETERS["austen-gpt-clm"]
    assert model.lm_head.weight is model.transformer.wte.weight


def top5(mlm, sentence: str) -> list[str]:
    tokenizer, model = mlm
    encoded = tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        logits = model(**encoded).logits[0]
    position = (encoded["input_ids"][0] == tokenizer.mask_token_id).nonzero()[0, 0]
    return tokenizer.convert_ids_to_tokens(logits[position].topk(5).indices)


# Sentences written for these tests (not in the novels, not in the cloze set) whose answer
# the shipped model ranks in its top 5 with a clear margin to the 6th entry, so that other
# CPUs' rounding cannot change the outcome. The weights are fixed, so the result is too.
EXPECTED = [
    ("I am very much obliged [MASK] you for your kindness.", "to"),  # a fixed phrase
    ("She had a great [MASK] of respect for him.", "deal"),  # "a great deal of"
    ("It was a fine [MASK], and they walked to the village.", "day"),  # a noun from the scene
    ("She was [MASK] to see him again after so many years.", "glad"),  # needs the right side
]


def test_famous_first_line_is_not_recalled(mlm):
    """The first line of Pride and Prejudice is in the training text, and the model still
    does not fill it in: a 2 M-parameter model learns what is frequent, not single lines
    (exercise 1 asks students about exactly this)."""
    sentence = ("It is a truth universally [MASK], that a single man in possession of a good fortune "
                "must be in want of a wife.")
    assert "acknowledged" not in top5(mlm, sentence)


@pytest.mark.parametrize("sentence, answer", EXPECTED)
def test_mlm_fills_blanks(mlm, sentence, answer):
    assert answer in top5(mlm, sentence), top5(mlm, sentence)


def test_gpt_predicts_austen(gpt):
    """After "[CLS] mr" the next token is a name or a full stop ("mr. darcy")."""
    tokenizer, model = gpt
    ids = tokenizer("Mr", return_tensors="pt")["input_ids"][:, :-1]  # drop the final [SEP]
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, -1]
    assert tokenizer.convert_ids_to_tokens(int(logits.argmax())) == "."
