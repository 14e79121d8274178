"""Stand-in students for the hidden suite of Part B (BERT and GPT)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from autograder.reference import arithmetic, attention, decoding, losses, masking


# ---------------------------------------------------------------- wrong
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
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator, device=device)
    masked = torch.where(selected & ~to_mask, random_ids, input_ids.masked_fill(to_mask, mask_token_id))
    return masked, input_ids.masked_fill(~selected, -100)


def mask_tokens_global_rng(input_ids, *, generator=None, **kwargs):
    return masking.mask_tokens(input_ids, generator=None, **kwargs)


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


def beam_search_greedy_path(model, input_ids, *, num_beams, max_new_tokens, length_penalty=1.0, eos_token_id=None):
    return decoding.greedy_decode(model, input_ids, max_new_tokens, eos_token_id=eos_token_id)


def beam_search_no_length_penalty(model, input_ids, *, length_penalty=1.0, **kwargs):
    return decoding.beam_search(model, input_ids, length_penalty=1.0, **kwargs)


# ---------------------------------------------------------------- correct, written differently
def softmax_via_logsumexp(x, dim=-1):
    z = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (z - z.logsumexp(dim=dim, keepdim=True)).exp().to(x.dtype)


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
    {"mask_tokens": mask_tokens_global_rng},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"softmax": softmax_via_logsumexp, "mask_tokens": mask_tokens_with_uniforms,
     "scaled_dot_product_attention": attention_in_float32, "clm_loss": clm_loss_by_hand,
     "sample_next_token": sample_by_inverse_cdf, "greedy_decode": greedy_with_kv_cache},
]

# The worked example's answer constant has no reference module: the reference computes it.
EXTRA_NAMESPACE: dict[str, object] = {"CAT_NEXT_WORD_PROBS": arithmetic.softmax_worked_example()}
