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
    device = input_ids.device
    shape = input_ids.shape
    special_ids = torch.as_tensor(list(special_token_ids), dtype=input_ids.dtype, device=device)
    is_special = torch.isin(input_ids, special_ids)

    # Four draws over the whole grid (the order of transformers' DataCollatorForLanguageModeling):
    # selected; [MASK] (0.8); random among the rest (0.5, i.e. 0.1 overall); the random ids.
    selection_prob = torch.full(shape, mlm_probability, device=device)
    selection_prob.masked_fill_(is_special, 0.0)
    selected = torch.bernoulli(selection_prob, generator=generator).bool()

    to_mask = torch.bernoulli(torch.full(shape, 0.8, device=device), generator=generator).bool()
    to_mask &= selected
    to_random = torch.bernoulli(torch.full(shape, 0.5, device=device), generator=generator).bool()
    to_random &= selected & ~to_mask
    random_ids = torch.randint(vocab_size, shape, generator=generator, device=device, dtype=input_ids.dtype)

    labels = input_ids.masked_fill(~selected, IGNORE_INDEX)
    masked_ids = input_ids.masked_fill(to_mask, mask_token_id)
    masked_ids = torch.where(to_random, random_ids, masked_ids)
    return masked_ids, labels
