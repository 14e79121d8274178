"""Hidden tests of exercise1_masked_predictions.ipynb: the top-k predictions of a
masked LM at each [MASK] of a sequence, and the bits of supervision per example.

Inputs are built from fixed seeds; the expected answer comes from
``autograder.reference.scoring.top_k_mask_predictions`` in this process. Logits
whose top k could tie are built from distinct values, so the order of the ids is
fixed whatever way a correct solution sorts.
"""
from __future__ import annotations

import math

import torch

from autograder.reference import arithmetic, scoring
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.suite import (drawn_ints, expect, expect_close, expect_equal, expect_number, expect_pair, expect_tensor,
                              generator, graded, on_devices, redrawn, top_gaps_at_least)

MASK = 7  # a [MASK] id that is not BERT's 103: the function must use the argument


def _gen(seed: int) -> torch.Generator:
    return generator(seed)


def _sequence(length: int, vocab: int, n_masks: int, *, seed: int) -> torch.Tensor:
    """Random ids [length] with exactly ``n_masks`` [MASK]s at random positions."""
    ids = torch.randint(0, vocab, (length,), generator=_gen(seed))
    ids[ids == MASK] = MASK + 1
    positions = torch.randperm(length, generator=_gen(seed + 1000))[:n_masks]
    ids[positions] = MASK
    return ids


def _logits(length: int, vocab: int, *, seed: int, device: str, scale: float = 3.0) -> torch.Tensor:
    """Random logits whose 18 largest of every row (k is at most 17) are 1e-5 apart or more: a
    softmax's rounding (1e-7 relative) cannot reorder them."""
    return redrawn(seed, lambda g: torch.randn(length, vocab, generator=g) * scale,
                   lambda x: top_gaps_at_least(x, 1e-5, top=17)).to(device)


def _expect_predictions(value, logits, ids, k: int, *, what: str, device: str, atol: float = 1e-6) -> None:
    probs, top_ids = expect_pair(value, what=what, names="probs, ids")
    expected_probs, expected_ids = scoring.top_k_mask_predictions(logits, ids, MASK, k)
    n = expected_ids.size(0)
    expect_tensor(probs, dtype=torch.float32, shape=(n, k), device=device,
                  what=f"the probabilities of {what} (float32 [n_masks, k] on the logits' device)")
    expect_tensor(top_ids, dtype=torch.int64, shape=(n, k), device=device,
                  what=f"the ids of {what} (int64 [n_masks, k] on the logits' device)")
    expect_equal(top_ids, expected_ids, what=f"the ids of {what} (row r = r-th [MASK] from the left, "
                                             "most probable first)")
    # tolerance: float32 rounding of a softmax over the whole vocabulary
    expect_close(probs, expected_probs, atol=atol, rtol=1e-5,
                 what=f"the probabilities of {what} (softmax over the whole vocabulary)")


@graded("test_top_k_mask_predictions")
@on_devices
def test_top_k_mask_predictions_matches_reference(student, device):
    # (length, vocab, n_masks, k): one blank, several, every position a blank, a
    # one-token sequence, k = 1 and k = V, a realistic vocabulary.
    cases = [(12, 50, 1, 5), (12, 50, 3, 5), (6, 30, 6, 2), (1, 40, 1, 3), (20, 17, 2, 17), (9, 8000, 2, 5),
             (15, 100, 4, 1)]
    for seed, (length, vocab, n_masks, k) in enumerate(cases):
        logits = _logits(length, vocab, seed=seed, device=device)
        ids = _sequence(length, vocab, n_masks, seed=seed)
        what = f"top_k_mask_predictions(logits [{length}, {vocab}], {n_masks} [MASK]s, k={k})"
        reply = student.probe("call_keeping_inputs", name="top_k_mask_predictions",
                              args=[logits, ids], kwargs={"mask_token_id": MASK, "k": k})
        _expect_predictions(reply["value"], logits, ids, k, what=what, device=device)
        after_logits, after_ids = reply["args_after"]
        expect(torch.equal(after_logits, logits) and torch.equal(after_ids, ids),
               f"{what} modified its inputs; work on new tensors instead")


@graded("test_top_k_mask_predictions")
@on_devices
def test_top_k_mask_predictions_shapes_devices_and_defaults(student, device):
    length, vocab = 10, 60
    logits = _logits(length, vocab, seed=20, device=device)
    ids = _sequence(length, vocab, 2, seed=20)
    # A batch dimension of 1 on either input, as model(**encoded).logits and the tokenizer give them.
    for name, args in [("logits [1, T, V]", [logits[None], ids]), ("input_ids [1, T]", [logits, ids[None]]),
                       ("logits [1, T, V] and input_ids [1, T]", [logits[None], ids[None]])]:
        _expect_predictions(student.call(*args, MASK, 3), logits, ids, 3, device=device,
                            what=f"top_k_mask_predictions with {name}")
    # ids on the logits' device too (the CPU variant repeats the plain case).
    _expect_predictions(student.call(logits, ids.to(device), MASK, 4), logits, ids, 4, device=device,
                        what="top_k_mask_predictions with input_ids on the logits' device")
    # k defaults to 5.
    _expect_predictions(student.call(logits, ids, MASK), logits, ids, 5, device=device,
                        what="top_k_mask_predictions(logits, input_ids, mask_token_id) (k defaults to 5)")
    # No [MASK] at all: empty results, still with the right dtypes and k columns.
    plain = ids.clone()
    plain[plain == MASK] = MASK + 1
    _expect_predictions(student.call(logits, plain, MASK, 3), logits, plain, 3, device=device,
                        what="top_k_mask_predictions on a sequence without [MASK] (shapes [0, k])")


@graded("test_top_k_mask_predictions")
@on_devices
def test_top_k_mask_predictions_precision_and_bad_k(student, device):
    length, vocab = 8, 200
    ids = _sequence(length, vocab, 3, seed=30)
    # Distinct values that bfloat16 and float16 hold exactly (steps of 1/8 below 32 in size):
    # no ties, so the order of the ids is fixed.
    rows = [torch.randperm(vocab, generator=_gen(31 + t)) for t in range(length)]
    exact = (torch.stack(rows).float() / 8 - 12.5).to(device)
    for dtype in (torch.float16, torch.bfloat16):
        # tolerance: float32 rounding; a softmax taken in half precision is off by ~1e-3
        _expect_predictions(student.call(exact.to(dtype), ids, MASK, 5), exact.to(dtype), ids, 5, device=device,
                            what=f"top_k_mask_predictions of {dtype} logits (compute the softmax in float32: "
                                 "logits.float())")
    huge = _logits(length, vocab, seed=32, device=device, scale=50.0) + 1000.0
    value = student.call(huge, ids, MASK, 4)
    probs, _ = expect_pair(value, what="top_k_mask_predictions of logits around 1000", names="probs, ids")
    expect(type(probs) is torch.Tensor and bool(torch.isfinite(probs).all()),
           "top_k_mask_predictions of logits around 1000 gave NaN or inf: use a stable softmax")
    _expect_predictions(value, huge, ids, 4, device=device, what="top_k_mask_predictions of logits around 1000")
    for k in (0, -1, vocab + 1):
        reply = student.probe("raises", name="top_k_mask_predictions", args=[exact, ids, MASK, k])
        expect(reply["raised"] == "ValueError",
               f"top_k_mask_predictions(..., k={k}) with a vocabulary of {vocab} must raise ValueError "
               f"(1 <= k <= V), got {reply['raised'] or 'no exception'}")


# =============================================================== bits_per_example
BITS_KEYS = ("mlm_targets", "clm_targets", "mlm_bits", "clm_bits", "clm_over_mlm")


def _expect_bits(student, seq_len: int, mask_rate: float, mlm: float, clm: float) -> None:
    what = (f"bits_per_example({seq_len}, mask_rate={mask_rate}, mlm_bits_per_target={mlm}, "
            f"clm_bits_per_target={clm})")
    actual = student.call(seq_len, mask_rate=mask_rate, mlm_bits_per_target=mlm, clm_bits_per_target=clm)
    expected = arithmetic.bits_per_example(seq_len, mask_rate=mask_rate, mlm_bits_per_target=mlm,
                                           clm_bits_per_target=clm)
    expect(type(actual) is dict, f"{what} must return a dict, got {type(actual).__name__}")
    expect(set(actual) == set(BITS_KEYS), f"{what} must have exactly the keys {sorted(BITS_KEYS)}, got {sorted(actual)}")
    for key in BITS_KEYS:
        expect(type(actual[key]) is float, f"{what}[{key!r}] must be a Python float, got {type(actual[key]).__name__}")
        if math.isinf(expected[key]):
            expect(actual[key] == expected[key], f"{what}[{key!r}] is {actual[key]!r}; the docstring says inf when "
                                                 "mlm_bits is 0")
        else:
            expect_number(actual[key], expected[key], rel=1e-9, abs_tol=1e-12, what=f"{what}[{key!r}]")


@graded("test_bits_per_example")
def test_bits_per_example_values(student):
    for seq_len, mask_rate, mlm, clm in [(128, 0.15, 12.97, 12.97), (128, 0.15, 4.97, 6.01), (512, 0.4, 3.0, 7.5)]:
        _expect_bits(student, seq_len, mask_rate, mlm, clm)
    seq_len, percent, mlm, clm = drawn_ints(40, 2, 4096), drawn_ints(41, 1, 101), *drawn_ints(42, 1, 2000, count=2)
    _expect_bits(student, seq_len[0], percent[0] / 100, mlm / 100, clm / 100)  # a drawn case


@graded("test_bits_per_example")
def test_bits_per_example_edge_cases(student):
    _expect_bits(student, 2, 1.0, 1.0, 1.0)  # the shortest sequence, everything masked
    _expect_bits(student, 10, 0.5, 0.0, 3.0)  # no bits from the MLM targets: the ratio is inf
    for args, what in [((1, 0.15, 1.0, 1.0), "seq_len=1"), ((10, 0.0, 1.0, 1.0), "mask_rate=0"),
                       ((10, 1.5, 1.0, 1.0), "mask_rate=1.5"), ((10, 0.15, -1.0, 1.0), "negative bits")]:
        seq_len, mask_rate, mlm, clm = args
        reply = student.probe("raises", name="bits_per_example", args=[seq_len],
                              kwargs=dict(mask_rate=mask_rate, mlm_bits_per_target=mlm, clm_bits_per_target=clm))
        expect(reply["raised"] == "ValueError", f"bits_per_example with {what} must raise ValueError, "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))
