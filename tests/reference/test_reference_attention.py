"""attention.py against torch.softmax and torch.nn.functional.scaled_dot_product_attention."""

import pytest
import torch
import torch.nn.functional as F

from autograder.reference.attention import (
    attention_connections,
    causal_mask,
    scaled_dot_product_attention,
    softmax,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


# ---------------------------------------------------------------- softmax


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1, -1, 2])
def test_softmax_matches_torch_on_every_dim(device, dim):
    x = torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0)).to(device)
    ours = softmax(x, dim=dim)
    assert ours.shape == x.shape and ours.dtype == x.dtype and ours.device == x.device
    torch.testing.assert_close(ours, torch.softmax(x, dim=dim), atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("transform", [lambda x: x + 100, lambda x: x * 1000, lambda x: x - 1e4])
def test_softmax_is_stable_for_large_logits(transform):
    x = transform(torch.randn(6, 7, generator=torch.Generator().manual_seed(1)))
    ours = softmax(x)
    assert torch.isfinite(ours).all()
    # tolerance: float32 rounding of probabilities in [0, 1]
    torch.testing.assert_close(ours, torch.softmax(x, dim=-1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("dtype, atol", [(torch.float16, 1e-3), (torch.bfloat16, 8e-3), (torch.float64, 1e-12)])
def test_softmax_low_and_high_precision(dtype, atol):
    # atol: about one unit in the last place of a probability near 0.5 for the dtype
    x = (torch.randn(4, 9, generator=torch.Generator().manual_seed(2)) * 5).to(dtype)
    ours = softmax(x, dim=-1)
    assert ours.dtype == dtype
    torch.testing.assert_close(ours, torch.softmax(x, dim=-1), atol=atol, rtol=0)


def test_softmax_hand_computed():
    # e^0 / (e^0 + e^ln3) = 1/4 and 3/4
    out = softmax(torch.tensor([0.0, torch.log(torch.tensor(3.0)).item()]))
    torch.testing.assert_close(out, torch.tensor([0.25, 0.75]), atol=1e-7, rtol=0)


def test_softmax_gradient_matches_torch():
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(3), requires_grad=True)
    w = torch.randn(3, 5, generator=torch.Generator().manual_seed(4))
    (softmax(x) * w).sum().backward()
    ours = x.grad.clone()
    x.grad = None
    (torch.softmax(x, -1) * w).sum().backward()
    torch.testing.assert_close(ours, x.grad, atol=1e-7, rtol=1e-6)


# ---------------------------------------------------------------- masks


def test_causal_mask_is_lower_triangular():
    expected = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    mask = causal_mask(4)
    assert mask.dtype == torch.bool
    assert torch.equal(mask, expected)


@pytest.mark.parametrize("n", [1, 2, 7, 512])
def test_attention_connections(n):
    assert attention_connections(n, causal=False) == n * n
    assert attention_connections(n, causal=True) == int(causal_mask(n).sum())  # count of allowed pairs


# ---------------------------------------------------------------- attention


def _qkv(shape_q, t_k, dv, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    *lead, t_q, d = shape_q
    q = torch.randn(*lead, t_q, d, generator=g)
    k = torch.randn(*lead, t_k, d, generator=g)
    v = torch.randn(*lead, t_k, dv, generator=g)
    return q.to(device), k.to(device), v.to(device)


def _sdpa_with_weights(q, k, v, allowed):
    """Oracle: torch's SDPA for the output, the weights from the same boolean mask."""
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    scores = q @ k.transpose(-2, -1) / q.size(-1) ** 0.5
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return out, weights


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape_q, t_k", [((2, 5, 8), 5), ((2, 3, 6, 4), 7), ((1, 2, 2, 5, 16), 5)])
def test_bidirectional_attention_matches_sdpa(device, shape_q, t_k):
    q, k, v = _qkv(shape_q, t_k, dv=3, device=device)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (*shape_q[:-1], 3) and weights.shape == (*shape_q[:-1], t_k)
    # tolerance: float32 accumulation-order differences, well below 1e-6
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), atol=1e-6, rtol=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(shape_q[:-1], device=device), atol=1e-6, rtol=0)


@pytest.mark.parametrize("device", DEVICES)
def test_causal_attention_matches_sdpa(device):
    q, k, v = _qkv((2, 4, 6, 8), 6, dv=5, seed=1, device=device)
    out, weights = scaled_dot_product_attention(q, k, v, causal=True)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True), atol=1e-6, rtol=0)
    # nothing leaks from the future: weights above the diagonal are exactly zero
    assert (weights[..., ~causal_mask(6, device=device)] == 0).all()


def test_causal_attention_with_unequal_lengths_raises():
    q, k, v = _qkv((1, 3, 4), 5, dv=4)
    with pytest.raises(ValueError):
        scaled_dot_product_attention(q, k, v, causal=True)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("causal", [False, True])
def test_padding_mask_matches_sdpa_boolean_mask(device, causal):
    b, h, t, d = 3, 2, 6, 8
    q, k, v = _qkv((b, h, t, d), t, dv=d, seed=2, device=device)
    lengths = torch.tensor([6, 4, 1], device=device)  # real tokens first, then padding
    padding_mask = torch.arange(t, device=device)[None, :] < lengths[:, None]  # [B, Tk]
    allowed = padding_mask[:, None, None, :]  # SDPA's mask: True = may attend, [B, 1, 1, Tk]
    if causal:
        allowed = allowed & torch.ones(t, t, dtype=torch.bool, device=device).tril()
    out, weights = scaled_dot_product_attention(q, k, v, causal=causal, padding_mask=padding_mask)
    ref_out, ref_weights = _sdpa_with_weights(q, k, v, allowed.expand(b, h, t, t))
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=0)
    torch.testing.assert_close(weights, ref_weights, atol=1e-6, rtol=0)
    assert (weights[2, :, :, 1:] == 0).all()  # padded keys get exactly zero weight


@pytest.mark.parametrize("device", DEVICES)
def test_padding_mask_on_three_dim_inputs(device):
    q, k, v = _qkv((2, 4, 8), 5, dv=3, seed=3, device=device)
    padding_mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype=torch.bool, device=device)
    out, _ = scaled_dot_product_attention(q, k, v, padding_mask=padding_mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=padding_mask[:, None, :])
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


def test_all_padding_row_gives_zeros_not_nan():
    q, k, v = _qkv((2, 2, 3, 4), 3, dv=4, seed=4)
    q.requires_grad_(True), k.requires_grad_(True), v.requires_grad_(True)
    padding_mask = torch.tensor([[True, True, False], [False, False, False]])
    out, weights = scaled_dot_product_attention(q, k, v, padding_mask=padding_mask)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    assert torch.equal(weights[1], torch.zeros_like(weights[1]))
    assert torch.isfinite(out).all() and torch.isfinite(weights).all()
    # the visible row is still ordinary attention
    expected = F.scaled_dot_product_attention(q[:1], k[:1, :, :2], v[:1, :, :2])
    torch.testing.assert_close(out[:1], expected, atol=1e-6, rtol=0)
    out.sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()


def test_attention_hand_computed():
    # d = 4, so sqrt(d) = 2: the scores are 0 and (2 ln 3) / 2 = ln 3, the weights
    # 1/4 and 3/4, and the output 0.25 * 10 + 0.75 * 20 = 17.5.
    q = torch.tensor([[[1.0, 0.0, 0.0, 0.0]]])
    k = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [2 * torch.log(torch.tensor(3.0)).item(), 0.0, 0.0, 0.0]]])
    v = torch.tensor([[[10.0], [20.0]]])
    out, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(weights, torch.tensor([[[0.25, 0.75]]]), atol=1e-6, rtol=0)
    torch.testing.assert_close(out, torch.tensor([[[17.5]]]), atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype, atol", [(torch.float16, 5e-3), (torch.bfloat16, 4e-2)])
def test_attention_preserves_low_precision_dtype(dtype, atol):
    q, k, v = _qkv((2, 2, 4, 8), 4, dv=8, seed=5)
    out, weights = scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype), causal=True)
    assert out.dtype == dtype and weights.dtype == dtype
    # tolerance: about 4x the largest error seen from rounding inputs, scores,
    # weights and output to the dtype (1e-3 for float16, 1e-2 for bfloat16)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out.float(), ref, atol=atol, rtol=0)
