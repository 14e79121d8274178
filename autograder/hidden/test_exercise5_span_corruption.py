"""Hidden tests of exercise5_span_corruption.ipynb: T5's random span noise mask
and its (inputs, targets) construction.

The noise mask is random: its counts and its layout (kept first, noise last,
alternating) are checked exactly, and the randomness of the split into spans is
checked against the uniform distribution over splits with 5-sigma bands. Masks
are drawn with a ``torch.Generator`` built in the sandbox by the ``seeded_call``
probe.
"""
from __future__ import annotations

import math

import torch

from autograder.reference import span_corruption
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.suite import expect, expect_equal, expect_tensor, generator, graded, on_devices, within_sigma

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
    values = list(reply["values"].unbind()) if reply["stacked"] else reply["values"]
    return [expect_tensor(value, dtype=torch.bool, shape=(length,), device=device,
                          what=f"random_spans_noise_mask({length}) (a BoolTensor [length] on the generator's device)").cpu()
            for value in values]


def _expect_layout(mask: torch.Tensor, num_noise: int, num_spans: int, what: str) -> None:
    runs = _runs(mask)
    spans = sum(1 for noise, _ in runs if noise)
    expect(int(mask.sum()) == num_noise,
           f"{what} has {int(mask.sum())} noise tokens, expected num_noise = {num_noise}")
    expect(spans == num_spans, f"{what} has {spans} noise spans, expected num_spans = {num_spans}")
    expect(not runs[0][0] and runs[-1][0],
           f"{what} must start with kept tokens and end with noise, got {mask.int().tolist()}")


# =============================================================== random_spans_noise_mask (4)
@graded("test_random_spans_noise_mask", points=1)
@on_devices
def test_random_spans_noise_mask_counts_and_layout(student, device):
    settings = [(10, 0.15, 3.0), (30, 0.15, 3.0), (100, 0.15, 3.0), (512, 0.15, 3.0), (57, 0.3, 2.0), (20, 0.5, 2.5)]
    for seed, (length, density, span) in enumerate(settings):
        num_noise, num_spans = _rule(length, density, span)
        for mask in _noise_masks(student, length, device, seed=seed, repeat=3, noise_density=density,
                                 mean_span_length=span):
            _expect_layout(mask, num_noise, num_spans,
                           f"random_spans_noise_mask({length}, noise_density={density}, mean_span_length={span})")


@graded("test_random_spans_noise_mask", points=1)
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
            expect(mask.int().tolist() == expected, f"{what} must be {expected}, got {mask.int().tolist()}")
        else:
            _expect_layout(mask, *expected, what)
    reply = student.probe("raises", name="random_spans_noise_mask", args=[1])
    expect(reply["raised"] == "ValueError", "random_spans_noise_mask(1) must raise ValueError (length >= 2), "
           + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


@graded("test_random_spans_noise_mask", points=1)
@on_devices
def test_random_spans_noise_mask_randomness_comes_from_generator(student, device):
    first = _noise_masks(student, 100, device, seed=1, repeat=2)
    again = _noise_masks(student, 100, device, seed=1)
    other = _noise_masks(student, 100, device, seed=2)
    expect(torch.equal(first[0], again[0]),
           "two calls with generators seeded alike gave different masks: draw every random number from "
           "generator (torch.randperm(n, generator=generator, device=generator.device))")
    expect(not torch.equal(first[0], other[0]), "generators with different seeds gave the same mask")
    expect(not torch.equal(first[0], first[1]),
           "two consecutive calls with one generator gave the same mask: draw from the generator, do not re-seed")


@graded("test_random_spans_noise_mask", points=1)
@on_devices
def test_random_spans_noise_mask_splits_are_uniform(student, device):
    # length 20, density 0.5, mean span 2.5: 10 noise and 10 kept tokens, each split into 4 runs.
    # For a uniformly random split of n items into k positive parts, a given part has length 1
    # with probability (k - 1) / (n - 1) and length >= m with probability C(n - m, k - 1) / C(n - 1, k - 1).
    draws, n, k = 2000, 10, 4
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


# =============================================================== span_corrupt (4)
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


@graded("test_span_corrupt", points=1)
def test_span_corrupt_worked_example(student):
    token_ids = torch.arange(10)  # Thank you for inviting me to your party last week
    noise_mask = torch.tensor([0, 0, 1, 1, 0, 0, 0, 0, 1, 0], dtype=torch.bool)
    inputs, targets = _corrupt(student, token_ids, noise_mask, sentinel_ids=[100, 101, 102])
    expect_equal(inputs, torch.tensor([0, 1, 100, 4, 5, 6, 7, 101, 9]),
                 what="the inputs of the worked example (Thank you <X> me to your party <Y> week)")
    expect_equal(targets, torch.tensor([100, 2, 3, 101, 8, 102]),
                 what="the targets of the worked example (<X> for inviting <Y> last <Z>)")


@graded("test_span_corrupt", points=1)
@on_devices
def test_span_corrupt_random_masks(student, device):
    for seed, length in enumerate([10, 37, 128]):
        token_ids = torch.randint(0, 32000, (length,), generator=_gen(seed)).to(device)
        noise_mask = span_corruption.random_spans_noise_mask(length, generator=_gen(seed + 10)).to(device)
        for eos in (None, 1):
            _expect_corruption(student, token_ids, noise_mask, f"span_corrupt of {length} tokens, eos_id={eos}",
                               sentinel_ids=SENTINELS, eos_id=eos)


@graded("test_span_corrupt", points=1)
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


@graded("test_span_corrupt", points=1)
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
