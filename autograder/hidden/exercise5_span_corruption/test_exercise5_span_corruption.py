"""Hidden tests of exercise5_span_corruption.ipynb: T5's random span noise mask,
its (inputs, targets) construction and the span-corruption loss.

The noise mask is random: its counts and its layout (kept first, noise last,
alternating) are checked exactly, and the randomness of the split into spans is
checked against the uniform distribution over splits with 5-sigma bands. Masks
are drawn with a ``torch.Generator`` built in the sandbox by the ``seeded_call``
probe. The loss is compared with the reference row by row, on padded batches,
large logits and half-precision logits.
"""
from __future__ import annotations

import math

import torch

from autograder.reference import span_corruption
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.suite import (
    expect,
    expect_close,
    expect_equal,
    expect_tensor,
    generator,
    graded,
    on_devices,
    within_sigma,
)
from autograder.hidden._shared import _expect_draws_from_the_generator, _expect_draws_from_the_global_generator

SENTINELS = [32099 - i for i in range(40)]  # T5's <extra_id_0>, <extra_id_1>, ...


def _gen(seed: int, device: str = "cpu") -> torch.Generator:
    return generator(seed, device)


def _runs(mask: torch.Tensor) -> list[tuple[bool, int]]:
    """(is_noise, length) of each maximal run of equal entries, left to right."""
    runs: list[tuple[bool, int]] = []
    for value in mask.tolist():
        if runs and runs[-1][0] == value:
            runs[-1] = (value, runs[-1][1] + 1)
        else:
            runs.append((value, 1))
    return runs


def _rule(length: int, noise_density: float, mean_span_length: float) -> tuple[int, int]:
    """(num_noise, num_spans) of the docstring's rule, from the reference's own output."""
    mask = span_corruption.random_spans_noise_mask(length, noise_density=noise_density,
                                                   mean_span_length=mean_span_length, generator=_gen(0))
    return int(mask.sum()), sum(1 for noise, _ in _runs(mask) if noise)


def _noise_masks(student, length: int, device: str, *, seed: int, repeat: int = 1, **kwargs) -> list[torch.Tensor]:
    reply = student.probe("seeded_call", name="random_spans_noise_mask", args=[length], kwargs=kwargs,
                          seed=seed, device=device, repeat=repeat, stack=True)
    what = f"random_spans_noise_mask({length}) (a BoolTensor [length] on the generator's device)"
    if reply["stacked"]:
        # The probe stacks only plain tensors of one shape, dtype and device: checking one row of
        # the stack checks every call's result, at the cost of one check instead of ``repeat``.
        expect_tensor(reply["values"][0], dtype=torch.bool, shape=(length,), device=device, what=what)
        return list(reply["values"].cpu().unbind())
    return [expect_tensor(value, dtype=torch.bool, shape=(length,), device=device, what=what).cpu()
            for value in reply["values"]]


def _expect_layout(mask: torch.Tensor, num_noise: int, num_spans: int, what: str) -> None:
    runs = _runs(mask)
    spans = sum(1 for noise, _ in runs if noise)
    expect(int(mask.sum()) == num_noise,
           f"{what} has {int(mask.sum())} noise tokens, not num_noise of the docstring's rule",
           detail=f"{what} has {int(mask.sum())} noise tokens, expected num_noise = {num_noise}")
    expect(spans == num_spans, f"{what} has {spans} noise spans, not num_spans of the docstring's rule",
           detail=f"{what} has {spans} noise spans, expected num_spans = {num_spans}")
    expect(not runs[0][0] and runs[-1][0],
           f"{what} must start with kept tokens and end with noise, got {mask.int().tolist()}")


# =============================================================== random_spans_noise_mask
@graded("test_random_spans_noise_mask")
@on_devices
def test_random_spans_noise_mask_counts_and_layout(student, device):
    settings = [(10, 0.15, 3.0), (30, 0.15, 3.0), (100, 0.15, 3.0), (512, 0.15, 3.0), (57, 0.3, 2.0), (20, 0.5, 2.5)]
    for seed, (length, density, span) in enumerate(settings):
        num_noise, num_spans = _rule(length, density, span)
        for mask in _noise_masks(student, length, device, seed=seed, repeat=3, noise_density=density,
                                 mean_span_length=span):
            _expect_layout(mask, num_noise, num_spans,
                           f"random_spans_noise_mask({length}, noise_density={density}, mean_span_length={span})")


@graded("test_random_spans_noise_mask")
@on_devices
def test_random_spans_noise_mask_edge_cases(student, device):
    # length, density, span -> the only possible mask, or (num_noise, num_spans) where several are possible
    for length, density, span, expected in [
        (2, 0.15, 3.0, [0, 1]),                   # at least one noise token, at least one kept
        (3, 0.15, 3.0, [0, 0, 1]),                # round(0.45) = 0 noise tokens is raised to 1
        (10, 0.99, 3.0, [0] + [1] * 9),           # round(9.9) = 10 is capped at length - 1
        (10, 0.8, 1.0, (8, 2)),                   # 8 spans wanted, but only 2 kept tokens to separate them
        (10, 0.3, 0.5, (3, 3)),                   # 6 spans wanted, but only 3 noise tokens to fill them
        (10, 0.15, 3.0, (2, 1)),                  # round(1.5) = 2: halves round to even
        (30, 0.15, 3.0, (4, 1)),                  # round(4.5) = 4, round(4 / 3) = 1
    ]:
        what = f"random_spans_noise_mask({length}, noise_density={density}, mean_span_length={span})"
        [mask] = _noise_masks(student, length, device, seed=length, noise_density=density, mean_span_length=span)
        if isinstance(expected, list):
            expect(mask.int().tolist() == expected,
                   f"{what} is {mask.int().tolist()}; for this length and density the docstring's rule leaves "
                   "one mask only (num_noise kept within 1 .. length - 1, kept tokens first, noise last)",
                   detail=f"{what} must be {expected}, got {mask.int().tolist()}")
        else:
            _expect_layout(mask, *expected, what)
    reply = student.probe("raises", name="random_spans_noise_mask", args=[1])
    expect(reply["raised"] == "ValueError", "random_spans_noise_mask(1) must raise ValueError (length >= 2), "
           + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


@graded("test_random_spans_noise_mask")
@on_devices
def test_random_spans_noise_mask_randomness_comes_from_generator(student, device):
    first = _noise_masks(student, 100, device, seed=1, repeat=2)
    again = _noise_masks(student, 100, device, seed=1)
    other = _noise_masks(student, 100, device, seed=2)
    _expect_draws_from_the_generator(first, again, other, differ="gave different masks", same="gave the same mask",
                                     hint="draw every random number from generator (torch.randperm(n, "
                                          "generator=generator, device=generator.device))")
    # generator=None: PyTorch's global generator, so its seed decides, and the mask is on the CPU
    seeded, alike, unlike = (
        expect_tensor(student.probe("seeded_call", name="random_spans_noise_mask", args=[100], seed=seed,
                                    global_generator=True)["values"][0], dtype=torch.bool, shape=(100,),
                      device="cpu", what="random_spans_noise_mask(100) with generator=None (a BoolTensor on the CPU)")
        for seed in (3, 3, 4))
    _expect_draws_from_the_global_generator(seeded, alike, unlike, differ="gave different masks")


@graded("test_random_spans_noise_mask")
@on_devices
def test_random_spans_noise_mask_splits_are_uniform(student, device):
    # length 20, density 0.5, mean span 2.5: 10 noise and 10 kept tokens, each split into 4 runs.
    # For a uniformly random split of n items into k positive parts, a given part has length 1
    # with probability (k - 1) / (n - 1) and length >= m with probability C(n - m, k - 1) / C(n - 1, k - 1).
    # 800 draws keep the power: the 5-sigma band around 1/3 is then 1/3 +- 0.083. The evenly spaced
    # split never makes a run of length 1, and nearly uniform splits (random proportions rounded by
    # largest remainders, 1 + a multinomial of the rest, rounded sorted cut points) put 0.22 or less
    # on a first or last run of length 1: each left at least one band in all 4000 simulated runs of
    # this test (at 600 draws the subtlest already slips through 0.6% of the time).
    draws, n, k = 800, 10, 4
    masks = _noise_masks(student, 20, device, seed=7, repeat=draws, noise_density=0.5, mean_span_length=2.5)
    counts = {"the first kept run has length 1": 0, "the first noise run has length 1": 0,
              "the last noise run has length 1": 0, "the first kept run has length >= 4": 0}
    for mask in masks:
        runs = _runs(mask)
        expect(len(runs) == 2 * k, f"random_spans_noise_mask(20, 0.5, 2.5) must have {k} kept and {k} noise runs, "
                                   f"got {mask.int().tolist()}")
        counts["the first kept run has length 1"] += runs[0][1] == 1
        counts["the first noise run has length 1"] += runs[1][1] == 1
        counts["the last noise run has length 1"] += runs[-1][1] == 1
        counts["the first kept run has length >= 4"] += runs[0][1] >= 4
    p_one = (k - 1) / (n - 1)
    p_long = math.comb(n - 4, k - 1) / math.comb(n - 1, k - 1)
    for event, count in counts.items():
        p = p_long if ">=" in event else p_one
        expect(within_sigma(count, draws, p),
               f"in {draws} masks of random_spans_noise_mask(20, 0.5, 2.5), {event} {count} times "
               f"({count / draws:.3f}); a uniformly random split gives {p:.3f} (5-sigma band). Split the tokens "
               "by choosing the span boundaries uniformly at random (a random permutation of the gaps)")


# =============================================================== span_corrupt
def _corrupt(student, token_ids, noise_mask, **kwargs):
    value = student.call(token_ids, noise_mask, **kwargs)
    expect(type(value) in (tuple, list) and len(value) == 2,
           f"span_corrupt must return a pair (inputs, targets), got {type(value).__name__}")
    return value


def _expect_corruption(student, token_ids, noise_mask, what: str, **kwargs) -> None:
    inputs, targets = _corrupt(student, token_ids, noise_mask, **kwargs)
    expected_inputs, expected_targets = span_corruption.span_corrupt(token_ids, noise_mask, **kwargs)
    mask = noise_mask.int().tolist()
    expect_equal(inputs, expected_inputs, what=f"the inputs of {what} (mask {mask})")
    expect_equal(targets, expected_targets, what=f"the targets of {what} (mask {mask})")


@graded("test_span_corrupt")
def test_span_corrupt_worked_example(student):
    token_ids = torch.arange(10)  # Thank you for inviting me to your party last week
    noise_mask = torch.tensor([0, 0, 1, 1, 0, 0, 0, 0, 1, 0], dtype=torch.bool)
    inputs, targets = _corrupt(student, token_ids, noise_mask, sentinel_ids=[100, 101, 102])
    # public: the release's visible test shows this very case
    expect_equal(inputs, torch.tensor([0, 1, 100, 4, 5, 6, 7, 101, 9]), public=True,
                 what="the inputs of the worked example (Thank you <X> me to your party <Y> week)")
    expect_equal(targets, torch.tensor([100, 2, 3, 101, 8, 102]), public=True,
                 what="the targets of the worked example (<X> for inviting <Y> last <Z>)")


@graded("test_span_corrupt")
@on_devices
def test_span_corrupt_random_masks(student, device):
    for seed, length in enumerate([10, 37, 128]):
        token_ids = torch.randint(0, 32000, (length,), generator=_gen(seed)).to(device)
        noise_mask = span_corruption.random_spans_noise_mask(length, generator=_gen(seed + 10)).to(device)
        for eos in (None, 1):
            _expect_corruption(student, token_ids, noise_mask, f"span_corrupt of {length} tokens, eos_id={eos}",
                               sentinel_ids=SENTINELS, eos_id=eos)


@graded("test_span_corrupt")
def test_span_corrupt_masks_at_the_edges(student):
    masks = {
        "a mask that starts with noise": [1, 1, 0, 0, 1, 0, 0],
        "a mask that ends with noise (the final sentinel is still appended)": [0, 0, 1, 0, 0, 1, 1],
        "alternating one-token spans": [1, 0, 1, 0, 1, 0, 1, 0],
        "all tokens but one dropped": [1, 1, 1, 0, 1, 1],
        "no noise at all (targets: just the first sentinel)": [0, 0, 0, 0],
        "a single token, no noise": [0],
        "a single dropped token": [1],
    }
    for seed, (name, mask) in enumerate(masks.items()):
        token_ids = torch.randint(0, 500, (len(mask),), generator=_gen(seed))
        _expect_corruption(student, token_ids, torch.tensor(mask, dtype=torch.bool), f"span_corrupt with {name}",
                           sentinel_ids=SENTINELS[:8], eos_id=1)


@graded("test_span_corrupt")
@on_devices
def test_span_corrupt_sentinel_formats_and_too_few_sentinels(student, device):
    token_ids = torch.randint(0, 500, (12,), generator=_gen(30)).to(device)
    noise_mask = torch.tensor([0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0], dtype=torch.bool, device=device)  # 3 spans
    _expect_corruption(student, token_ids, noise_mask, "span_corrupt with sentinel_ids given as a tensor",
                       sentinel_ids=torch.tensor(SENTINELS[:4], device=device))
    _expect_corruption(student, token_ids, noise_mask, "span_corrupt with exactly S + 1 sentinel ids",
                       sentinel_ids=SENTINELS[:4], eos_id=1)
    reply = student.probe("raises", name="span_corrupt", args=[token_ids, noise_mask],
                          kwargs={"sentinel_ids": SENTINELS[:3]})
    expect(reply["raised"] == "ValueError",
           "span_corrupt with 3 spans and only 3 sentinel ids (4 are needed: one per span and a final one) must "
           "raise ValueError, " + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


# =============================================================== span_corruption_loss
def _span_logits(batch: int, length: int, vocab: int, *, seed: int, device: str, scale: float = 2.0) -> torch.Tensor:
    return (torch.randn(batch, length, vocab, generator=_gen(seed)) * scale).to(device)


def _span_targets(lengths: list[int], width: int, vocab: int, *, seed: int, device: str) -> torch.Tensor:
    """[len(lengths), width] random target ids, row b scored on its first lengths[b] positions and
    right-padded with -100 (the layout of a batch of ``span_corrupt`` targets)."""
    ids = torch.randint(0, vocab, (len(lengths), width), generator=_gen(seed))
    scored = torch.arange(width) < torch.tensor(lengths).unsqueeze(1)
    return ids.masked_fill(~scored, -100).to(device)


def _rounded(losses: torch.Tensor) -> list[float]:
    return [round(value, 4) + 0.0 for value in losses.tolist()]  # + 0.0 shows -0.0 as 0.0


def _expect_span_losses(student, logits: torch.Tensor, targets: torch.Tensor, *, what: str,
                        atol: float = 1e-4, rtol: float = 1e-5) -> torch.Tensor:
    """The student's losses of ``logits`` and ``targets``: one float32 loss per row, on the device
    of the logits, not NaN, equal to the reference's."""
    actual = student.call(logits, targets)
    expected = span_corruption.span_corruption_loss(logits, targets)
    expect_tensor(actual, dtype=torch.float32, shape=(logits.size(0),), device=logits.device,
                  what=f"{what} (a float32 tensor [B], one loss per row, on the device of logits)")
    for bad, word in [(torch.isnan(actual), "NaN"), (torch.isinf(actual), "infinite")]:
        expect(not bool(bad.any()), f"{what} is {word} at rows {bad.nonzero().flatten().tolist()}")
    expect_close(actual, expected, atol=atol, rtol=rtol, what=f"{what} (your per-row losses {_rounded(actual)})")
    return actual


@graded("test_span_corruption_loss")
@on_devices
def test_span_corruption_loss_matches_reference(student, device):
    # (scored targets per row, padded width, vocabulary size)
    cases = [([7, 7], 7, 11), ([5, 2, 8], 8, 13), ([1], 1, 5), ([12, 3, 9, 12], 12, 50)]
    for number, (lengths, width, vocab) in enumerate(cases):
        logits = _span_logits(len(lengths), width, vocab, seed=500 + number, device=device)
        targets = _span_targets(lengths, width, vocab, seed=520 + number, device=device)
        what = (f"span_corruption_loss on logits {list(logits.shape)} with {lengths} scored targets per row "
                "(each row: the sum of -log p(target) over its scored positions)")
        # tolerance: float32 rounding of a sum of up to 12 log-softmax values of size ~5
        _expect_span_losses(student, logits, targets, what=what)


@graded("test_span_corruption_loss")
@on_devices
def test_span_corruption_loss_padding_and_empty_rows(student, device):
    lengths, width, vocab = [6, 0, 3, 1, 0], 6, 9
    logits = _span_logits(len(lengths), width, vocab, seed=540, device=device)
    targets = _span_targets(lengths, width, vocab, seed=541, device=device)
    what = (f"span_corruption_loss with {lengths} scored targets per row (-100 is not scored; a row of padding "
            "only is 0.0)")
    actual = _expect_span_losses(student, logits, targets, what=what)
    empty = (targets == -100).all(dim=1)
    expect(bool((actual[empty] == 0).all()),
           f"span_corruption_loss gives rows with nothing scored {actual[empty].tolist()}; each must be 0.0")
    # What the logits say at padded positions must not matter.
    padded = (targets == -100).unsqueeze(-1)
    other = _span_logits(len(lengths), width, vocab, seed=542, device=device, scale=50.0)
    noisy = torch.where(padded, other, logits)
    _expect_span_losses(student, noisy, targets,
                        what="span_corruption_loss with other logits at the padded positions (they are not scored)")
    nothing = torch.full((2, 4), -100, device=device)
    logits = _span_logits(2, 4, vocab, seed=543, device=device)
    _expect_span_losses(student, logits, nothing, atol=1e-7, rtol=0.0,
                        what="span_corruption_loss of a batch with no scored target at all (0.0 per row, not NaN)")


@graded("test_span_corruption_loss")
@on_devices
def test_span_corruption_loss_scores_each_position_against_its_own_target(student, device):
    # Logits that are confident and right when position t is scored against targets[:, t], and
    # confidently wrong against any neighbour: a shifted pairing costs about 20 per target.
    lengths, width, vocab = [5, 3, 1], 5, 7
    targets = _span_targets(lengths, width, vocab, seed=560, device=device)
    logits = torch.full((len(lengths), width, vocab), -10.0, device=device)
    logits.scatter_(-1, targets.clamp(min=0).unsqueeze(-1), 10.0)
    _expect_span_losses(student, logits, targets, atol=1e-5, rtol=0.0,
                        what="span_corruption_loss on logits that put a score of 10 on targets[b, t] at position t "
                             "(logits[b, t] predicts targets[b, t]; there is no shift, unlike clm_loss)")
    logits = _span_logits(len(lengths), width, vocab, seed=561, device=device)
    _expect_span_losses(student, logits, targets,
                        what=f"span_corruption_loss on random logits {list(logits.shape)} with {lengths} scored "
                             "targets per row (logits[b, t] is scored against targets[b, t])")


@graded("test_span_corruption_loss")
@on_devices
def test_span_corruption_loss_large_logits_and_other_dtypes(student, device):
    lengths, width, vocab = [8, 5, 2], 8, 17
    base = _span_logits(len(lengths), width, vocab, seed=580, device=device)
    targets = _span_targets(lengths, width, vocab, seed=581, device=device)
    for name, logits in [("logits + 1000", base + 1000), ("1000 * logits", 1000 * base)]:
        # tolerance: float32 rounding; inputs near 1000 are only known to 6e-5 (one ulp), and a
        # log-sum-exp formulation is off by about that per target, 8 targets to a row
        _expect_span_losses(student, logits, targets, atol=1e-3, rtol=1e-5,
                            what=f"span_corruption_loss of {name} (use a log-softmax or log-sum-exp that "
                                 "subtracts the maximum)")
    for dtype in (torch.float16, torch.bfloat16, torch.float64):
        logits = base.to(dtype)
        # tolerance: float32 rounding of a sum of 8 terms; a loss computed in half precision is
        # off by ~1e-3 per target
        _expect_span_losses(student, logits, targets, atol=2e-4, rtol=0.0,
                            what=f"span_corruption_loss of {dtype} logits (compute in float32: logits.float(); "
                                 "return float32)")
