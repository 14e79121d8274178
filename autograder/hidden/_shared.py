"""Checks that the hidden suites of several notebooks share: a function that draws random
numbers draws them from the generator it is given, or from PyTorch's global one when it is
given none. (Not a suite: pytest collects only a notebook's test_*.py modules.)"""
from __future__ import annotations

import torch

from autograder.suite import expect


def _expect_draws_from_the_generator(first, again, other, *, differ: str, same: str, hint: str) -> None:
    """``first``: the results of two consecutive calls with one seeded generator; ``again``: of a
    call with a generator seeded alike; ``other``: with another seed. Generators seeded alike give
    alike results, other seeds and consecutive calls other ones. ``differ`` and ``same`` say what
    the calls did ("gave different masks", "gave the same mask"); ``hint``, how to draw right."""
    expect(torch.equal(first[0], again[0]), f"two calls with generators seeded alike {differ}: {hint}")
    expect(not torch.equal(first[0], other[0]), f"generators with different seeds {same}")
    expect(not torch.equal(first[0], first[1]),
           f"two consecutive calls with one generator {same}: draw from the generator, do not re-seed")


def _expect_draws_from_the_global_generator(seeded, alike, unlike, *, differ: str) -> None:
    """The results of calls with generator=None after seeding PyTorch's global generator: alike
    for alike seeds (``seeded``, ``alike``), other for another seed (``unlike``). ``differ`` says
    what the calls did when they differ ("gave different masks")."""
    expect(torch.equal(seeded, alike), "with generator=None, two calls after seeding PyTorch's global generator "
                                       f"alike {differ}: None means the global generator")
    expect(not torch.equal(seeded, unlike), "with generator=None, the seed of PyTorch's global generator made no "
                                            "difference: None means the global generator, not one of your own")
