"""Reading a causal LM's scores: how likely is a sentence, and what comes next?

Part A lets students discover what a pre-trained model knows by scoring text:

- the log-probability of a whole sequence is the sum of the log-probabilities
  of each token given the tokens before it (the chain rule of probability);
- the next-token distribution at the end of a prompt, and its most likely tokens.

Exercise 1 reads a masked LM the same way: the distribution at each [MASK].
"""

import torch


def sequence_logprob(logits: torch.Tensor, token_ids: torch.Tensor) -> torch.Tensor:
    """Log-probability of ``token_ids[1:]`` given the tokens before each of them.

        log p(x_1 .. x_{T-1} | x_0) = sum_{t=1}^{T-1} log_softmax(logits[t - 1])[x_t]

    The first token has nothing before it and is not scored (it is the context).

    Args:
        logits: [T, V] scores of a causal LM on ``token_ids`` (``model(ids).logits[0]``):
            ``logits[t]`` has read tokens 0..t and scores the token at t + 1; the
            last row scores a token that is not there and is unused.
        token_ids: integer tensor [T], the tokens the model read.

    Returns:
        A 0-dim float32 tensor on the device of ``logits`` (<= 0), computed in
        float32 whatever the logits' dtype; 0.0 when T == 1. It equals
        ``-(T - 1) * loss`` for the ``loss`` a ``transformers`` causal LM returns
        with ``labels = token_ids[None]``. Deterministic.
    """
    log_probs = logits.float().log_softmax(dim=-1)[:-1]  # [T - 1, V]
    targets = token_ids[1:].to(device=logits.device, dtype=torch.long)
    return log_probs.gather(-1, targets[:, None]).sum()


def top_k_next_tokens(logits: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` most likely next tokens and their probabilities.

    Args:
        logits: [V] next-token scores (e.g. ``model(ids).logits[0, -1]``), any
            floating dtype and device.
        k: 1 <= k <= V.

    Returns:
        (probs, ids): probs float32 [k], the softmax probabilities (over the whole
        vocabulary, computed in float32) of the k most likely tokens in
        descending order; ids int64 [k], their token ids. Both on the device of
        ``logits``. Ties are ordered as ``torch.topk`` orders them.
    """
    probs = logits.float().softmax(dim=-1)
    top = probs.topk(k)
    return top.values, top.indices


def top_k_mask_predictions(logits: torch.Tensor, input_ids: torch.Tensor, mask_token_id: int,
                           k: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` most probable tokens at every [MASK] position of one sequence.

    Args:
        logits: [T, V] (or [1, T, V]) scores of a masked LM for one sequence,
            any floating dtype and device.
        input_ids: [T] (or [1, T]) integer ids the model read; may live on
            another device than ``logits``.
        mask_token_id: the id of [MASK].
        k: 1 <= k <= V, else ValueError.

    Returns:
        (probs, ids) with one row per [MASK], left to right, on the device of
        ``logits``: probs float32 [n_masks, k], the largest values of the softmax
        over the whole vocabulary (computed in float32), in decreasing order; ids
        int64 [n_masks, k]. Shapes [0, k] when there is no [MASK]; tied
        probabilities come in the order ``torch.topk`` gives them.
    """
    if logits.dim() == 3:
        if logits.size(0) != 1:
            raise ValueError(f"expected one sequence, got a batch of {logits.size(0)}")
        logits = logits[0]
    if input_ids.dim() == 2:
        if input_ids.size(0) != 1:
            raise ValueError(f"expected one sequence of ids, got a batch of {input_ids.size(0)}")
        input_ids = input_ids[0]
    vocab_size = logits.size(-1)
    if not 1 <= k <= vocab_size:
        raise ValueError(f"k must be between 1 and the vocabulary size {vocab_size}, got {k}")
    positions = torch.nonzero(input_ids == mask_token_id).flatten().to(logits.device)  # ascending
    probs = logits.index_select(0, positions).float().softmax(dim=-1)
    top = probs.topk(k, dim=-1)
    return top.values, top.indices
