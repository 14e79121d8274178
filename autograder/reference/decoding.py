"""Turning a causal LM's next-token scores into text.

A causal LM gives, at each step, logits over the vocabulary for the next token.
Decoding chooses how to use them:

- sampling draws the next token from a (reshaped) distribution: temperature
  sharpens or flattens it, top-k and top-p (nucleus, Holtzman et al., 2020)
  cut off the unreliable tail;
- greedy decoding always takes the most likely token;
- beam search keeps the ``num_beams`` best partial sequences at every step.

Every function here reproduces what ``transformers``' ``generate`` does with the
matching arguments, so you can check your understanding against the library.
"""

import torch
import torch.nn.functional as F


def next_token_distribution(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """The distribution that sampling draws the next token from.

    Args:
        logits: [B, V] next-token scores, any floating dtype and device.
        temperature: T >= 0. The logits are divided by T: T < 1 sharpens the
            distribution, T > 1 flattens it. T == 0 is the limit T -> 0, a
            one-hot vector on the argmax (greedy), and top_k / top_p are then
            irrelevant. Negative T raises ValueError.
        top_k: None (off) or k >= 1: keep the k highest logits. Tokens tied with
            the k-th highest logit are kept too, so ties can keep more than k.
            k > V keeps everything. k < 1 raises ValueError.
        top_p: None (off) or p in [0, 1]: nucleus filtering. Rank the tokens by
            probability (after temperature and top-k); keep a token exactly when
            the total probability of the tokens ranked above it is < p. This is
            the smallest set of most likely tokens whose cumulative probability
            reaches p, and it always contains the most likely token (p = 0 gives
            greedy, p = 1 keeps every token of non-zero probability).
            At the boundary (cumulative probability exactly p) the rule matches
            ``transformers.TopPLogitsWarper(top_p, min_tokens_to_keep=1)`` bit for
            bit because it is computed the same way: sort ascending
            (``torch.sort``, which also fixes the order of tied tokens), take the
            cumulative sum of the probabilities from the least likely token up,
            and drop the tokens whose cumulative sum is <= 1 - p.
            p outside [0, 1] raises ValueError.

    The steps are applied in the order temperature, top-k, top-p (the order of
    ``generate``); filtered tokens get probability exactly 0 and the kept ones
    are renormalised by a softmax.

    Returns:
        probs [B, V], float32, on the device of ``logits``; rows sum to 1.
        Deterministic.
    """
    if temperature < 0:
        raise ValueError(f"temperature must be >= 0, got {temperature}")
    scores = logits.float()
    vocab_size = scores.size(-1)
    if temperature == 0:
        return F.one_hot(scores.argmax(dim=-1), vocab_size).float()
    scores = scores / temperature

    if top_k is not None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1 or None, got {top_k}")
        kth_best = scores.topk(min(top_k, vocab_size), dim=-1).values[..., -1:]
        scores = scores.masked_fill(scores < kth_best, float("-inf"))

    if top_p is not None:
        if not 0.0 <= top_p <= 1.0:
            raise ValueError(f"top_p must be in [0, 1] or None, got {top_p}")
        ascending, order = torch.sort(scores, dim=-1)
        # tail_mass[j] = probability of the j-th least likely token and of every
        # token less likely than it = 1 - (mass of the tokens ranked above it).
        tail_mass = ascending.softmax(dim=-1).cumsum(dim=-1)
        drop_sorted = tail_mass <= 1.0 - top_p
        drop_sorted[..., -1] = False  # the most likely token always survives
        drop = drop_sorted.scatter(-1, order, drop_sorted)  # back to vocabulary order
        scores = scores.masked_fill(drop, float("-inf"))

    return scores.softmax(dim=-1)


def sample_next_token(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw one next token per row.

    Args:
        logits: [B, V] next-token scores.
        temperature, top_k, top_p: as in ``next_token_distribution``;
            temperature == 0 means greedy: the argmax of each row, with no
            random draw at all (ties go to the lowest id, as ``torch.argmax``).
        generator: a ``torch.Generator`` on the device of ``logits`` (None: the
            global generator). One call draws exactly
            ``torch.multinomial(probs, num_samples=1, generator=generator)``,
            so the same generator state gives the same tokens.

    Returns:
        LongTensor [B] of token ids, on the device of ``logits``.
    """
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


@torch.no_grad()
def greedy_decode(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    max_new_tokens: int,
    eos_token_id: int | None = None,
) -> torch.Tensor:
    """Greedy decoding: append the most likely next token, one step at a time.

    Args:
        model: a ``transformers`` causal LM (``model(input_ids=ids).logits`` is
            [B, T, V]), already on the device of ``input_ids`` and in eval mode
            (dropout would make the output random).
        input_ids: LongTensor [B, T], a batch of prompts of equal length, no padding.
        max_new_tokens: n_max >= 0, the most tokens appended to each row.
        eos_token_id: optional end-of-sequence id. A row that has produced it is
            finished: from then on it receives ``eos_token_id`` again at every
            step (the padding ``generate`` uses when ``pad_token_id`` equals
            ``eos_token_id``). Decoding stops as soon as every row is finished.

    Returns:
        LongTensor [B, T + n] with the prompts followed by the generated tokens,
        n <= max_new_tokens (n < max_new_tokens only when every row finished
        early). Equals ``model.generate(input_ids, do_sample=False,
        max_new_tokens=n_max, eos_token_id=eos_token_id, pad_token_id=eos_token_id)``.

    The whole sequence is re-read at every step, which costs O(T^2) per step;
    ``generate`` caches keys and values (``past_key_values``) to read only the
    newest token, a speed-up that does not change the result.
    """
    sequences = input_ids
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        logits = model(input_ids=sequences).logits[:, -1, :]
        next_token = logits.argmax(dim=-1)
        if eos_token_id is not None:
            next_token = next_token.masked_fill(finished, eos_token_id)
            finished |= next_token == eos_token_id
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
        if finished.all():
            break
    return sequences


@torch.no_grad()
def beam_search(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    *,
    num_beams: int,
    max_new_tokens: int,
    length_penalty: float = 1.0,
    eos_token_id: int | None = None,
) -> torch.Tensor:
    """Beam search for one prompt, as ``generate(..., num_beams=k, early_stopping=True)``.

    Notation: k = ``num_beams``, n_max = ``max_new_tokens``, alpha =
    ``length_penalty``. A hypothesis' log-probability is the sum of the
    log-probabilities (log-softmax of the float32 logits) of its generated
    tokens, eos included. A *finished* hypothesis is scored by

        score = log-probability / L ** alpha,

    where L is the number of generated tokens (the prompt is not counted,
    the eos token is). alpha > 0 favours longer outputs, alpha < 0 shorter ones.

    Each step t = 1, 2, ..., n_max:

    1. extend every running beam (one beam, the prompt, at t = 1) by every
       token and keep the 2k candidates of highest log-probability, best first;
    2. a candidate is finished when its last token is ``eos_token_id`` or when
       t == n_max (the length limit finishes everything). Finished candidates
       among the first k of the 2k enter the pool of finished hypotheses with
       L = t; finished candidates ranked k+1..2k are discarded. The pool keeps
       its k best scores;
    3. stop if the pool holds k hypotheses (``early_stopping=True``: it stops
       as soon as k hypotheses have finished, without checking whether a running
       beam could still beat them); otherwise the k best unfinished candidates
       become the running beams (2k candidates always contain at least k of
       them, since at most one candidate per beam ends with eos).

    The loop always ends with a non-empty pool (at t = n_max every top-k
    candidate finishes), except when n_max == 0, which returns the prompt.
    Ties are broken by ``torch.topk``.

    Args:
        model: a ``transformers`` causal LM in eval mode, on the device of
            ``input_ids``; its vocabulary must have at least 2k tokens.
        input_ids: LongTensor [1, T], a single prompt.
        num_beams: k >= 1.
        max_new_tokens: n_max >= 0.
        length_penalty: alpha (any float).
        eos_token_id: optional end-of-sequence id (None: hypotheses finish only
            at the length limit, all with L = n_max, and alpha does not matter).

    Returns:
        LongTensor [1, T + L]: the prompt followed by the generated tokens of the
        best-scoring finished hypothesis, without padding (it ends with eos
        unless it was finished by the length limit). Deterministic. Equals
        ``model.generate(input_ids, num_beams=k, do_sample=False,
        max_new_tokens=n_max, length_penalty=alpha, early_stopping=True,
        eos_token_id=eos_token_id, pad_token_id=...)`` (checked against
        transformers 5.x, whose length L counts generated tokens only).
    """
    if input_ids.dim() != 2 or input_ids.size(0) != 1:
        raise ValueError(f"beam_search takes a single prompt [1, T], got {tuple(input_ids.shape)}")
    if num_beams < 1:
        raise ValueError(f"num_beams must be >= 1, got {num_beams}")
    device = input_ids.device
    prompt_len = input_ids.size(1)
    full_len = prompt_len + max_new_tokens
    pad = eos_token_id if eos_token_id is not None else 0

    beams = input_ids  # [n_running, prompt_len + t - 1]
    beam_log_probs = torch.zeros(1, device=device)  # [n_running], float32
    # The pool of finished hypotheses, best first, right-padded to full_len.
    pool_scores = torch.empty(0, device=device)
    pool_seqs = input_ids.new_empty(0, full_len)
    pool_lens = torch.empty(0, dtype=torch.long, device=device)

    for t in range(1, max_new_tokens + 1):
        # 1. Score every one-token extension of every beam; keep the best 2k.
        logits = model(input_ids=beams).logits[:, -1, :].float()
        log_probs = beam_log_probs[:, None] + logits.log_softmax(dim=-1)  # [n_running, V]
        vocab_size = log_probs.size(-1)
        cand_log_probs, flat_index = log_probs.flatten().topk(min(2 * num_beams, log_probs.numel()))
        parent, token = flat_index // vocab_size, flat_index % vocab_size
        candidates = torch.cat([beams[parent], token[:, None]], dim=1)  # [2k, prompt_len + t]

        # 2. Finished candidates among the top k join the pool, scored with L = t.
        if t == max_new_tokens:
            finished = torch.ones_like(token, dtype=torch.bool)
        elif eos_token_id is None:
            finished = torch.zeros_like(token, dtype=torch.bool)
        else:
            finished = token == eos_token_id
        joins = finished & (torch.arange(len(token), device=device) < num_beams)
        pool_scores = torch.cat([pool_scores, cand_log_probs[joins] / t**length_penalty])
        pool_seqs = torch.cat([pool_seqs, F.pad(candidates[joins], (0, full_len - candidates.size(1)), value=pad)])
        pool_lens = torch.cat([pool_lens, torch.full((int(joins.sum()),), t, device=device)])
        best = pool_scores.topk(min(num_beams, len(pool_scores))).indices
        pool_scores, pool_seqs, pool_lens = pool_scores[best], pool_seqs[best], pool_lens[best]

        # 3. Stop with k finished hypotheses, else continue the k best running ones.
        if len(pool_scores) == num_beams:
            break
        beams = candidates[~finished][:num_beams]
        beam_log_probs = cand_log_probs[~finished][:num_beams]

    if len(pool_scores) == 0:  # max_new_tokens == 0: nothing was generated
        return input_ids
    return pool_seqs[:1, : prompt_len + int(pool_lens[0])]
