"""Hidden tests of exercise2_finetune_vs_scratch.ipynb: ``subsample_balanced``,
the class-balanced subsets of the data-efficiency curve.

The per-class counts follow the docstring's round-robin rule exactly; which
examples are taken is random, so it is checked by its properties: a function of
(labels, n, seed) only, different for different seeds, and uniform within each
class (5-sigma bands). Many seeds are run in one ``subsample_balanced_seeds``
probe call. The notebook's written answers are graded by hand.
"""
from __future__ import annotations

import torch

from autograder.reference import exercises
from autograder.drivers import models, probes  # noqa: F401  (registers the fixtures and probes used below)
from autograder.suite import expect, expect_equal, expect_tensor, generator, graded, within_sigma


def _labels(counts: dict[int, int], seed: int) -> torch.Tensor:
    """A shuffled LongTensor with ``counts[c]`` entries of class c."""
    values = torch.cat([torch.full((k,), c, dtype=torch.long) for c, k in counts.items()])
    return values[torch.randperm(values.numel(), generator=generator(seed))]


def _class_counts(labels: torch.Tensor, indices: torch.Tensor) -> dict[int, int]:
    chosen = labels[indices]
    return {int(c): int((chosen == c).sum()) for c in torch.unique(labels)}


def _expect_valid(result, labels: torch.Tensor, n: int, what: str) -> torch.Tensor:
    result = expect_tensor(result, dtype=torch.long, shape=(n,), device="cpu",
                           what=f"{what} (a LongTensor [n] on the CPU)")
    if n:
        expect(int(result.min()) >= 0 and int(result.max()) < labels.numel(),
               f"{what} contains indices outside [0, {labels.numel() - 1}]")
    expect(bool((result[1:] > result[:-1]).all()),
           f"{what} must be sorted in increasing order without repetitions, got {result.tolist()[:20]}")
    return result


def _expect_counts(student, labels, n: int, seed: int, what: str) -> None:
    plain = torch.as_tensor(labels)
    result = _expect_valid(student.call(labels, n, seed), plain, n, what)
    expected = _class_counts(plain, exercises.subsample_balanced(labels, n, seed))
    actual = _class_counts(plain, result)
    rule = ("hand out the places one at a time, round the classes in increasing order, skipping a class whose "
            "examples are all taken")
    expect(actual == expected, f"{what} takes {actual} examples per class, not the counts of the docstring's rule "
                               f"({rule})",
           detail=f"{what} takes {actual} examples per class, expected {expected} ({rule})")


# =============================================================== subsample_balanced
@graded("test_subsample_balanced")
def test_subsample_balanced_counts_format_and_range(student):
    labels = _labels({0: 60, 1: 40}, seed=0)
    for n in (10, 7, 1, 99):
        _expect_counts(student, labels, n, seed=n, what=f"subsample_balanced(labels (60 x 0, 40 x 1), {n}, seed={n})")
    small_class = _labels({0: 30, 1: 25, 2: 2}, seed=1)
    _expect_counts(student, small_class, 20, seed=3,
                   what="subsample_balanced(labels with only 2 examples of class 2, 20, seed=3)")
    as_list = _labels({0: 9, 1: 12}, seed=2).tolist()  # a Python list, like a datasets column
    _expect_counts(student, as_list, 9, seed=4, what="subsample_balanced(a list of 21 ints, 9, seed=4)")
    odd_values = _labels({1: 7, 5: 7}, seed=3)  # classes need not be 0 .. C-1
    _expect_counts(student, odd_values, 5, seed=5, what="subsample_balanced(labels with classes 1 and 5, 5, seed=5)")

    result = _expect_valid(student.call(labels, 0, 0), labels, 0, "subsample_balanced(labels, 0, 0)")
    everything = _expect_valid(student.call(labels, 100, 0), labels, 100, "subsample_balanced(labels, 100, 0)")
    expect_equal(everything, torch.arange(100), what="subsample_balanced(labels, len(labels), 0) (every index)")
    del result
    for n in (101, -1):
        reply = student.probe("raises", name="subsample_balanced", args=[labels, n, 0])
        expect(reply["raised"] == "ValueError",
               f"subsample_balanced(100 labels, {n}, 0) must raise ValueError, "
               + ("it returned normally" if reply["raised"] is None else f"it raised {reply['raised']}"))


@graded("test_subsample_balanced")
def test_subsample_balanced_is_seeded_and_uniform(student):
    labels = _labels({0: 50, 1: 50}, seed=7)
    seeds = list(range(200)) + [0, 1, 2]
    reply = student.probe("subsample_balanced_seeds", labels=labels, n=10, seeds=seeds)
    values = reply["values"]
    if not reply["stacked"]:
        values = [_expect_valid(v, labels, 10, f"subsample_balanced(labels, 10, {s})") for v, s in zip(values, seeds)]
        values = torch.stack(values)
    values = expect_tensor(values, dtype=torch.long, shape=(len(seeds), 10), device="cpu",
                           what="subsample_balanced(labels, 10, seed) (a LongTensor [10] on the CPU)")
    expect_equal(reply["labels_after"], labels, what="the labels after the calls (do not modify them)")
    for again, seed in enumerate([0, 1, 2], start=200):
        expect(torch.equal(values[again], values[seed]),
               f"subsample_balanced(labels, 10, seed={seed}) returned {values[seed].tolist()} and then "
               f"{values[again].tolist()}: the result must depend only on (labels, n, seed) "
               "(draw from torch.Generator().manual_seed(seed), not from the global generator)")
    distinct = len({tuple(row) for row in values[:200].tolist()})
    expect(distinct >= 190, f"200 different seeds gave only {distinct} different subsets: "
                            "the examples of each class must be drawn at random, with the seed")
    for c in (0, 1):
        members = torch.nonzero(labels == c).flatten()
        first_half = set(members[:25].tolist())
        picked = [i for row in values[:200].tolist() for i in row if labels[i] == c]
        in_first_half = sum(i in first_half for i in picked)
        expect(len(picked) == 1000, f"class {c} got {len(picked)} places over 200 draws of 10 from 50 + 50 "
                                    "examples; it must get 5 in every draw")
        # each of the 50 members is equally likely: half of the picks fall on the first 25 members
        expect(within_sigma(in_first_half, len(picked), 0.5),
               f"over 200 seeds, {in_first_half} of the {len(picked)} examples taken from class {c} were among "
               "its first 25 members (about 500 expected): every example of a class must be equally likely")
