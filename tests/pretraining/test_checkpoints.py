"""The shipped checkpoints: load offline, have the documented sizes, match their sums, predict sensibly."""
from __future__ import annotations

import hashlib
import json

import pytest
import torch

from autograder.paths import REPO

CHECKPOINTS = REPO / "data" / "checkpoints"
FOLDERS = ["austen-bert-mlm", "austen-gpt-clm", "austen-t5-span", "austen-t5-span-tiny"]
# As in the model cards: 4 layers, hidden 128, 4 heads, feed-forward 512, context 128,
# 8,000-piece vocabulary, output layer tied to the input embeddings. The T5s have an encoder
# and a decoder of that many layers and 100 sentinels more in the vocabulary; the tiny one
# has 2 + 2 layers of width 64 (2 heads, feed-forward 256).
PARAMETERS = {"austen-bert-mlm": 1_858_752, "austen-gpt-clm": 1_833_728,
              "austen-t5-span": 2_874_880, "austen-t5-span-tiny": 748_672}
MAX_BYTES = 15_000_000


@pytest.fixture(scope="module")
def mlm():
    from week6_helpers.small_models import load_mlm

    return load_mlm()


@pytest.fixture(scope="module", params=[False, True], ids=["t5", "t5-tiny"])
def t5(request):
    from week6_helpers.small_models import load_small_t5

    return load_small_t5(tiny=request.param)


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
    key = "heldout_perplexity" if "gpt" in folder else "cloze_top5"
    shown = f"{results[key]:.1%}" if key == "cloze_top5" else f"{results[key]:.1f}"
    assert shown in card
    if "t5" in folder:
        assert f"{results['heldout_span_loss']:.3f}" in card


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


# Sentences written for these tests (not in the training text, not in the cloze set) whose
# answer the shipped model ranks in its top 5 with a clear margin to the 6th entry, so that other
# CPUs' rounding cannot change the outcome. The weights are fixed, so the result is too.
EXPECTED = [
    ("I am very much obliged [MASK] you for your kindness.", "to"),  # log-prob -0.10; 6th entry -6.13
    ("She had a great [MASK] of respect for him.", "deal"),  # "a great deal of": -0.84; 6th -5.03
    ("It was a fine [MASK], and they walked to the village.", "day"),  # a noun from the scene: -3.56; 6th -4.02
    ("She was very [MASK] to see him again after so many years.", "glad"),  # needs the right side: -1.22; 6th -3.89
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


def test_t5_architecture(t5):
    from week6_helpers import count_parameters

    tokenizer, model = t5
    config = model.config
    tiny = config.d_model == 64
    name = "austen-t5-span-tiny" if tiny else "austen-t5-span"
    assert type(model).__name__ == "T5ForConditionalGeneration" and not model.training
    assert (config.num_layers, config.num_decoder_layers, config.d_model, config.num_heads, config.d_ff) == (
        (2, 2, 64, 2, 256) if tiny else (4, 4, 128, 4, 512))
    assert config.vocab_size == len(tokenizer) == 8100
    assert tokenizer.convert_tokens_to_ids(["<extra_id_0>", "<extra_id_99>"]) == [8000, 8099]
    assert count_parameters(model) == PARAMETERS[name]
    assert model.lm_head.weight is model.shared.weight
    assert config.decoder_start_token_id == tokenizer.pad_token_id


def t5_top5(t5, sentence: str) -> list[str]:
    """The five first tokens the T5 ranks highest for the span dropped at [MASK]."""
    from week6_pretraining.evaluate import span_cloze_predictions

    tokenizer, model = t5
    return span_cloze_predictions(model, tokenizer, [{"text": sentence}])[0]


# Written for these tests, as EXPECTED; checked against the shipped small T5 with a clear
# margin to its 6th entry.
T5_EXPECTED = [
    ("I am very much obliged [MASK] you for your kindness.", "to"),  # log-prob -0.18; 6th entry -5.28
    ("She had a great [MASK] of respect for him.", "deal"),  # -1.29; 6th entry -4.55
]


@pytest.mark.parametrize("sentence, answer", T5_EXPECTED)
def test_t5_fills_dropped_spans(sentence, answer):
    from week6_helpers.small_models import load_small_t5

    assert answer in t5_top5(load_small_t5(), sentence)


def test_evaluation_reproduces_the_card_numbers():
    """Evaluating a shipped folder again gives exactly its eval_results.json (the weights, the
    held-out corruption and the cloze set are fixed); nothing is written with --no-write."""
    from week6_pretraining.evaluate import main

    folder = CHECKPOINTS / "austen-t5-span-tiny"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    results = main([str(folder), "--no-write"])
    assert results == {folder.name: json.loads((folder / "eval_results.json").read_text())}
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before


def test_cloze_accuracy_of_one_kind_only(mlm):
    """A set of content words only has no function-word score (and does not divide by zero)."""
    from week6_pretraining.evaluate import cloze_accuracy, load_cloze

    tokenizer, model = mlm
    everyday = [item for item in load_cloze() if item["kind"] != "function"][:10]
    result = cloze_accuracy(model, tokenizer, everyday)
    assert set(result["by_kind"]) == {"content"} and result["by_kind"]["content"]["items"] == 10


def test_shipped_folders_are_the_table_of_checkpoints():
    """``week6_helpers.small_models.CHECKPOINTS`` names every shipped folder, and only those."""
    from week6_helpers.small_models import CHECKPOINTS as TABLE

    shipped = sorted(p.name for p in CHECKPOINTS.iterdir() if (p / "config.json").is_file())
    assert sorted(c.folder for c in TABLE) == shipped == sorted(FOLDERS)


def test_card_of_a_model_trained_on_more_text():
    """A card names every training file and its licence, its title names the texts, and its
    command reproduces ``--text`` and ``--bf16``; a log from before ``--text`` reads as Austen alone."""
    from week6_pretraining.card import render, reproduce_command

    folder = CHECKPOINTS / "austen-bert-mlm"
    log = json.loads((folder / "train_log.json").read_text())
    metrics = json.loads((folder / "eval_results.json").read_text())
    assert log["text"] == ["austen", "wordnet", "novels"]
    card = render("mlm", log, metrics, 1, ["x"])
    for name in ("austen_train.txt", "wordnet_examples.txt", "novels_train.txt", "WordNet 3.0 Copyright 2006",
                 "pre-trained on Jane Austen, WordNet's examples and three more novels"):
        assert name in card, name
    assert "--text austen wordnet novels --bf16" in reproduce_command("mlm", {**log, "bf16_autocast": True})
    austen = {key: value for key, value in log.items() if key != "text"}
    assert render("mlm", austen, metrics, 1, ["x"]) == render("mlm", {**austen, "text": ["austen"]}, metrics, 1, ["x"])
    assert "pre-trained on Jane Austen\n" in render("mlm", austen, metrics, 1, ["x"])
    assert "--text" not in reproduce_command("mlm", austen)


def test_card_of_a_model_trained_with_whole_word_masking():
    """The card says how the rows were masked and its command repeats the flag; a log from
    before the flag existed reads as token-level masking, its card unchanged."""
    from week6_pretraining.card import render, reproduce_command

    folder = CHECKPOINTS / "austen-bert-mlm"
    log = json.loads((folder / "train_log.json").read_text())
    metrics = json.loads((folder / "eval_results.json").read_text())
    whole, token = {**log, "whole_word_masking": True}, {**log, "whole_word_masking": False}
    older = {key: value for key, value in log.items() if key != "whole_word_masking"}
    assert "whole-word masking" in render("mlm", whole, metrics, 1, ["x"])
    assert "--whole-word-masking" in reproduce_command("mlm", whole)
    assert render("mlm", token, metrics, 1, ["x"]) == render("mlm", older, metrics, 1, ["x"])
    assert "whole-word" not in render("mlm", token, metrics, 1, ["x"])
    assert "--whole-word-masking" not in reproduce_command("mlm", token)


def _flags(command: str) -> dict[str, tuple[str, ...]]:
    """``--flag value ...`` pairs of a command line, in any order."""
    flags, name = {}, None
    for word in command.split():
        if word.startswith("--"):
            name = word
            flags[name] = ()
        elif name is not None:
            flags[name] += (word,)
    return flags


def test_rebuild_hint_is_the_recipe_of_the_shipped_weights():
    """What a missing checkpoint's error tells a user to run is the run the card records: every
    flag of the table's recipe has the value the training log shows."""
    from week6_helpers.small_models import CHECKPOINTS as TABLE
    from week6_pretraining.card import reproduce_command

    for checkpoint in TABLE:
        log = json.loads((CHECKPOINTS / checkpoint.folder / "train_log.json").read_text())
        recorded = _flags(reproduce_command(checkpoint.objective, log, checkpoint.folder))
        hinted = _flags(checkpoint.rebuild.split("`")[1])
        assert hinted.items() <= recorded.items(), (checkpoint.folder, hinted, recorded)
