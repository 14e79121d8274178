"""exercises.label_word_targets against independent oracles: the docstring's layout read back row
by row, a hand-made batch, and a real causal LM, whose own loss from these labels (transformers
shifts them itself) must be the cross-entropy of the label words alone, computed one row at a
time without padding, on either padding side."""

import random

import pytest
import torch
from torch.nn import functional as F

from autograder.reference.exercises import label_word_targets


def _batch(seed: int, rows: int, vocab: int = 96) -> tuple[list[list[int]], list[list[int]]]:
    rng = random.Random(seed)
    prompts = [[rng.randrange(vocab) for _ in range(rng.randint(1, 10))] for _ in range(rows)]
    words = [[rng.randrange(vocab) for _ in range(rng.randint(1, 3))] for _ in range(rows)]
    return prompts, words


def test_hand_example_both_sides():
    ids, mask, labels = label_word_targets([[5, 0, 7], [8]], [[1], [2, 3]], 0)
    assert ids.tolist() == [[5, 0, 7, 1], [0, 8, 2, 3]]
    assert mask.tolist() == [[1, 1, 1, 1], [0, 1, 1, 1]]  # the 0 inside the first prompt is no pad
    assert labels.tolist() == [[-100, -100, -100, 1], [-100, -100, 2, 3]]
    ids, mask, labels = label_word_targets([[5, 0, 7], [8]], [[1], [2, 3]], 0, padding_side="right")
    assert ids.tolist() == [[5, 0, 7, 1], [8, 2, 3, 0]]
    assert mask.tolist() == [[1, 1, 1, 1], [1, 1, 1, 0]]
    assert labels.tolist() == [[-100, -100, -100, 1], [-100, 2, 3, -100]]


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("seed", range(5))
def test_rows_read_back_as_the_docstring_says(seed, side):
    prompts, words = _batch(seed, rows=2 + seed)
    pad = 90 + seed
    ids, mask, labels = label_word_targets(prompts, words, pad, padding_side=side)
    width = max(len(p) + len(w) for p, w in zip(prompts, words))
    for tensor in (ids, mask, labels):
        assert tensor.dtype == torch.long and tensor.device.type == "cpu" and tensor.shape == (len(prompts), width)
    for row, (prompt, word) in enumerate(zip(prompts, words)):
        n = len(prompt) + len(word)
        real = slice(width - n, width) if side == "left" else slice(0, n)
        padding = slice(0, width - n) if side == "left" else slice(n, width)
        assert ids[row, real].tolist() == prompt + word
        assert set(ids[row, padding].tolist()) <= {pad}
        assert mask[row, real].tolist() == [1] * n and set(mask[row, padding].tolist()) <= {0}
        assert labels[row, real].tolist() == [-100] * len(prompt) + word
        assert set(labels[row, padding].tolist()) <= {-100}


@pytest.mark.parametrize("arguments", [
    ([[1]], [[2], [3]], 0, "left"), ([], [], 0, "left"), ([[1], []], [[2], [3]], 0, "left"),
    ([[1], [4]], [[2], []], 0, "left"), ([[1]], [[2]], 0, "middle"),
])
def test_errors(arguments):
    prompts, words, pad, side = arguments
    with pytest.raises(ValueError):
        label_word_targets(prompts, words, pad, padding_side=side)


@pytest.mark.parametrize("side", ["left", "right"])
def test_the_models_loss_is_the_label_words_cross_entropy(tiny_llama, side):
    """transformers' causal-LM loss from the labels (it shifts them) equals the mean negative
    log-likelihood of the label-word ids alone, each row scored on its own without padding (the
    rotary positions make the padding side irrelevant, up to rounding)."""
    model = tiny_llama(3)
    prompts, words = _batch(11, rows=5)
    ids, mask, labels = label_word_targets(prompts, words, 0, padding_side=side)
    with torch.no_grad():
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        nll = []
        for prompt, word in zip(prompts, words):
            logits = model(input_ids=torch.tensor([prompt + word])).logits[0]
            predicting = logits[len(prompt) - 1:len(prompt) + len(word) - 1]  # the positions before the word
            nll.append(F.cross_entropy(predicting, torch.tensor(word), reduction="none"))
    assert torch.allclose(loss, torch.cat(nll).mean(), atol=1e-5)


def test_left_padding_needs_only_the_last_logits(tiny_llama):
    """With left padding the label words end every row: the logits of the last k + 1 positions give
    the same loss (as the notebook computes it with logits_to_keep)."""
    model = tiny_llama(4)
    prompts, words = _batch(12, rows=6)
    ids, mask, labels = label_word_targets(prompts, words, 0)
    k = max(len(w) for w in words)
    with torch.no_grad():
        full = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        kept = model(input_ids=ids, attention_mask=mask, logits_to_keep=k + 1).logits
    last = F.cross_entropy(kept[:, :-1].flatten(0, 1), labels[:, -k:].flatten(), ignore_index=-100)
    assert torch.allclose(full, last, atol=1e-5)
