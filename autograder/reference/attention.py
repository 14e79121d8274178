"""Scaled dot-product attention, the operation at the heart of BERT, GPT and T5.

Attention(Q, K, V) = softmax(Q K^T / sqrt(d)) V          (Vaswani et al., 2017)

BERT lets every token look at every other token (bidirectional); GPT lets token i
look only at tokens j <= i (causal), which is what makes next-token prediction a
fair game. Both are the same computation with a different boolean mask.
"""

import math

import torch


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Numerically stable softmax along ``dim``.

    softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m),   m = max_j x_j

    Subtracting the maximum changes nothing mathematically (the factor exp(-m)
    cancels) but keeps every exponent <= 0, so exp never overflows: softmax of
    [1000, 1001] is fine, while the naive formula returns NaN.

    Args:
        x: floating-point tensor of any shape, on any device.
        dim: the dimension that sums to one (negative values count from the end).

    Returns:
        A tensor with the shape, dtype and device of ``x``. float16 and bfloat16
        inputs are computed in float32 and rounded back once at the end, as
        ``torch.softmax`` does. Deterministic.

    A slice that is entirely ``-inf`` has no defined softmax (it would be 0/0)
    and gives NaN here; callers that mask (see ``scaled_dot_product_attention``)
    must handle fully masked rows themselves.

    Not graded: whether float16 and bfloat16 inputs are computed in float32 (results within
    a few units in the last place of their dtype are accepted), the result for a slice that
    is entirely -inf, and gradients.
    """
    compute_dtype = torch.promote_types(x.dtype, torch.float32)
    z = x.to(compute_dtype)
    # The shift is a constant as far as the result is concerned, so no gradient
    # needs to flow through it.
    z = z - z.amax(dim=dim, keepdim=True).detach()
    e = torch.exp(z)
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """The causal (autoregressive) attention pattern for a sequence of length ``n``.

    Returns:
        BoolTensor [n, n] on ``device`` (CPU when None) with ``mask[i, j] = True``
        exactly when query i may attend to key j, i.e. j <= i: the lower triangle
        including the diagonal. Row i is what position i is allowed to see.

    Example (n = 3)::

        [[ True, False, False],
         [ True,  True, False],
         [ True,  True,  True]]
    """
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def scaled_dot_product_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    causal: bool = False,
    padding_mask: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T / sqrt(d)) v, with optional causal and padding masks.

    Args:
        q: queries [..., Tq, d].
        k: keys    [..., Tk, d]   (same leading dims as ``q``, or broadcastable).
        v: values  [..., Tk, dv].
        causal: if True, query i may only attend to keys j <= i. Requires
            Tq == Tk (queries and keys are the same positions); anything else
            raises ValueError, because "j <= i" is ambiguous when the two
            sequences are not aligned (e.g. decoding with a cache).
        padding_mask: optional BoolTensor [B, Tk], True for a real token and
            False for padding, where B is the first dimension of ``q``
            (q is [B, ..., Tq, d], e.g. [B, heads, Tq, d]). It is broadcast over
            every dimension between B and Tq, so one mask serves all heads.

    Masked (query, key) pairs get the score -inf before the softmax, hence an
    attention weight of exactly 0. The masks combine with AND: a key is visible
    when it is both in the past (if causal) and a real token.

    A query that can see no key at all (e.g. a row whose keys are all padding)
    gets all-zero weights and an all-zero output instead of NaN, and its
    gradient is zero rather than NaN.

    Returns:
        (output, weights): output [..., Tq, dv] and weights [..., Tq, Tk], in
        the dtype and on the device of ``q``; each row of ``weights`` sums to 1
        (or is all zeros, see above). Deterministic.

    Not graded: gradients.
    """
    d = q.size(-1)
    t_q, t_k = q.size(-2), k.size(-2)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d)  # [..., Tq, Tk]

    visible = None  # BoolTensor broadcastable to scores; None means "all visible"
    if causal:
        if t_q != t_k:
            raise ValueError(f"causal attention needs Tq == Tk, got Tq={t_q}, Tk={t_k}")
        visible = causal_mask(t_q, device=q.device)
    if padding_mask is not None:
        # [B, Tk] -> [B, 1, ..., 1, Tk] so that it lines up with [B, ..., Tq, Tk].
        keys_real = padding_mask.to(device=q.device, dtype=torch.bool)
        keys_real = keys_real.reshape(keys_real.size(0), *([1] * (q.dim() - 2)), t_k)
        visible = keys_real if visible is None else visible & keys_real

    if visible is None:
        weights = softmax(scores, dim=-1)
    else:
        visible = visible.expand_as(scores)
        scores = scores.masked_fill(~visible, float("-inf"))
        # A row with no visible key would be softmax of all -inf = 0/0 = NaN, and
        # NaN poisons the backward pass of every key. Give such rows finite dummy
        # scores, then zero their weights after the softmax.
        sees_something = visible.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~sees_something, 0.0)
        weights = softmax(scores, dim=-1).masked_fill(~visible, 0.0)

    return weights @ v, weights


def attention_connections(n: int, causal: bool) -> int:
    """Number of (query, key) pairs that attention computes for ``n`` tokens.

    Bidirectional attention (BERT): every token sees every token, n * n pairs.
    Causal attention (GPT): token i sees tokens 0..i, i.e. 1 + 2 + ... + n =
    n * (n + 1) // 2 pairs. Either way the cost grows quadratically in n.
    """
    return n * (n + 1) // 2 if causal else n * n
