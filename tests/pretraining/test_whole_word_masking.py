"""Whole-word masking (``autograder.reference.masking.whole_word_mask``): words are chosen, not pieces.

The sentence below splits into whole words and words of two to four WordPiece pieces
with the course tokenizer, so each clause of the contract can be seen on it: all pieces
of a word share one fate, a word is chosen with the given probability, the chosen
pieces get BERT's 80/10/10 outcome, specials and a word cut by the row start never are.
"""
from __future__ import annotations

import math

import pytest
import torch

from autograder.reference.masking import IGNORE_INDEX, continuation_table, whole_word_mask
from week6_pretraining.data import load_tokenizer

SENTENCE = "The sunshine fell on the extraordinarily quiet bookshop and the cobblestones."
DRAWS = 4000  # rows per statistical check: the binomial standard error of 0.15 is 0.0056


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def table(tokenizer):
    return continuation_table(tokenizer)


def corrupt(rows, tokenizer, table, seed=0, p=0.15):
    generator = torch.Generator().manual_seed(seed)
    return whole_word_mask(rows, continuation=table, mask_token_id=tokenizer.mask_token_id,
                           vocab_size=len(tokenizer), special_token_ids=tokenizer.all_special_ids,
                           mlm_probability=p, generator=generator)


def word_groups(tokens: list[str]) -> list[list[int]]:
    """Positions of each word's pieces, specials left out."""
    groups = []
    for position, token in enumerate(tokens):
        if token.startswith("[") and token.endswith("]"):
            continue
        if token.startswith("##") and groups:
            groups[-1].append(position)
        else:
            groups.append([position])
    return groups


def test_continuation_table_marks_the_hash_pieces(tokenizer, table):
    assert table.shape == (len(tokenizer),) and table.dtype == torch.bool
    vocab = tokenizer.get_vocab()
    assert table[vocab["##s"]] and not table[vocab["the"]] and not table[tokenizer.mask_token_id]
    assert int(table.sum()) == sum(piece.startswith("##") for piece in vocab)


def test_the_pieces_of_a_word_share_one_fate(tokenizer, table):
    ids = tokenizer(SENTENCE, return_tensors="pt").input_ids
    tokens = tokenizer.convert_ids_to_tokens(ids[0])
    groups = word_groups(tokens)
    assert max(map(len, groups)) >= 3, tokens  # the sentence does test multi-piece words
    rows = ids.repeat(DRAWS, 1)
    before = rows.clone()
    masked, labels = corrupt(rows, tokenizer, table)
    assert torch.equal(rows, before), "the input must not be modified"
    selected = labels != IGNORE_INDEX
    for group in groups:
        fates = selected[:, group]
        assert torch.equal(fates.all(dim=1), fates.any(dim=1)), [tokens[i] for i in group]
    # Specials ([CLS], [SEP]) are never chosen and never changed.
    specials = [i for i, t in enumerate(tokens) if t in ("[CLS]", "[SEP]")]
    assert not selected[:, specials].any() and torch.equal(masked[:, specials], rows[:, specials])
    # Labels: the original id where chosen, the ignore index elsewhere; unchosen inputs unchanged.
    assert torch.equal(labels[selected], rows[selected])
    assert torch.equal(masked[~selected], rows[~selected])


def test_words_are_chosen_at_the_rate_and_get_80_10_10(tokenizer, table):
    ids = tokenizer(SENTENCE, return_tensors="pt").input_ids
    groups = word_groups(tokenizer.convert_ids_to_tokens(ids[0]))
    rows = ids.repeat(DRAWS, 1)
    masked, labels = corrupt(rows, tokenizer, table, p=0.15)
    selected = labels != IGNORE_INDEX
    words_chosen = torch.stack([selected[:, g[0]] for g in groups], dim=1).float()
    se = math.sqrt(0.15 * 0.85 / words_chosen.numel())
    assert abs(words_chosen.mean().item() - 0.15) < 5 * se, words_chosen.mean()
    # Each word independently: no two words chosen together more often than chance says.
    pair = (words_chosen[:, 0] * words_chosen[:, 1]).mean().item()
    assert abs(pair - 0.15 ** 2) < 5 * math.sqrt(0.0225 * 0.9775 / DRAWS), pair
    outcome_mask = (masked == tokenizer.mask_token_id) & selected
    kept = (masked == rows) & selected
    n = int(selected.sum())
    assert abs(outcome_mask.sum().item() / n - 0.8) < 0.03
    assert abs(kept.sum().item() / n - 0.1) < 0.02  # random ids rarely equal the original
    assert abs((selected & ~outcome_mask & ~kept).sum().item() / n - 0.1) < 0.02


def test_a_word_cut_by_the_row_start_is_never_chosen(tokenizer, table):
    ids = tokenizer(SENTENCE, add_special_tokens=False, return_tensors="pt").input_ids[0]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    first_piece = tokens.index("##ina")  # "extraord ##ina ##ril ##y": start the row inside the word
    rows = ids[first_piece:].repeat(DRAWS, 1)
    _, labels = corrupt(rows, tokenizer, table, p=0.5)
    orphans = 3  # ##ina ##ril ##y
    assert not (labels[:, :orphans] != IGNORE_INDEX).any()
    assert (labels[:, orphans] != IGNORE_INDEX).float().mean() > 0.4  # the next word ("quiet") is chosen


def test_same_generator_state_same_output(tokenizer, table):
    rows = tokenizer([SENTENCE] * 8, return_tensors="pt").input_ids
    first = corrupt(rows, tokenizer, table, seed=7)
    again = corrupt(rows, tokenizer, table, seed=7)
    other = corrupt(rows, tokenizer, table, seed=8)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not torch.equal(first[1], other[1])


def test_training_loop_masks_whole_words_and_keeps_the_held_out_masking(monkeypatch):
    """``train(whole_word=True)`` corrupts the training rows with ``whole_word_mask`` and the
    held-out rows with the token-level ``mask_fn``, so held-out losses stay comparable."""
    from autograder.build.pretraining import reference_functions
    from autograder.reference.masking import mask_tokens
    from week6_pretraining import train as train_module
    from week6_pretraining.functions import Functions

    calls = {"token": 0, "word": 0}

    def token_level(*args, **kwargs):
        calls["token"] += 1
        return mask_tokens(*args, **kwargs)

    def word_level(*args, **kwargs):
        calls["word"] += 1
        return whole_word_mask(*args, **kwargs)

    monkeypatch.setattr("autograder.build.pretraining.whole_word_mask", word_level)
    torch.set_num_threads(1)
    config = train_module.TrainConfig("mlm", max_steps=3, batch_size=4, size=train_module.SIZES["tiny"], device="cpu",
                                      eval_rows=4, context_warmup=False, whole_word=True)
    functions = Functions(**{**reference_functions(), "mask_fn": token_level})
    _, _, log = train_module.train(config, functions, progress=False)
    assert calls == {"token": 1, "word": 3}, calls  # held-out rows once; every training step
    assert log["whole_word_masking"] is True
    with pytest.raises(ValueError, match="masked-LM"):
        train_module.TrainConfig("clm", max_steps=1, whole_word=True)
