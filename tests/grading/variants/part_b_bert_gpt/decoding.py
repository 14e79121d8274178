"""Stand-in students for the decoding section of part_b_bert_gpt.ipynb (B2): sampling, greedy
decoding and beam search."""
from __future__ import annotations

import heapq

import torch

from autograder.reference import decoding

from ._common import _on_cpu


# ---------------------------------------------------------------- wrong: beam_search, one clause each
def beam_search_greedy_path(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0, eos_token_id=None):
    return decoding.greedy_decode(model, input_ids, max_new_tokens, eos_token_id=eos_token_id)


def beam_search_no_length_penalty(model, input_ids, *, length_penalty=1.0, **kwargs):
    return decoding.beam_search(model, input_ids, length_penalty=1.0, **kwargs)


def _check_beam_arguments(input_ids, num_beams):
    if input_ids.shape[0] != 1 or num_beams < 1:
        raise ValueError(f"one prompt [1, T] and num_beams >= 1, got {list(input_ids.shape)} and {num_beams}")


@torch.no_grad()
def _beam_search_variant(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0, eos_token_id=None,
                         wrong=None):
    """The textbook beam search with explicit Python lists. ``wrong``, an id of beam_search's clause table
    (autograder/reference/clauses/part_b_bert_gpt/decoding.toml), breaks that one clause as
    _HOW_BEAM_SEARCH_GOES_WRONG says; None breaks none."""
    _check_beam_arguments(input_ids, num_beams)
    k, prompt = num_beams, input_ids[0].tolist()
    beams = [(0.0, [])]  # (log-probability, generated tokens), best first
    finished = []  # (score, generated tokens), in finishing order
    for t in range(1, max_new_tokens + 1):
        log_probs = model(input_ids=torch.tensor([prompt + g for _, g in beams], device=input_ids.device)
                          ).logits[:, -1].float().log_softmax(-1)
        totals = (torch.tensor([lp for lp, _ in beams], device=input_ids.device)[:, None] + log_probs).tolist()
        candidates = [(row[token], b, token) for b, row in enumerate(totals) for token in range(len(row))]
        sign = -1 if wrong == "tie_candidates" else 1
        candidates.sort(key=lambda c: (-c[0], sign * c[1], sign * c[2]))
        running = []
        for rank, (lp, b, token) in enumerate(candidates):
            if rank >= k and (wrong == "refill" or len(running) == k):
                break
            generated = beams[b][1] + [token]
            is_eos = token == eos_token_id
            if is_eos and rank < k:
                finished.append((lp / t**length_penalty, generated))
            if (is_eos and wrong != "eos_finishes") or len(running) == k:
                continue
            if t == max_new_tokens and wrong != "limit" and not is_eos:
                finished.append((lp / t**length_penalty, generated))
            running.append((lp, generated))
        if (wrong != "stop" and len(finished) >= k) or not running:
            break
        beams = running
    if wrong == "limit" and not finished and max_new_tokens:
        finished = [beams[0]]
    if not finished:
        return input_ids.clone()
    best = finished[0]
    for hypothesis in finished[1:]:
        if hypothesis[0] > best[0] or (wrong == "tie_result" and hypothesis[0] == best[0]):
            best = hypothesis
    return torch.tensor([prompt + best[1]], device=input_ids.device)


# What _beam_search_variant does with each clause it can break: the docstrings of its mutants.
_HOW_BEAM_SEARCH_GOES_WRONG = {
    "tie_candidates": "Ranks tied candidates by the later beam, then the higher token id, first.",
    "tie_result": "Of finished hypotheses with equal scores, returns the one that finished last.",
    "limit": "Scores only the hypotheses that end in eos (the best running beam when none did).",
    "eos_finishes": "A candidate ending in eos is scored but also stays among the running beams, which it extends.",
    "refill": "Only the unfinished candidates among the k best run on: finished ones are not replaced.",
    "stop": "Runs until max_new_tokens (or no beam runs), even when k hypotheses have finished.",
}


def _beam_search_wrong_in(clause):
    """The beam_search that is _beam_search_variant wrong in ``clause`` only."""
    def mutant(model, input_ids, **kwargs):
        return _beam_search_variant(model, input_ids, wrong=clause, **kwargs)
    mutant.__name__ = mutant.__qualname__ = f"beam_search_wrong_in_{clause}"
    mutant.__doc__ = _HOW_BEAM_SEARCH_GOES_WRONG[clause]
    return mutant


beam_search_later_tie_first = _beam_search_wrong_in("tie_candidates")
beam_search_last_equal_score_wins = _beam_search_wrong_in("tie_result")
beam_search_no_finish_at_limit = _beam_search_wrong_in("limit")
beam_search_finished_keep_running = _beam_search_wrong_in("eos_finishes")
beam_search_no_refill = _beam_search_wrong_in("refill")
beam_search_never_stops_early = _beam_search_wrong_in("stop")


def beam_search_decodes_first_row(model, input_ids, **kwargs):
    """Accepts a batch of prompts (and num_beams < 1) silently instead of raising ValueError."""
    return decoding.beam_search(model, input_ids[:1], **{**kwargs, "num_beams": max(kwargs["num_beams"], 1)})


def beam_search_without_prompt(model, input_ids, **kwargs):
    """Returns the generated tokens only."""
    return decoding.beam_search(model, input_ids, **kwargs)[:, input_ids.size(1):]


def sample_top_p_exclusive(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Top-p that keeps only tokens whose cumulative probability stays <= p (drops the one that crosses)."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = decoding.next_token_distribution(logits, temperature=temperature, top_k=top_k)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        keep_sorted = sorted_probs.cumsum(-1) <= top_p
        keep_sorted[..., 0] = True
        keep = keep_sorted.scatter(-1, order, keep_sorted)
        probs = probs * keep
        probs = probs / probs.sum(-1, keepdim=True)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def sample_ignores_temperature(logits, *, temperature=1.0, **kwargs):
    return decoding.sample_next_token(logits, temperature=0.0 if temperature == 0 else 1.0, **kwargs)


@torch.no_grad()
def _greedy_variant(model, input_ids, max_new_tokens, eos_token_id=None, *, wrong):
    """Greedy decoding of a batch of prompts, wrong in ``wrong``, an id of greedy_decode's clause table:
    "eos_padding" (finished rows are not padded with eos) or "early_stop" (no stop when every row is done)."""
    sequences = input_ids
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        next_token = model(input_ids=sequences).logits[:, -1].argmax(-1)
        if eos_token_id is not None:
            if wrong != "eos_padding":
                next_token = next_token.masked_fill(finished, eos_token_id)
            finished |= next_token == eos_token_id
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
        if finished.all() and wrong != "early_stop":
            break
    return sequences


def greedy_without_eos_padding(model, input_ids, max_new_tokens, eos_token_id=None):
    """Stops when every row has produced eos, but finished rows keep generating freely."""
    return _greedy_variant(model, input_ids, max_new_tokens, eos_token_id, wrong="eos_padding")


def greedy_never_stops_early(model, input_ids, max_new_tokens, eos_token_id=None):
    """Pads finished rows with eos, but always runs max_new_tokens steps."""
    return _greedy_variant(model, input_ids, max_new_tokens, eos_token_id, wrong="early_stop")


def beam_search_with_lists(model, input_ids, **kwargs):
    """Python lists of (log-probability, tokens), the candidates sorted with a tuple key."""
    return _beam_search_variant(model, input_ids, **kwargs)


@torch.no_grad()
def beam_search_with_heap(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0, eos_token_id=None):
    """One forward pass per beam, log-probabilities summed as Python floats (float64), the candidates
    chosen with a heap keyed by (-log-probability, beam, token)."""
    _check_beam_arguments(input_ids, num_beams)
    k, device = num_beams, input_ids.device
    beams = [(0.0, input_ids[0])]
    best = None  # (score, -finishing order, sequence)
    n_finished = 0
    for t in range(1, max_new_tokens + 1):
        candidates = []
        for b, (lp, sequence) in enumerate(beams):
            row = model(input_ids=sequence[None]).logits[0, -1].float().log_softmax(-1).tolist()
            candidates.extend((-(lp + x), b, token) for token, x in enumerate(row))
        running = []
        for rank, (neg_lp, b, token) in enumerate(heapq.nsmallest(k + len(beams), candidates)):
            sequence = torch.cat([beams[b][1], torch.tensor([token], device=device)])
            done = token == eos_token_id
            if done and rank >= k:
                continue
            if not done and len(running) < k:
                running.append((-neg_lp, sequence))
                done = t == max_new_tokens
            if done:
                n_finished += 1
                entry = (-neg_lp / t**length_penalty, -n_finished, sequence)
                if best is None or entry[:2] > best[:2]:
                    best = entry
        if n_finished >= k or not running:
            break
        beams = running
    return input_ids.clone() if best is None else best[2][None]


def sample_by_inverse_cdf(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = decoding.next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    cdf = probs.double().cumsum(-1)
    u = torch.rand(probs.size(0), 1, generator=generator, device=probs.device, dtype=torch.float64) * cdf[:, -1:]
    index = torch.searchsorted(cdf, u, right=True).squeeze(-1)
    last_possible = (probs > 0).long().cumsum(-1).argmax(-1)
    return torch.minimum(index, last_possible)


@torch.no_grad()
def greedy_with_kv_cache(model, input_ids, max_new_tokens, eos_token_id=None):
    sequences, past, step_input = input_ids, None, input_ids
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        out = model(input_ids=step_input, past_key_values=past, use_cache=True)
        past = out.past_key_values
        next_token = out.logits[:, -1].argmax(-1)
        if eos_token_id is not None:
            next_token = torch.where(finished, torch.full_like(next_token, eos_token_id), next_token)
            finished = finished | (next_token == eos_token_id)
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
        step_input = next_token[:, None]
        if bool(finished.all()):
            break
    return sequences


def beam_search_prompt_as_scratch(model, input_ids, **kwargs):
    """Decodes right, then reuses the caller's prompt tensor as scratch space (modifies input_ids)."""
    result = decoding.beam_search(model, input_ids, **kwargs)
    input_ids.add_(1)
    return result


def beam_search_one_beam_runs_past_eos(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0,
                                       eos_token_id=None):
    if num_beams == 1:  # wrong for one beam only: greedy decoding stops at eos
        eos_token_id = None
    return decoding.beam_search(model, input_ids, num_beams=num_beams, max_new_tokens=max_new_tokens,
                                length_penalty=length_penalty, eos_token_id=eos_token_id)


beam_search_on_cpu = _on_cpu(decoding.beam_search)


def sample_ignores_top_k(logits, *, top_k=None, **kwargs):
    return decoding.sample_next_token(logits, **kwargs)


def sample_top_p_before_temperature(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Chooses the nucleus from the untempered distribution, then applies the temperature."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    kept = decoding.next_token_distribution(logits, top_k=top_k, top_p=top_p) > 0
    probs = decoding.next_token_distribution(logits, temperature=temperature) * kept
    return torch.multinomial(probs / probs.sum(-1, keepdim=True), 1, generator=generator).squeeze(-1)


def sample_zero_temperature_samples(logits, *, temperature=1.0, **kwargs):
    return decoding.sample_next_token(logits, temperature=temperature or 1.0, **kwargs)


def sample_global_rng(logits, *, generator=None, **kwargs):
    return decoding.sample_next_token(logits, **kwargs)


def sample_keeps_sample_dim(logits, **kwargs):
    return decoding.sample_next_token(logits, **kwargs)[:, None]


def sample_without_argument_checks(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Clamps bad arguments into range instead of raising ValueError."""
    top_k = None if top_k is None else max(1, top_k)
    top_p = None if top_p is None else min(max(top_p, 0.0), 1.0)
    return decoding.sample_next_token(logits, temperature=abs(temperature), top_k=top_k, top_p=top_p,
                                      generator=generator)


sample_next_token_on_cpu = _on_cpu(decoding.sample_next_token)


def _sample_with_top_k(logits, keep_top_k, *, temperature, top_k, top_p, generator):
    """The reference sampler, with top-k done by ``keep_top_k(scores, k)``: the scores [B, V] with every
    token it drops at -inf."""
    if temperature < 0 or (top_k is not None and top_k < 1):
        raise ValueError("temperature must be >= 0 and top_k >= 1")
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits.float() / temperature
    if top_k is not None:
        scores = keep_top_k(scores, top_k)
    probs = decoding.next_token_distribution(scores, top_p=top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def _sample_with_kth_best(logits, kth_best, **kwargs):
    """The reference sampler, with top-k's threshold taken from ``kth_best(scores, k)`` [B, 1]."""
    return _sample_with_top_k(
        logits, lambda scores, k: scores.masked_fill(scores < kth_best(scores, k), float("-inf")), **kwargs)


def sample_top_k_by_topk(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """minGPT's top-k: the threshold is the last of torch.topk(scores, k), which fails for k > V."""
    return _sample_with_kth_best(logits, lambda scores, k: torch.topk(scores, k, dim=-1).values[:, [-1]],
                                 temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)


def sample_top_k_from_ascending_sort(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """The k-th highest score read at position V - k of the ascending sort: for V < k < 2 V the index
    is negative, wraps round to a middle score, and tokens are dropped without an error."""
    return _sample_with_kth_best(logits, lambda scores, k: scores.sort(dim=-1).values[:, [scores.size(-1) - k]],
                                 temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)


def sample_top_k_exactly_k(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Keeps exactly the k tokens whose indices torch.topk returns: of the tokens tied with the k-th
    highest score, only those topk happened to pick survive."""
    def keep_topk_indices(scores, k):
        chosen = scores.topk(min(k, scores.size(-1)), dim=-1).indices
        return torch.full_like(scores, float("-inf")).scatter(-1, chosen, scores.gather(-1, chosen))
    return _sample_with_top_k(logits, keep_topk_indices,
                              temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)


def sample_greedy_ties_to_highest_id(logits, *, temperature=1.0, **kwargs):
    """At temperature 0, of the tied highest scores the last one (the highest id) instead of the first."""
    if temperature == 0:
        return logits.size(-1) - 1 - logits.flip(-1).argmax(dim=-1)
    return decoding.sample_next_token(logits, temperature=temperature, **kwargs)


def sample_seeds_its_own_generator(logits, *, generator=None, **kwargs):
    """With generator=None, a generator of its own, seeded once with a fixed seed, instead of PyTorch's
    global one: the global seed then makes no difference."""
    if generator is None:
        generator = torch.Generator(device=logits.device).manual_seed(0)
    return decoding.sample_next_token(logits, generator=generator, **kwargs)


def sample_top_p_zero_is_off(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """The widely copied top_k_top_p_filtering, where top_p = 0.0 (its default) means "no nucleus":
    p = 0 then samples from every token instead of taking the most likely one."""
    return decoding.sample_next_token(logits, temperature=temperature, top_k=top_k,
                                      top_p=top_p if top_p != 0 else None, generator=generator)


@torch.no_grad()
def greedy_reads_first_position(model, input_ids, max_new_tokens, eos_token_id=None):
    sequences = input_ids
    for _ in range(max_new_tokens):
        next_token = model(input_ids=sequences).logits[:, 0].argmax(-1)
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
    return sequences


def greedy_at_least_one_token(model, input_ids, max_new_tokens, eos_token_id=None):
    return decoding.greedy_decode(model, input_ids, max(1, max_new_tokens), eos_token_id)


def greedy_new_tokens_only(model, input_ids, max_new_tokens, eos_token_id=None):
    return decoding.greedy_decode(model, input_ids, max_new_tokens, eos_token_id)[:, input_ids.size(1):]


greedy_decode_on_cpu = _on_cpu(decoding.greedy_decode)


def sample_by_gumbel_max(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """argmax(log p + Gumbel noise) draws from p exactly."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = decoding.next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    u = torch.rand(probs.shape, generator=generator, device=probs.device, dtype=torch.float64)
    return (probs.double().log() - (-u.log()).log()).argmax(dim=-1)


def sample_by_descending_nucleus(logits, *, temperature=1.0, top_k=None, top_p=None, generator=None):
    """Its own filters: top-k's threshold from a descending sort with k clamped to V, and the
    nucleus on the descending order, keeping a token while the mass ranked above it is < p."""
    if temperature < 0 or (top_k is not None and top_k < 1) or (top_p is not None and not 0 <= top_p <= 1):
        raise ValueError("temperature >= 0, top_k >= 1 and top_p in [0, 1]")
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits.float() / temperature
    if top_k is not None:
        descending = scores.sort(dim=-1, descending=True).values
        scores = scores.masked_fill(scores < descending[:, [min(top_k, scores.size(-1)) - 1]], float("-inf"))
    if top_p is not None:
        probs, order = scores.softmax(dim=-1).sort(dim=-1, descending=True)
        keep = probs.cumsum(dim=-1) - probs < top_p
        keep[:, 0] = True
        scores = scores.masked_fill(~keep.scatter(-1, order, keep), float("-inf"))
    return torch.multinomial(scores.softmax(dim=-1), 1, generator=generator).squeeze(-1)


@torch.no_grad()
def greedy_row_by_row(model, input_ids, max_new_tokens, eos_token_id=None):
    """Each prompt decoded alone, the finished ones padded with eos to the longest."""
    rows = []
    for prompt in input_ids:
        sequence = prompt[None]
        for _ in range(max_new_tokens):
            next_token = model(input_ids=sequence).logits[0, -1].argmax()
            sequence = torch.cat([sequence, next_token.view(1, 1)], dim=1)
            if eos_token_id is not None and int(next_token) == eos_token_id:
                break
        rows.append(sequence[0])
    width = max(len(row) for row in rows)
    pad = eos_token_id if eos_token_id is not None else 0
    return torch.stack([torch.cat([row, row.new_full((width - len(row),), pad)]) for row in rows])


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"sample_next_token": sample_top_p_exclusive, "greedy_decode": greedy_without_eos_padding,
         "beam_search": beam_search_greedy_path},
    {"sample_next_token": sample_ignores_temperature, "greedy_decode": greedy_never_stops_early,
         "beam_search": beam_search_no_length_penalty},
    {"beam_search": beam_search_later_tie_first},
    {"beam_search": beam_search_last_equal_score_wins},
    {"beam_search": beam_search_no_finish_at_limit},
    {"beam_search": beam_search_finished_keep_running},
    {"beam_search": beam_search_no_refill},
    {"beam_search": beam_search_never_stops_early},
    {"beam_search": beam_search_without_prompt},
    {"beam_search": beam_search_decodes_first_row},
    {"sample_next_token": sample_top_k_from_ascending_sort},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"sample_next_token": sample_by_inverse_cdf, "greedy_decode": greedy_with_kv_cache,
         "beam_search": beam_search_with_lists},
    {"beam_search": beam_search_with_heap},
    {"sample_next_token": sample_by_gumbel_max, "greedy_decode": greedy_row_by_row},
    {"sample_next_token": sample_by_descending_nucleus},
]
