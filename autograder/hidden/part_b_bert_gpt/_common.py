"""Seeded inputs and the dictionary check that several sections of the part_b_bert_gpt suite share."""
from __future__ import annotations

import torch

from autograder.suite import expect, expect_number, generator


def _gen(seed: int) -> torch.Generator:
    return generator(seed)


def _randn(*shape: int, seed: int, scale: float = 1.0, device: str = "cpu",
           dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return (torch.randn(*shape, generator=_gen(seed)) * scale).to(device=device, dtype=dtype)


def _expect_dict_close(actual, expected: dict, *, rel: float, abs_tol: float = 0.0, what: str) -> None:
    expect(type(actual) is dict, f"{what} must return a dict, got {type(actual).__name__}")
    expect(set(actual) == set(expected),
           f"{what} must have exactly the keys {sorted(expected)}, got {sorted(actual)}")
    for key, value in expected.items():
        expect_number(actual[key], value, rel=rel, abs_tol=abs_tol, what=f"{what}[{key!r}]")
