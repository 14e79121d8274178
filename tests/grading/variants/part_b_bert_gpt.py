"""Stand-in students for the hidden suite of Part B (BERT and GPT)."""
from __future__ import annotations

import heapq
import math

import torch
import torch.nn.functional as F

from autograder.reference import arithmetic, attention, decoding, losses, masking, sentence_pairs


# ---------------------------------------------------------------- wrong: mask_tokens, one clause each
def mask_tokens_selects_specials(input_ids, *, special_token_ids, **kwargs):
    return masking.mask_tokens(input_ids, special_token_ids=[], **kwargs)


def mask_tokens_never_keeps(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                            generator=None):
    """80 % [MASK], 20 % random, never left unchanged."""
    device = input_ids.device
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    p = torch.full(input_ids.shape, mlm_probability, device=device).masked_fill(special, 0.0)
    selected = torch.bernoulli(p, generator=generator).bool()
    to_mask = torch.bernoulli(torch.full(input_ids.shape, 0.8, device=device), generator=generator).bool() & selected
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device, dtype=input_ids.dtype)
    masked = torch.where(selected & ~to_mask, random_ids, input_ids.masked_fill(to_mask, mask_token_id))
    return masked, input_ids.masked_fill(~selected, -100)


def mask_tokens_global_rng(input_ids, *, generator=None, **kwargs):
    return masking.mask_tokens(input_ids, generator=None, **kwargs)


def mask_tokens_reseeds(input_ids, *, generator=None, **kwargs):
    """Deterministic, but from a generator of its own: every generator state gives the same output."""
    return masking.mask_tokens(input_ids, generator=torch.Generator(input_ids.device).manual_seed(0), **kwargs)


def mask_tokens_fixed_outcome_draws(input_ids, *, mask_token_id, vocab_size, special_token_ids,
                                    mlm_probability=0.15, generator=None):
    """Selection from the generator, but the 80/10/10 choice and the random ids from a fixed seed."""
    common = dict(mask_token_id=mask_token_id, vocab_size=vocab_size, special_token_ids=special_token_ids)
    _, labels = masking.mask_tokens(input_ids, mlm_probability=mlm_probability, generator=generator, **common)
    fixed = torch.Generator(input_ids.device).manual_seed(0)
    everywhere, _ = masking.mask_tokens(input_ids, mlm_probability=1.0, generator=fixed, **common)
    return torch.where(labels != -100, everywhere, input_ids), labels


def mask_tokens_modifies_input(input_ids, **kwargs):
    masked, labels = masking.mask_tokens(input_ids, **kwargs)
    input_ids.copy_(masked)
    return input_ids, labels


def mask_tokens_labels_zero(input_ids, **kwargs):
    """Fills the labels of unselected positions with 0 instead of -100."""
    masked, labels = masking.mask_tokens(input_ids, **kwargs)
    return masked, labels.masked_fill(labels == -100, 0)


def mask_tokens_labels_int32(input_ids, **kwargs):
    masked, labels = masking.mask_tokens(input_ids, **kwargs)
    return masked, labels.to(torch.int32 if input_ids.dtype != torch.int32 else torch.int64)


def mask_tokens_random_ids_low_half(input_ids, *, vocab_size, **kwargs):
    """Random replacements drawn from [0, vocab_size / 2) only."""
    masked, labels = masking.mask_tokens(input_ids, vocab_size=vocab_size, **kwargs)
    ceiling = vocab_size // 2
    random = (labels != -100) & (masked != labels) & (masked != kwargs["mask_token_id"]) & (masked >= ceiling)
    return torch.where(random, masked - ceiling, masked), labels


def mask_tokens_skips_after_specials(input_ids, *, special_token_ids, **kwargs):
    """Also treats the token right after a special token as special (an off-by-one special mask)."""
    masked, labels = masking.mask_tokens(input_ids, special_token_ids=special_token_ids, **kwargs)
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=input_ids.device))
    after = torch.zeros_like(special)
    after[:, 1:] = special[:, :-1]
    return torch.where(after, input_ids, masked), labels.masked_fill(after, -100)


def mask_tokens_ignores_probability(input_ids, *, mlm_probability=0.15, **kwargs):
    return masking.mask_tokens(input_ids, mlm_probability=0.15, **kwargs)


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
                         tie_later_first=False, last_equal_wins=False, finish_at_limit=True,
                         finished_keep_running=False, refill=True, stop_early=True):
    """The textbook beam search with explicit Python lists, with switches that break one clause each."""
    _check_beam_arguments(input_ids, num_beams)
    k, prompt = num_beams, input_ids[0].tolist()
    beams = [(0.0, [])]  # (log-probability, generated tokens), best first
    finished = []  # (score, generated tokens), in finishing order
    for t in range(1, max_new_tokens + 1):
        log_probs = model(input_ids=torch.tensor([prompt + g for _, g in beams], device=input_ids.device)
                          ).logits[:, -1].float().log_softmax(-1)
        totals = (torch.tensor([lp for lp, _ in beams], device=input_ids.device)[:, None] + log_probs).tolist()
        candidates = [(row[token], b, token) for b, row in enumerate(totals) for token in range(len(row))]
        sign = -1 if tie_later_first else 1
        candidates.sort(key=lambda c: (-c[0], sign * c[1], sign * c[2]))
        running = []
        for rank, (lp, b, token) in enumerate(candidates):
            if rank >= k and (not refill or len(running) == k):
                break
            generated = beams[b][1] + [token]
            is_eos = token == eos_token_id
            if is_eos and rank < k:
                finished.append((lp / t**length_penalty, generated))
            if (is_eos and not finished_keep_running) or len(running) == k:
                continue
            if t == max_new_tokens and finish_at_limit and not is_eos:
                finished.append((lp / t**length_penalty, generated))
            running.append((lp, generated))
        if (stop_early and len(finished) >= k) or not running:
            break
        beams = running
    if not finish_at_limit and not finished and max_new_tokens:
        finished = [beams[0]]
    if not finished:
        return input_ids.clone()
    best = finished[0]
    for hypothesis in finished[1:]:
        if hypothesis[0] > best[0] or (last_equal_wins and hypothesis[0] == best[0]):
            best = hypothesis
    return torch.tensor([prompt + best[1]], device=input_ids.device)


def beam_search_later_tie_first(model, input_ids, **kwargs):
    """Ranks tied candidates by the later beam, then the higher token id, first."""
    return _beam_search_variant(model, input_ids, tie_later_first=True, **kwargs)


def beam_search_last_equal_score_wins(model, input_ids, **kwargs):
    """Of finished hypotheses with equal scores, returns the one that finished last."""
    return _beam_search_variant(model, input_ids, last_equal_wins=True, **kwargs)


def beam_search_no_finish_at_limit(model, input_ids, **kwargs):
    """Scores only the hypotheses that end in eos (the best running beam when none did)."""
    return _beam_search_variant(model, input_ids, finish_at_limit=False, **kwargs)


def beam_search_finished_keep_running(model, input_ids, **kwargs):
    """A candidate ending in eos is scored but also stays among the running beams, which it extends."""
    return _beam_search_variant(model, input_ids, finished_keep_running=True, **kwargs)


def beam_search_no_refill(model, input_ids, **kwargs):
    """Only the unfinished candidates among the k best run on: finished ones are not replaced."""
    return _beam_search_variant(model, input_ids, refill=False, **kwargs)


def beam_search_never_stops_early(model, input_ids, **kwargs):
    """Runs until max_new_tokens (or no beam runs), even when k hypotheses have finished."""
    return _beam_search_variant(model, input_ids, stop_early=False, **kwargs)


def beam_search_decodes_first_row(model, input_ids, **kwargs):
    """Accepts a batch of prompts (and num_beams < 1) silently instead of raising ValueError."""
    return decoding.beam_search(model, input_ids[:1], **{**kwargs, "num_beams": max(kwargs["num_beams"], 1)})


def beam_search_without_prompt(model, input_ids, **kwargs):
    """Returns the generated tokens only."""
    return decoding.beam_search(model, input_ids, **kwargs)[:, input_ids.size(1):]


# ---------------------------------------------------------------- wrong: the other functions
def mlm_signal_inverted(n_tokens, mask_rate=0.15):
    result = arithmetic.mlm_signal(n_tokens, mask_rate)
    return {**result, "passes_for_equal_signal": mask_rate}


def softmax_unstable(x, dim=-1):
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def softmax_upcasts_for_good(x, dim=-1):
    """Right values, but float16/bfloat16 inputs come back as float32."""
    return attention.softmax(x.float(), dim=dim)


def causal_mask_transposed(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).triu()


def attention_unscaled(q, k, v, **kwargs):
    return attention.scaled_dot_product_attention(q * math.sqrt(q.size(-1)), k, v, **kwargs)


def attention_nan_rows(q, k, v, *, causal=False, padding_mask=None):
    """Masks with -inf but does not handle queries that see no key (0/0 = NaN)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        scores = scores.masked_fill(~attention.causal_mask(q.size(-2), device=q.device), float("-inf"))
    if padding_mask is not None:
        keys = padding_mask.view(padding_mask.size(0), *([1] * (q.dim() - 2)), -1)
        scores = scores.masked_fill(~keys, float("-inf"))
    weights = attention.softmax(scores)
    return weights @ v, weights


def attention_connections_off_by_one(n, causal):
    return n * (n - 1) // 2 if causal else n * n


CAT_NEXT_WORD_PROBS_WITHOUT_EXP = {w: x / 5.5 for w, x in zip(["sat", "ran", "jumped", "slept"], [2.5, 1.0, 0.5, 1.5])}


def clm_loss_unshifted(logits, input_ids, attention_mask=None):
    labels = input_ids if attention_mask is None else input_ids.masked_fill(attention_mask == 0, -100)
    return losses.mlm_loss(logits, labels)


def clm_loss_nan_when_empty(logits, input_ids, attention_mask=None):
    targets = input_ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, 1:] == 0, -100)
    return F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-100)


def mlm_loss_over_all_positions(logits, labels):
    """Divides by every position instead of the labelled ones."""
    flat = logits.float().reshape(-1, logits.size(-1))
    total = F.cross_entropy(flat, labels.reshape(-1), ignore_index=-100, reduction="sum")
    return total / labels.numel()


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
def greedy_without_eos_padding(model, input_ids, max_new_tokens, eos_token_id=None):
    """Stops when every row has produced eos, but finished rows keep generating freely."""
    sequences = input_ids
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        next_token = model(input_ids=sequences).logits[:, -1].argmax(-1)
        if eos_token_id is not None:
            finished |= next_token == eos_token_id
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
        if finished.all():
            break
    return sequences


@torch.no_grad()
def greedy_never_stops_early(model, input_ids, max_new_tokens, eos_token_id=None):
    """Pads finished rows with eos, but always runs max_new_tokens steps."""
    sequences = input_ids
    finished = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
    for _ in range(max_new_tokens):
        next_token = model(input_ids=sequences).logits[:, -1].argmax(-1)
        if eos_token_id is not None:
            next_token = next_token.masked_fill(finished, eos_token_id)
            finished |= next_token == eos_token_id
        sequences = torch.cat([sequences, next_token[:, None]], dim=1)
    return sequences


# ---------------------------------------------------------------- correct, written differently
def softmax_via_logsumexp(x, dim=-1):
    z = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (z - z.logsumexp(dim=dim, keepdim=True)).exp().to(x.dtype)


def mask_tokens_one_uniform(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                            generator=None):
    """One uniform per position decides everything: u < p selects; below 0.8 p [MASK], below 0.9 p random."""
    device, p = input_ids.device, mlm_probability
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    u = torch.rand(input_ids.shape, generator=generator, device=device)
    selected = (u < p) & ~special
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device, dtype=input_ids.dtype)
    masked = torch.where(selected & (u < 0.8 * p), torch.full_like(input_ids, mask_token_id), input_ids)
    masked = torch.where(selected & (u >= 0.8 * p) & (u < 0.9 * p), random_ids, masked)
    return masked, input_ids.masked_fill(~selected, -100)


def mask_tokens_multinomial(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                            generator=None):
    """One categorical draw per position over (not selected, [MASK], random, unchanged); random ids only
    where needed, in row-major order."""
    device, p = input_ids.device, mlm_probability
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    probs = torch.tensor([1 - p, 0.8 * p, 0.1 * p, 0.1 * p], device=device).expand(input_ids.numel(), 4)
    outcome = torch.multinomial(probs, 1, generator=generator).view(input_ids.shape)
    outcome = outcome.masked_fill(special, 0)
    masked = input_ids.clone()
    masked[outcome == 1] = mask_token_id
    swap = outcome == 2
    masked[swap] = torch.randint(vocab_size, (int(swap.sum()),), generator=generator, device=device,
                                 dtype=input_ids.dtype)
    labels = torch.full_like(input_ids, -100)
    labels[outcome > 0] = input_ids[outcome > 0]
    return masked, labels


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


def mask_tokens_with_uniforms(input_ids, *, mask_token_id, vocab_size, special_token_ids, mlm_probability=0.15,
                              generator=None):
    """Two uniforms per position instead of three Bernoulli grids."""
    device = input_ids.device
    special = torch.isin(input_ids, torch.as_tensor(list(special_token_ids), device=device))
    u = torch.rand(input_ids.shape, generator=generator, device=device)
    v = torch.rand(input_ids.shape, generator=generator, device=device)
    selected = (u < mlm_probability) & ~special
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device, dtype=input_ids.dtype)
    masked = input_ids.clone()
    masked[selected & (v < 0.8)] = mask_token_id
    swap = selected & (v >= 0.8) & (v < 0.9)
    masked[swap] = random_ids[swap]
    return masked, torch.where(selected, input_ids, torch.full_like(input_ids, -100))


def attention_in_float32(q, k, v, **kwargs):
    output, weights = attention.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kwargs)
    return output.to(q.dtype), weights.to(q.dtype)


def clm_loss_by_hand(logits, input_ids, attention_mask=None):
    log_probs = logits.float().log_softmax(-1)[:, :-1]
    picked = log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    weight = torch.ones_like(picked) if attention_mask is None else attention_mask[:, 1:].float()
    return -(picked * weight).sum() / weight.sum().clamp(min=1)


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


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"mask_tokens": mask_tokens_selects_specials, "mlm_signal": mlm_signal_inverted,
     "softmax": softmax_unstable, "causal_mask": causal_mask_transposed,
     "scaled_dot_product_attention": attention_unscaled,
     "attention_connections": attention_connections_off_by_one,
     "CAT_NEXT_WORD_PROBS": CAT_NEXT_WORD_PROBS_WITHOUT_EXP, "clm_loss": clm_loss_unshifted,
     "mlm_loss": mlm_loss_over_all_positions, "sample_next_token": sample_top_p_exclusive,
     "greedy_decode": greedy_without_eos_padding, "beam_search": beam_search_greedy_path},
    {"mask_tokens": mask_tokens_never_keeps, "softmax": softmax_upcasts_for_good,
     "scaled_dot_product_attention": attention_nan_rows, "clm_loss": clm_loss_nan_when_empty,
     "sample_next_token": sample_ignores_temperature, "greedy_decode": greedy_never_stops_early,
     "beam_search": beam_search_no_length_penalty},
    {"mask_tokens": mask_tokens_global_rng, "beam_search": beam_search_later_tie_first},
    {"mask_tokens": mask_tokens_reseeds, "beam_search": beam_search_last_equal_score_wins},
    {"mask_tokens": mask_tokens_fixed_outcome_draws, "beam_search": beam_search_no_finish_at_limit},
    {"mask_tokens": mask_tokens_modifies_input, "beam_search": beam_search_finished_keep_running},
    {"mask_tokens": mask_tokens_labels_zero, "beam_search": beam_search_no_refill},
    {"mask_tokens": mask_tokens_labels_int32, "beam_search": beam_search_never_stops_early},
    {"mask_tokens": mask_tokens_random_ids_low_half, "beam_search": beam_search_without_prompt},
    {"mask_tokens": mask_tokens_skips_after_specials, "beam_search": beam_search_decodes_first_row},
    {"mask_tokens": mask_tokens_ignores_probability},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"softmax": softmax_via_logsumexp, "mask_tokens": mask_tokens_with_uniforms,
     "scaled_dot_product_attention": attention_in_float32, "clm_loss": clm_loss_by_hand,
     "sample_next_token": sample_by_inverse_cdf, "greedy_decode": greedy_with_kv_cache,
     "beam_search": beam_search_with_lists},
    {"mask_tokens": mask_tokens_one_uniform, "beam_search": beam_search_with_heap},
    {"mask_tokens": mask_tokens_multinomial},
]

# The worked example's answer constant has no reference module: the reference computes it.
EXTRA_NAMESPACE: dict[str, object] = {"CAT_NEXT_WORD_PROBS": arithmetic.softmax_worked_example()}


# ---------------------------------------------------------------- wrong in one clause each
# Named by the clause tables (autograder/reference/clauses/part_b_bert_gpt.toml).
def _on_cpu(function):
    """``function`` with its tensors moved to the CPU: wrong only where the result must stay on a GPU."""
    def moved(*args, **kwargs):
        result = function(*args, **kwargs)
        return tuple(r.cpu() for r in result) if isinstance(result, tuple) else result.cpu()
    return moved


def mask_tokens_seeds_its_own_generator(input_ids, *, generator=None, **kwargs):
    """With generator=None, a generator of its own with a fixed seed instead of PyTorch's global one."""
    if generator is None:
        generator = torch.Generator(device=input_ids.device).manual_seed(0)
    return masking.mask_tokens(input_ids, generator=generator, **kwargs)


def attention_connections_rejects_no_tokens(n, causal):
    """An argument check one too strict: n = 0 (no tokens, no pairs) raises."""
    if n < 1:
        raise ValueError("n must be positive")
    return attention.attention_connections(n, causal)


def beam_search_prompt_as_scratch(model, input_ids, **kwargs):
    """Decodes right, then reuses the caller's prompt tensor as scratch space (modifies input_ids)."""
    result = decoding.beam_search(model, input_ids, **kwargs)
    input_ids.add_(1)
    return result


def mlm_signal_whole_predictions(n_tokens, mask_rate=0.15):
    result = arithmetic.mlm_signal(n_tokens, mask_rate)
    return {**result, "mlm_predictions": int(result["mlm_predictions"])}


def mlm_signal_minus_one(n_tokens, mask_rate=0.15):
    return {**arithmetic.mlm_signal(n_tokens, mask_rate), "clm_predictions": n_tokens - 1}


def mlm_signal_fixed_rate(n_tokens, mask_rate=0.15):
    return arithmetic.mlm_signal(n_tokens)


def softmax_last_dim_only(x, dim=-1):
    return attention.softmax(x, dim=-1)


softmax_on_cpu = _on_cpu(attention.softmax)
CAT_NEXT_WORD_PROBS_MISSING_WORD = {w: p for w, p in arithmetic.softmax_worked_example().items() if w != "slept"}


def causal_mask_as_int(n, device=None):
    return attention.causal_mask(n, device=device).long()


def causal_mask_without_diagonal(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril(-1)


def beam_search_one_beam_runs_past_eos(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0,
                                       eos_token_id=None):
    if num_beams == 1:  # wrong for one beam only: greedy decoding stops at eos
        eos_token_id = None
    return decoding.beam_search(model, input_ids, num_beams=num_beams, max_new_tokens=max_new_tokens,
                                length_penalty=length_penalty, eos_token_id=eos_token_id)


def mask_tokens_changes_unselected(input_ids, **kwargs):
    masked, labels = masking.mask_tokens(input_ids, **kwargs)
    unselected = labels == masking.IGNORE_INDEX
    masked = masked.clone()
    masked[unselected & (masked > 4)] -= 1  # an ordinary unselected token is not kept as it was
    return masked, labels


beam_search_on_cpu = _on_cpu(decoding.beam_search)


def causal_mask_on_cpu(n, device=None):
    return attention.causal_mask(n)


def attention_ignores_causal(q, k, v, *, causal=False, padding_mask=None):
    return attention.scaled_dot_product_attention(q, k, v, padding_mask=padding_mask)


def attention_causal_rectangular(q, k, v, *, causal=False, padding_mask=None):
    """Applies the lower triangle of a [Tq, Tk] matrix instead of refusing Tq != Tk."""
    if not causal or q.size(-2) == k.size(-2):
        return attention.scaled_dot_product_attention(q, k, v, causal=causal, padding_mask=padding_mask)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    visible = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
    weights = attention.softmax(scores.masked_fill(~visible, float("-inf")))
    return weights @ v, weights


def attention_padding_over_queries(q, k, v, *, causal=False, padding_mask=None):
    """Blanks the padded queries' rows instead of the padded keys' columns."""
    output, weights = attention.scaled_dot_product_attention(q, k, v, causal=causal)
    if padding_mask is None:
        return output, weights
    real = padding_mask.to(q.device).reshape(padding_mask.size(0), *([1] * (q.dim() - 2)), -1)[..., None]
    return output * real, weights * real


def attention_padding_overrides_causal(q, k, v, *, causal=False, padding_mask=None):
    return attention.scaled_dot_product_attention(q, k, v, causal=causal and padding_mask is None,
                                                  padding_mask=padding_mask)


def attention_assumes_heads(q, k, v, *, causal=False, padding_mask=None):
    """Reshapes the padding mask to [B, 1, 1, Tk], right only for 4-D inputs."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    visible = torch.ones_like(scores, dtype=torch.bool)
    if causal:
        visible = visible & attention.causal_mask(q.size(-2), device=q.device)
    if padding_mask is not None:
        visible = visible & padding_mask.to(q.device)[:, None, None, :]
    sees = visible.any(-1, keepdim=True)
    weights = attention.softmax(scores.masked_fill(~visible, float("-inf")).masked_fill(~sees, 0.0))
    weights = weights.masked_fill(~visible, 0.0)
    return weights @ v, weights


def attention_returns_float32(q, k, v, **kwargs):
    output, weights = attention.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kwargs)
    return output, weights


def attention_returns_scores(q, k, v, **kwargs):
    output, _ = attention.scaled_dot_product_attention(q, k, v, **kwargs)
    return output, q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


attention_on_cpu = _on_cpu(attention.scaled_dot_product_attention)


def attention_connections_bidirectional_without_self(n, causal):
    return n * (n + 1) // 2 if causal else n * (n - 1)


def _naive_log_softmax(x):
    e = torch.exp(x)
    return torch.log(e / e.sum(-1, keepdim=True))


def clm_loss_ignores_mask(logits, input_ids, attention_mask=None):
    return losses.clm_loss(logits, input_ids)


def clm_loss_mean_of_sequences(logits, input_ids, attention_mask=None):
    """Every sequence weighs the same, not every token."""
    rows = [losses.clm_loss(logits[b:b + 1], input_ids[b:b + 1],
                            None if attention_mask is None else attention_mask[b:b + 1])
            for b in range(logits.size(0))]
    return torch.stack(rows).mean()


def clm_loss_mask_of_inputs(logits, input_ids, attention_mask=None):
    """Masks a target when the token that predicts it is padding (attention_mask[:, :-1])."""
    targets = input_ids[:, 1:]
    if attention_mask is not None:
        targets = targets.masked_fill(attention_mask[:, :-1] == 0, -100)
    return losses.mlm_loss(logits[:, :-1], targets)


def clm_loss_naive_softmax(logits, input_ids, attention_mask=None):
    log_probs = _naive_log_softmax(logits.float())[:, :-1]
    picked = log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1)
    weight = torch.ones_like(picked) if attention_mask is None else attention_mask[:, 1:].float()
    return -(picked * weight).sum() / weight.sum().clamp(min=1)


def clm_loss_in_input_dtype(logits, input_ids, attention_mask=None):
    log_probs = logits.log_softmax(-1)[:, :-1]
    picked = log_probs.gather(-1, input_ids[:, 1:, None]).squeeze(-1).float()
    weight = torch.ones_like(picked) if attention_mask is None else attention_mask[:, 1:].float()
    return -(picked * weight).sum() / weight.sum().clamp(min=1)


def clm_loss_as_float(logits, input_ids, attention_mask=None):
    return float(losses.clm_loss(logits, input_ids, attention_mask))


clm_loss_on_cpu = _on_cpu(losses.clm_loss)


def mlm_loss_batched_only(logits, labels):
    """Flattens the first two dimensions: right for [B, T, V], wrong for [N, V]."""
    return losses.mlm_loss(logits.flatten(0, 1), labels.flatten(0, 1) if labels.dim() > 1 else labels)


def mlm_loss_nan_when_empty(logits, labels):
    return F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100)


def mlm_loss_naive_softmax(logits, labels):
    flat, targets = _naive_log_softmax(logits.float().reshape(-1, logits.size(-1))), labels.reshape(-1)
    chosen = targets != -100
    return -flat[chosen].gather(-1, targets[chosen, None]).sum() / chosen.sum().clamp(min=1)


def mlm_loss_in_input_dtype(logits, labels):
    flat, targets = logits.reshape(-1, logits.size(-1)).log_softmax(-1), labels.reshape(-1)
    chosen = targets != -100
    return -flat[chosen].gather(-1, targets[chosen, None]).float().sum() / chosen.sum().clamp(min=1)


mlm_loss_on_cpu = _on_cpu(losses.mlm_loss)


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


def _sample_with_kth_best(logits, kth_best, *, temperature, top_k, top_p, generator):
    """The reference sampler, with top-k's threshold taken from ``kth_best(scores, k)`` [B, 1]."""
    if temperature < 0 or (top_k is not None and top_k < 1):
        raise ValueError("temperature must be >= 0 and top_k >= 1")
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits.float() / temperature
    if top_k is not None:
        scores = scores.masked_fill(scores < kth_best(scores, top_k), float("-inf"))
    probs = decoding.next_token_distribution(scores, top_p=top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


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
    if temperature < 0 or (top_k is not None and top_k < 1):
        raise ValueError("temperature must be >= 0 and top_k >= 1")
    if temperature == 0:
        return logits.argmax(dim=-1)
    scores = logits.float() / temperature
    if top_k is not None:
        chosen = scores.topk(min(top_k, scores.size(-1)), dim=-1).indices
        scores = torch.full_like(scores, float("-inf")).scatter(-1, chosen, scores.gather(-1, chosen))
    probs = decoding.next_token_distribution(scores, top_p=top_p)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


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


# ---------------------------------------------------------------- more correct ones, written differently
def mlm_signal_by_rates(n_tokens, mask_rate=0.15):
    return {"mlm_predictions": n_tokens * mask_rate, "clm_predictions": n_tokens,
            "passes_for_equal_signal": 1 / mask_rate}


def mlm_signal_by_ratio(n_tokens, mask_rate=0.15):
    masked = mask_rate * n_tokens
    return {"passes_for_equal_signal": n_tokens / masked, "clm_predictions": n_tokens, "mlm_predictions": masked}


def softmax_in_float64(x, dim=-1):
    """Moves dim last, computes in float64 (float32 for half inputs is not needed then), moves it back."""
    z = x.double().movedim(dim, -1)
    e = (z - z.max(dim=-1, keepdim=True).values).exp()
    return (e / e.sum(-1, keepdim=True)).movedim(-1, dim).to(x.dtype)


def causal_mask_by_comparison(n, device=None):
    positions = torch.arange(n, device=device)
    return positions[:, None] >= positions[None, :]


def causal_mask_by_rows(n, device=None):
    return torch.tensor([[j <= i for j in range(n)] for i in range(n)], dtype=torch.bool, device=device).reshape(n, n)


def attention_by_einsum(q, k, v, *, causal=False, padding_mask=None):
    """einsum scores, masks by index comparison, NaN rows (nothing visible) zeroed after the softmax."""
    t_q, t_k = q.size(-2), k.size(-2)
    scores = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(q.size(-1))
    if causal:
        if t_q != t_k:
            raise ValueError("causal attention needs Tq == Tk")
        future = torch.arange(t_k, device=q.device)[None, :] > torch.arange(t_q, device=q.device)[:, None]
        scores = scores.masked_fill(future, float("-inf"))
    if padding_mask is not None:
        real = padding_mask.to(device=q.device, dtype=torch.bool)
        real = real.view(real.size(0), *([1] * (q.dim() - 2)), t_k)
        scores = scores.masked_fill(~real, float("-inf"))
    weights = attention.softmax(scores).nan_to_num(0.0)
    return weights @ v, weights


def attention_connections_by_counting(n, causal):
    return sum(i + 1 for i in range(n)) if causal else sum(n for _ in range(n))


def attention_connections_by_complement(n, causal):
    return n * n - n * (n - 1) // 2 if causal else n ** 2


def clm_loss_per_token(logits, input_ids, attention_mask=None):
    v = logits.size(-1)
    per_token = F.cross_entropy(logits[:, :-1].float().reshape(-1, v), input_ids[:, 1:].reshape(-1), reduction="none")
    weight = (torch.ones_like(per_token) if attention_mask is None
              else attention_mask[:, 1:].reshape(-1).to(per_token.dtype))
    return (per_token * weight).sum() / weight.sum().clamp(min=1)


def mlm_loss_by_logsumexp(logits, labels):
    x, y = logits.float().reshape(-1, logits.size(-1)), labels.reshape(-1)
    chosen = y != -100
    x, y = x[chosen], y[chosen]
    return (x.logsumexp(-1) - x.gather(-1, y[:, None]).squeeze(-1)).sum() / chosen.sum().clamp(min=1)


def mlm_loss_by_nll(logits, labels):
    log_probs = logits.float().reshape(-1, logits.size(-1)).log_softmax(-1)
    total = F.nll_loss(log_probs, labels.reshape(-1), ignore_index=-100, reduction="sum")
    return total / (labels != -100).sum().clamp(min=1)


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


ALTERNATIVES += [
    {"mlm_signal": mlm_signal_by_rates, "softmax": softmax_in_float64, "causal_mask": causal_mask_by_comparison,
     "scaled_dot_product_attention": attention_by_einsum, "attention_connections": attention_connections_by_counting,
     "clm_loss": clm_loss_per_token, "mlm_loss": mlm_loss_by_logsumexp, "sample_next_token": sample_by_gumbel_max,
     "greedy_decode": greedy_row_by_row},
    {"mlm_signal": mlm_signal_by_ratio, "causal_mask": causal_mask_by_rows,
     "attention_connections": attention_connections_by_complement, "mlm_loss": mlm_loss_by_nll,
     "sample_next_token": sample_by_descending_nucleus},
]


# ---------------------------------------------------------------- bert_pair_input and make_nsp_pairs
def bert_pair_input_by_arithmetic(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """Correct: the kept lengths as a min/max formula, one tensor per output by concatenation."""
    if not tokens_a or not tokens_b or max_length < 5:
        raise ValueError("two non-empty segments and max_length >= 5")
    room = max_length - 3
    n_a, n_b = len(tokens_a), len(tokens_b)
    if n_a + n_b > room:
        short = min(n_a, n_b)
        low = min(short, room // 2) if 2 * short > room else short
        high = room - low
        n_a, n_b = (high, low) if n_a > n_b else (low, high)
    a, b = tokens_a[:n_a], tokens_b[:n_b]
    ids = torch.tensor([cls_id] + a + [sep_id] + b + [sep_id])
    types = torch.cat([torch.zeros(len(a) + 2, dtype=torch.long), torch.ones(len(b) + 1, dtype=torch.long)])
    return {"input_ids": ids, "token_type_ids": types, "attention_mask": torch.ones_like(ids)}


def bert_pair_input_by_lengths(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """Correct: one token at a time from the longer segment, then the odd token given back to the
    segment that was longer at the start (the tokenizer's rule, reached by a loop)."""
    if len(tokens_a) == 0 or len(tokens_b) == 0:
        raise ValueError("empty segment")
    if max_length < 5:
        raise ValueError("max_length < 5")
    n_a, n_b = len(tokens_a), len(tokens_b)
    b_first = n_b >= n_a
    while n_a + n_b > max_length - 3:
        if n_a > n_b or (n_a == n_b and not b_first):
            n_a -= 1
        else:
            n_b -= 1
    if n_a != n_b and abs(n_a - n_b) == 1 and (n_a > n_b) == b_first and n_a + n_b == max_length - 3:
        n_a, n_b = n_b, n_a  # equal halves but the odd token went to the shorter one: hand it over
    parts = [[cls_id], tokens_a[:n_a], [sep_id], tokens_b[:n_b], [sep_id]]
    ids = torch.tensor([t for part in parts for t in part], dtype=torch.int64)
    types = (torch.arange(len(ids)) > n_a + 1).long()
    return {"attention_mask": torch.ones(len(ids), dtype=torch.int64), "token_type_ids": types, "input_ids": ids}


def _pairs_by_coin(documents, generator, *, p_is_next=0.5, own_document_too=False):
    """make_nsp_pairs_flat's examples, no checks: the coin's probability and whether A's own
    document is in the NotNext pool are knobs, so its mutants differ from it in one clause."""
    out = []
    for d, document in enumerate(documents):
        pool = [s for e, other in enumerate(documents) if own_document_too or e != d for s in other]
        for a, following in zip(document, document[1:]):
            if float(torch.rand(1, generator=generator)) < p_is_next:
                out.append((a, following, 0))
            else:
                out.append((a, pool[int(torch.randint(0, len(pool), (1,), generator=generator))], 1))
    return out


def make_nsp_pairs_flat(documents, generator):
    """Correct: the other documents' sentences listed once per document, indexed with randint."""
    if len(documents) < 2 or any(not d for d in documents):
        raise ValueError("at least two documents, each with a sentence")
    return _pairs_by_coin(documents, generator)


def make_nsp_pairs_multinomial(documents, generator):
    """Correct: a document drawn in proportion to its size, then a sentence of it; the coin as randint(2)."""
    if len(documents) < 2:
        raise ValueError("two documents at least")
    if min(map(len, documents)) == 0:
        raise ValueError("an empty document")
    sizes = torch.tensor([len(d) for d in documents], dtype=torch.float)
    out = []
    for d, document in enumerate(documents):
        weights = sizes.clone()
        weights[d] = 0
        for i in range(len(document) - 1):
            if int(torch.randint(2, (1,), generator=generator)) == 0:
                out.append((document[i], document[i + 1], 0))
                continue
            e = int(torch.multinomial(weights, 1, generator=generator))
            k = int(torch.randint(len(documents[e]), (1,), generator=generator))
            out.append((document[i], documents[e][k], 1))
    return out


def _pair(a, b, cls_id, sep_id, types=None):
    ids = torch.tensor([cls_id, *a, sep_id, *b, sep_id])
    if types is None:
        types = [0] * (len(a) + 2) + [1] * (len(b) + 1)
    return {"input_ids": ids, "token_type_ids": torch.tensor(types), "attention_mask": torch.ones_like(ids)}


def _fit(a, b, max_length, *, odd_to_shorter=False, front=False):
    """The reference's kept lengths (or, odd_to_shorter, the odd token given to the shorter segment)."""
    out = sentence_pairs.bert_pair_input(list(a) or [0], list(b) or [0], cls_id=-1, sep_id=-2,
                                         max_length=max(max_length, 5))
    n_a = int((out["token_type_ids"] == 0).sum()) - 2
    n_b = int((out["token_type_ids"] == 1).sum()) - 1
    if odd_to_shorter and len(a) + len(b) + 3 > max_length and abs(n_a - n_b) == 1 and 2 * min(len(a), len(b)) > max_length - 3:
        n_a, n_b = n_b, n_a
    a, b = list(a), list(b)
    return (a[len(a) - n_a:], b[len(b) - n_b:]) if front else (a[:n_a], b[:n_b])


def bert_pair_input_all_type_zero(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    out = sentence_pairs.bert_pair_input(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id, max_length=max_length)
    return {**out, "token_type_ids": torch.zeros_like(out["token_type_ids"])}


def bert_pair_input_sep_in_segment_a(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """The first [SEP] gets token type 1."""
    a, b = _fit(tokens_a, tokens_b, max_length)
    return _pair(a, b, cls_id, sep_id, [0] * (len(a) + 1) + [1] * (len(b) + 2))


def bert_pair_input_one_sep(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """No [SEP] at the end."""
    out = sentence_pairs.bert_pair_input(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id, max_length=max_length + 1)
    return {key: value[:-1] for key, value in out.items()}


def bert_pair_input_odd_token_to_the_shorter(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    return _pair(*_fit(tokens_a, tokens_b, max_length, odd_to_shorter=True), cls_id, sep_id)


def bert_pair_input_cuts_the_front(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    return _pair(*_fit(tokens_a, tokens_b, max_length, front=True), cls_id, sep_id)


def bert_pair_input_cuts_only_b(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    b = list(tokens_b)[:max(1, max_length - 3 - len(tokens_a))]
    a = list(tokens_a)[:max_length - 3 - len(b)]
    return _pair(a, b, cls_id, sep_id)


def bert_pair_input_ignores_specials_in_length(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    """max_length counts the segments only."""
    return _pair(*_fit(tokens_a, tokens_b, max_length + 3), cls_id, sep_id)


def bert_pair_input_int32(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    out = sentence_pairs.bert_pair_input(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id, max_length=max_length)
    return {key: value.int() for key, value in out.items()}


def bert_pair_input_accepts_empty(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    if max_length < 5:
        raise ValueError("max_length")
    return _pair(*_fit(tokens_a, tokens_b, max_length), cls_id, sep_id)


def bert_pair_input_accepts_short_max_length(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    if not tokens_a or not tokens_b:
        raise ValueError("empty")
    return _pair(*_fit(tokens_a, tokens_b, max(max_length, 5)), cls_id, sep_id)


def bert_pair_input_modifies_input(tokens_a, tokens_b, *, cls_id, sep_id, max_length):
    out = sentence_pairs.bert_pair_input(tokens_a, tokens_b, cls_id=cls_id, sep_id=sep_id, max_length=max_length)
    while len(tokens_a) + len(tokens_b) + 3 > max_length:
        (tokens_a if len(tokens_a) > len(tokens_b) else tokens_b).pop()
    return out


def make_nsp_pairs_labels_swapped(documents, generator):
    return [(a, b, 1 - label) for a, b, label in sentence_pairs.make_nsp_pairs(documents, generator)]


def make_nsp_pairs_own_document_too(documents, generator):
    """NotNext sentences drawn from the whole corpus, A's document included."""
    if len(documents) < 2 or any(not d for d in documents):
        raise ValueError("at least two documents, each with a sentence")
    return _pairs_by_coin(documents, generator, own_document_too=True)


def make_nsp_pairs_biased_coin(documents, generator):
    """IsNext with probability 0.6."""
    return _pairs_by_coin(documents, generator, p_is_next=0.6)


def make_nsp_pairs_uniform_over_documents(documents, generator):
    """A random other document first, then a sentence of it: short documents' sentences come too often."""
    out = []
    for d, document in enumerate(documents):
        others = [other for e, other in enumerate(documents) if e != d]
        for a, following in zip(document, document[1:]):
            if float(torch.rand(1, generator=generator)) < 0.5:
                out.append((a, following, 0))
            else:
                other = others[int(torch.randint(0, len(others), (1,), generator=generator))]
                out.append((a, other[int(torch.randint(0, len(other), (1,), generator=generator))], 1))
    return out


def make_nsp_pairs_global_rng(documents, generator):
    return sentence_pairs.make_nsp_pairs(documents, None)


def make_nsp_pairs_last_sentence_too(documents, generator):
    """An extra NotNext example for the last sentence of every document."""
    out = sentence_pairs.make_nsp_pairs(documents, generator)
    return out + [(document[-1], documents[(d + 1) % len(documents)][0], 1) for d, document in enumerate(documents)]


def make_nsp_pairs_one_document_allowed(documents, generator):
    if len(documents) < 2:
        return []
    return sentence_pairs.make_nsp_pairs(documents, generator)


def make_nsp_pairs_empty_document_allowed(documents, generator):
    """Checks the number of documents only: a document without sentences passes (it gives no example)."""
    if len(documents) < 2:
        raise ValueError("at least two documents")
    return _pairs_by_coin(documents, generator)


def make_nsp_pairs_lists(documents, generator):
    return [list(example) for example in sentence_pairs.make_nsp_pairs(documents, generator)]


def make_nsp_pairs_shuffles_documents(documents, generator):
    out = sentence_pairs.make_nsp_pairs(documents, generator)
    documents.reverse()
    return out


def make_nsp_pairs_reseeds(documents, generator):
    return sentence_pairs.make_nsp_pairs(documents, torch.Generator().manual_seed(0))


MUTANTS += [
    # sample_top_k_from_ascending_sort: a second top-k that breaks k > V (the clause's mutant is
    # sample_top_k_by_topk), silently where that one fails
    {"bert_pair_input": bert_pair_input_all_type_zero, "make_nsp_pairs": make_nsp_pairs_labels_swapped,
     "sample_next_token": sample_top_k_from_ascending_sort},
    {"bert_pair_input": bert_pair_input_odd_token_to_the_shorter, "make_nsp_pairs": make_nsp_pairs_uniform_over_documents},
]
ALTERNATIVES += [
    {"bert_pair_input": bert_pair_input_by_arithmetic, "make_nsp_pairs": make_nsp_pairs_flat},
    {"bert_pair_input": bert_pair_input_by_lengths, "make_nsp_pairs": make_nsp_pairs_multinomial},
]
