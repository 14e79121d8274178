"""BERT's masked-language-model corruption (Devlin et al., 2019, section 3.1).

BERT learns by filling in blanks: about 15 % of the tokens are chosen, and the
model must recover the original token at each chosen position from the context
on both sides. Of the chosen tokens

- 80 % are replaced by [MASK]        (the blank the model learns to fill),
- 10 % are replaced by a random token (so it cannot trust the visible tokens blindly),
- 10 % are left unchanged            (so it also builds good representations of
                                      real tokens, which is all it sees after
                                      pre-training, where [MASK] never occurs).
"""

from collections.abc import Iterable

import torch

IGNORE_INDEX = -100  # label value that PyTorch's cross-entropy skips


def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    special_token_ids: Iterable[int],
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt a batch for masked language modelling, BERT's 80/10/10 recipe.

    Args:
        input_ids: integer tensor [B, T] of token ids (LongTensor in practice).
            Not modified.
        mask_token_id: id of the [MASK] token.
        vocab_size: random replacements are drawn uniformly from [0, vocab_size)
            (``len(tokenizer)``); they may, rarely, be special tokens or the
            original token itself, exactly as in BERT.
        special_token_ids: ids that are never selected ([CLS], [SEP], [PAD], ...).
            Padding must be among them, so padding is never a prediction target.
        mlm_probability: probability p that each non-special position is selected.
        generator: the source of all randomness, a ``torch.Generator`` on the
            device of ``input_ids`` (None: PyTorch's global generator).
            The same generator state gives the same output.

    Returns:
        (masked_ids, labels), both [B, T], with the dtype and device of
        ``input_ids``:

        - ``labels`` holds the original id at every selected position and -100
          everywhere else (the positions the loss ignores);
        - ``masked_ids`` is a copy of the input in which each selected position
          was replaced by ``mask_token_id`` (probability 0.8), by a random id
          (probability 0.1) or kept (probability 0.1); every other position is
          unchanged.

    Randomness: each non-special position is selected independently of the
    others (and of where the special tokens are) with probability p, and each
    selected position gets its 80/10/10 outcome and its random id independently.
    Every random number comes from ``generator``, so the same generator state
    gives the same output; how many numbers are drawn, and in which order, is
    up to you.
    """
    device, shape = input_ids.device, input_ids.shape
    is_special = _special_positions(input_ids, special_token_ids)

    # Four draws over the whole grid (the order of transformers' DataCollatorForLanguageModeling):
    # selected; [MASK] (0.8); random among the rest (0.5, i.e. 0.1 overall); the random ids.
    selection_prob = torch.full(shape, mlm_probability, device=device)
    selection_prob.masked_fill_(is_special, 0.0)
    selected = torch.bernoulli(selection_prob, generator=generator).bool()
    return _corrupt_selected(input_ids, selected, mask_token_id, vocab_size, generator)


def _special_positions(input_ids, special_token_ids):
    """Bool, the shape of ``input_ids``: True where the id is one of ``special_token_ids``."""
    special_ids = torch.as_tensor(list(special_token_ids), dtype=input_ids.dtype, device=input_ids.device)
    return torch.isin(input_ids, special_ids)


def _corrupt_selected(input_ids, selected, mask_token_id, vocab_size, generator):
    """The 80/10/10 outcome of every selected position, and the labels."""
    device, shape = input_ids.device, input_ids.shape
    to_mask = torch.bernoulli(torch.full(shape, 0.8, device=device), generator=generator).bool()
    to_mask &= selected
    to_random = torch.bernoulli(torch.full(shape, 0.5, device=device), generator=generator).bool()
    to_random &= selected & ~to_mask
    random_ids = torch.randint(vocab_size, shape, generator=generator, device=device, dtype=input_ids.dtype)

    labels = input_ids.masked_fill(~selected, IGNORE_INDEX)
    masked_ids = input_ids.masked_fill(to_mask, mask_token_id)
    masked_ids = torch.where(to_random, random_ids, masked_ids)
    return masked_ids, labels


# ----------------------------------------------------------------------------- whole words
# Not a graded function: a pre-training recipe (``week6_pretraining.train --whole-word-masking``)
# that lives here, with the instructor's code, because it contains the 80/10/10 above.


def continuation_table(tokenizer) -> torch.Tensor:
    """Bool [len(tokenizer)]: True for the ids of WordPiece pieces that continue a word ("##...")."""
    table = torch.zeros(len(tokenizer), dtype=torch.bool)
    for piece, index in tokenizer.get_vocab().items():
        if piece.startswith("##"):
            table[index] = True
    return table


def whole_word_mask(
    input_ids: torch.Tensor,
    *,
    continuation: torch.Tensor,
    mask_token_id: int,
    vocab_size: int,
    special_token_ids: Iterable[int],
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``mask_tokens`` choosing whole words: Google's later "whole word masking" BERT.

    Token-level masking can hide "##shine" of "sun ##shine" alone, and the model then
    recovers it from "sun" beside it, which teaches spelling more than meaning. Here a word
    is a piece that does not continue a word (``continuation``, from ``continuation_table``)
    followed by its "##" pieces; each word is chosen with probability ``mlm_probability``,
    every piece of a chosen word is a target, and each target gets the 80/10/10 outcome on
    its own (as transformers' ``DataCollatorForWholeWordMask`` does). Pieces at the start of
    a row whose word began in the row before are never chosen, nor are special tokens.
    Returns ``(masked_ids, labels)`` as ``mask_tokens`` does.
    """
    device, shape = input_ids.device, input_ids.shape
    is_special = _special_positions(input_ids, special_token_ids)
    continues = continuation.to(device)[input_ids] & ~is_special

    # Each position points at the start of its word: the last non-continuation position at or
    # before it (a running maximum). Pieces before a row's first word start point at position
    # 0, a special token or a continuation piece, which is never chosen.
    positions = torch.arange(shape[-1], device=device).expand(shape)
    word_start = torch.cummax(torch.where(continues, torch.zeros_like(positions), positions), dim=-1).values

    start_prob = torch.full(shape, mlm_probability, device=device)
    start_prob.masked_fill_(continues | is_special, 0.0)
    chosen_start = torch.bernoulli(start_prob, generator=generator).bool()
    selected = torch.gather(chosen_start, -1, word_start) & ~is_special
    return _corrupt_selected(input_ids, selected, mask_token_id, vocab_size, generator)
