"""Hidden tests of part_b_bert_gpt.ipynb, attention both ways: softmax, the causal mask,
scaled dot-product attention, counting connections, and the worked example's
next-word probabilities."""
from __future__ import annotations

import torch

from autograder.reference import arithmetic, attention
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.suite import (
    drawn_ints, expect, expect_close, expect_equal, expect_number, expect_pair, expect_tensor, graded, on_devices,
)

from ._common import _randn


# =============================================================== softmax
SOFTMAX_CASES = [((7,), -1), ((3, 5), 0), ((2, 3, 4), 1), ((4, 1), -1), ((2, 1, 9), -1), ((3, 6), -2)]


@graded("test_softmax")
@on_devices
def test_softmax_matches_reference(student, device):
    for seed, (shape, dim) in enumerate(SOFTMAX_CASES):
        x = _randn(*shape, seed=seed, scale=3.0, device=device)
        # tolerance: float32 rounding of exp and of the sum
        expect_close(student.call(x, dim=dim), attention.softmax(x, dim=dim), atol=1e-6, rtol=1e-5,
                     what=f"softmax of a {list(shape)} tensor along dim={dim}")
    x = _randn(5, 8, seed=10, scale=3.0, device=device, dtype=torch.float64)
    # a float64 input must come back as float64; float32-level accuracy is accepted
    expect_close(student.call(x), attention.softmax(x), atol=1e-6, rtol=1e-5, what="softmax of a float64 tensor")


@graded("test_softmax")
@on_devices
def test_softmax_is_stable_for_large_inputs(student, device):
    x = _randn(4, 9, seed=20, scale=3.0, device=device)
    partly_masked = x.clone()
    partly_masked[:, ::3] = float("-inf")  # every row keeps finite entries
    for name, z in [("x + 100", x + 100), ("x + 1000", x + 1000), ("1000 * x", 1000 * x),
                    ("x - 1000", x - 1000), ("x with some -inf entries", partly_masked)]:
        result = student.call(z)
        expect_tensor(result, dtype=z.dtype, shape=z.shape, device=device, what=f"softmax({name})")
        expect(bool(torch.isfinite(result).all()),
               f"softmax({name}) contains NaN or inf: subtract the maximum of each slice before exp, "
               "so that exp never overflows")
        # tolerance: float32 rounding; inputs near 1000 are themselves only known to 6e-5 (one ulp),
        # which a log-sum-exp formulation turns into a relative error of that size
        expect_close(result, attention.softmax(z), atol=1e-6, rtol=2e-4, what=f"softmax({name})")


@graded("test_softmax")
@on_devices
def test_softmax_half_precision(student, device):
    # tolerance: about 4 units in the last place of the probabilities (measured error of an
    # all-float16 computation: 4.9e-4; all-bfloat16: 3.9e-3)
    for dtype, atol in [(torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)]:
        for seed, offset in [(21, 0.0), (22, 1000.0)]:
            x = _randn(6, 37, seed=seed, scale=3.0, device=device) + offset
            x = x.to(dtype)
            expect_close(student.call(x), attention.softmax(x), atol=atol,
                         what=f"softmax of a {dtype} tensor (+{offset:g})")


# =============================================================== causal_mask
@graded("test_causal_mask")
def test_causal_mask_values(student):
    for n in (1, 2, 5, 16, *drawn_ints(63, 3, 40)):
        expect_equal(student.call(n), attention.causal_mask(n),
                     what=f"causal_mask({n}) (True where query i may attend to key j, i.e. j <= i)")


@graded("test_causal_mask")
@on_devices
def test_causal_mask_device(student, device):
    expect_equal(student.call(6, device=device), attention.causal_mask(6, device=device),
                 what=f"causal_mask(6, device={device!r})")


# =============================================================== scaled_dot_product_attention
def _qkv(batch_dims: tuple[int, ...], t_q: int, t_k: int, d: int, dv: int, *, seed: int, device: str,
         dtype: torch.dtype = torch.float32):
    q = _randn(*batch_dims, t_q, d, seed=seed, scale=1.5, device=device, dtype=dtype)
    k = _randn(*batch_dims, t_k, d, seed=seed + 1000, scale=1.5, device=device, dtype=dtype)
    v = _randn(*batch_dims, t_k, dv, seed=seed + 2000, device=device, dtype=dtype)
    return q, k, v


def _attention(student, q, k, v, **kwargs):
    output, weights = expect_pair(student.call(q, k, v, **kwargs), what="scaled_dot_product_attention",
                                  names="output, weights")
    return output, weights


def _expect_attention(student, q, k, v, *, what: str, atol: float = 1e-5, rtol: float = 1e-5,
                      weights_atol: float | None = None, **kwargs):
    output, weights = _attention(student, q, k, v, **kwargs)
    expected_output, expected_weights = attention.scaled_dot_product_attention(q, k, v, **kwargs)
    expect_close(weights, expected_weights, atol=weights_atol or atol, rtol=rtol, what=f"the weights of {what}")
    expect_close(output, expected_output, atol=atol, rtol=rtol, what=f"the output of {what}")
    return output, weights


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_matches_reference_without_masks(student, device):
    cases = [((2, 3), 5, 5, 8, 8), ((1, 1), 1, 1, 4, 4), ((3,), 4, 7, 6, 5), ((2, 2), 3, 6, 16, 7)]
    for seed, (batch_dims, t_q, t_k, d, dv) in enumerate(cases):
        q, k, v = _qkv(batch_dims, t_q, t_k, d, dv, seed=seed, device=device)
        # tolerance: float32 rounding of two matrix products and a softmax
        _expect_attention(student, q, k, v,
                          what=f"attention with q {list(q.shape)}, k {list(k.shape)}, v {list(v.shape)} "
                               "(scores are q k^T / sqrt(d))")


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_causal(student, device):
    for seed, (batch_dims, t, d, dv) in enumerate([((2, 3), 6, 8, 8), ((1, 1), 1, 4, 4), ((1, 4), 9, 5, 3)]):
        q, k, v = _qkv(batch_dims, t, t, d, dv, seed=10 + seed, device=device)
        _, weights = _attention(student, q, k, v, causal=True)
        expect_tensor(weights, shape=(*batch_dims, t, t), device=device, what="the causal weights")
        above = weights.detach().triu(1)
        expect(bool((above == 0).all()),
               "with causal=True the weights above the diagonal must be exactly 0 "
               "(query i may only attend to keys j <= i)")
        # tolerance: float32 rounding
        _expect_attention(student, q, k, v, causal=True, what=f"causal attention with T={t}")
    q, k, v = _qkv((2,), 3, 5, 4, 4, seed=19, device=device)
    reply = student.probe("raises", name="scaled_dot_product_attention", args=[q, k, v], kwargs={"causal": True})
    expect(reply["raised"] == "ValueError",
           "scaled_dot_product_attention(q, k, v, causal=True) with Tq=3 queries and Tk=5 keys must raise "
           "ValueError (causal attention needs Tq == Tk), "
           + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_padding_mask(student, device):
    real = torch.tensor([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 0, 0], [0, 0, 1, 1, 1, 1]], dtype=torch.bool)
    q, k, v = _qkv((3, 2), 6, 6, 8, 5, seed=30, device=device)
    padding_mask = real.to(device)
    _, weights = _attention(student, q, k, v, padding_mask=padding_mask)
    expect_tensor(weights, shape=(3, 2, 6, 6), device=device, what="the weights")
    on_padding = weights.detach().cpu().masked_select(~real[:, None, None, :].expand(3, 2, 6, 6))
    expect(bool((on_padding == 0).all()),
           "keys whose padding_mask entry is False must get exactly 0 weight from every query (and every head)")
    # tolerance: float32 rounding
    _expect_attention(student, q, k, v, padding_mask=padding_mask, what="attention with a padding mask [B, Tk]")
    _expect_attention(student, q, k, v, padding_mask=padding_mask, causal=True,
                      what="attention with both a causal and a padding mask (a key must pass both)")
    q3, k3, v3 = _qkv((3,), 4, 6, 8, 8, seed=31, device=device)
    _expect_attention(student, q3, k3, v3, padding_mask=padding_mask,
                      what="attention on [B, T, d] inputs (no head dimension) with a padding mask")


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_query_that_sees_nothing_gets_zeros(student, device):
    q, k, v = _qkv((3, 2), 5, 5, 8, 4, seed=40, device=device)
    everything = slice(None)
    cases = {  # name: (keyword arguments, index of the blind queries in the [B, H, Tq, Tk] weights)
        "a batch row whose keys are all padding": (
            dict(padding_mask=torch.tensor([[1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [1, 1, 1, 0, 0]], dtype=torch.bool)),
            (1,),
        ),
        "causal attention whose first key is padding (query 0 sees no key)": (
            dict(causal=True, padding_mask=torch.tensor([[0, 1, 1, 1, 1]] * 3, dtype=torch.bool)),
            (everything, everything, 0),
        ),
    }
    for name, (kwargs, blind) in cases.items():
        kwargs["padding_mask"] = kwargs["padding_mask"].to(device)
        output, weights = _attention(student, q, k, v, **kwargs)
        for tensor, part, shape in ((weights, "weights", (3, 2, 5, 5)), (output, "output", (3, 2, 5, 4))):
            expect_tensor(tensor, shape=shape, device=device, what=f"the {part}")
            expect(not bool(torch.isnan(tensor).any()),
                   f"{name}: the {part} contain NaN; a query that can see no key must get all-zero weights "
                   "and an all-zero output (softmax over only -inf is 0/0)")
        expect(bool((weights[blind] == 0).all()) and bool((output[blind] == 0).all()),
               f"{name}: a query that sees no key must get all-zero weights and an all-zero output")
        # tolerance: float32 rounding
        _expect_attention(student, q, k, v, what=name, **kwargs)


@graded("test_scaled_dot_product_attention")
@on_devices
def test_attention_half_precision(student, device):
    padding_mask = torch.tensor([[1] * 9, [1] * 5 + [0] * 4], dtype=torch.bool, device=device)
    # tolerance: about 4 units in the last place of outputs of size ~3 (measured error of an
    # all-float16 computation: 2e-3 on outputs, 4.9e-4 on weights; all-bfloat16: 1.6e-2, 3.9e-3)
    for dtype, atol, weights_atol in [(torch.float16, 1e-2, 2e-3), (torch.bfloat16, 6e-2, 1.6e-2)]:
        q, k, v = _qkv((2, 3), 9, 9, 16, 8, seed=50, device=device, dtype=dtype)
        _expect_attention(student, q, k, v, causal=True, padding_mask=padding_mask, atol=atol, rtol=0.0,
                          weights_atol=weights_atol, what=f"{dtype} attention (the result keeps the dtype of q)")


# =============================================================== attention_connections
@graded("test_attention_connections")
def test_attention_connections_bidirectional(student):
    for n in (0, 1, 2, 7, 512, *drawn_ints(64, 3, 5000)):  # n >= 0: no tokens, no pairs
        expect_equal(student.call(n, causal=False), attention.attention_connections(n, causal=False),
                     what=f"attention_connections({n}, causal=False)")


@graded("test_attention_connections")
def test_attention_connections_causal(student):
    for n in (0, 1, 2, 7, 512, *drawn_ints(65, 3, 5000)):
        expect_equal(student.call(n, causal=True), attention.attention_connections(n, causal=True),
                     what=f"attention_connections({n}, causal=True)")


# =============================================================== CAT_NEXT_WORD_PROBS
@graded("test_cat_next_word_probs")
def test_cat_next_word_probs(student):
    answer = student.value("CAT_NEXT_WORD_PROBS")
    expected = arithmetic.softmax_worked_example()
    expect(type(answer) is dict, f"CAT_NEXT_WORD_PROBS must be a dict {{word: probability}}, got {type(answer).__name__}")
    expect(set(answer) == set(expected), f"CAT_NEXT_WORD_PROBS must have the keys {sorted(expected)}, got {sorted(answer)}")
    for word, p in expected.items():
        # tolerance: answers rounded to two decimals are accepted
        expect_number(answer[word], p, rel=0.0, abs_tol=5e-3,
                      what=f"CAT_NEXT_WORD_PROBS[{word!r}] (softmax of the logits 2.5, 1.0, 0.5, 1.5)")
