"""Stand-in students for the attention section of part_b_bert_gpt.ipynb: softmax, the causal mask,
scaled dot-product attention, counting connections, the worked example's probabilities."""
from __future__ import annotations

import math

import torch

from autograder.reference import arithmetic, attention

from ._common import _on_cpu


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


# ---------------------------------------------------------------- correct, written differently
def softmax_via_logsumexp(x, dim=-1):
    z = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    return (z - z.logsumexp(dim=dim, keepdim=True)).exp().to(x.dtype)


def attention_in_float32(q, k, v, **kwargs):
    output, weights = attention.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kwargs)
    return output.to(q.dtype), weights.to(q.dtype)


# The worked example's answer constant has no reference module: the reference computes it.
EXTRA_NAMESPACE: dict[str, object] = {"CAT_NEXT_WORD_PROBS": arithmetic.softmax_worked_example()}


def attention_connections_rejects_no_tokens(n, causal):
    """An argument check one too strict: n = 0 (no tokens, no pairs) raises."""
    if n < 1:
        raise ValueError("n must be positive")
    return attention.attention_connections(n, causal)


def softmax_last_dim_only(x, dim=-1):
    return attention.softmax(x, dim=-1)


softmax_on_cpu = _on_cpu(attention.softmax)
CAT_NEXT_WORD_PROBS_MISSING_WORD = {w: p for w, p in arithmetic.softmax_worked_example().items() if w != "slept"}


def causal_mask_as_int(n, device=None):
    return attention.causal_mask(n, device=device).long()


def causal_mask_without_diagonal(n, device=None):
    return torch.ones(n, n, dtype=torch.bool, device=device).tril(-1)


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


# ---------------------------------------------------------------- the tables
MUTANTS: list[dict[str, object]] = [
    {"softmax": softmax_unstable, "causal_mask": causal_mask_transposed,
         "scaled_dot_product_attention": attention_unscaled, "attention_connections": attention_connections_off_by_one,
         "CAT_NEXT_WORD_PROBS": CAT_NEXT_WORD_PROBS_WITHOUT_EXP},
    {"softmax": softmax_upcasts_for_good, "scaled_dot_product_attention": attention_nan_rows},
]

ALTERNATIVES: list[dict[str, object]] = [
    {"softmax": softmax_via_logsumexp, "scaled_dot_product_attention": attention_in_float32},
    {"softmax": softmax_in_float64, "causal_mask": causal_mask_by_comparison,
         "scaled_dot_product_attention": attention_by_einsum, "attention_connections": attention_connections_by_counting},
    {"causal_mask": causal_mask_by_rows, "attention_connections": attention_connections_by_complement},
]
