"""The ``expect_*`` checks of ``autograder.suite`` against answers made to slip through:
NaN and inf where the reference has values (or the reverse), and values that claim
equality without being the type the check asks for."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from autograder.suite import GradingFailure, expect_close, expect_equal, expect_number, expect_tensor

INF, NAN = math.inf, math.nan


@pytest.mark.parametrize("actual, expected", [
    ([NAN, 1.0], [0.5, 1.0]),
    ([INF, 1.0], [0.5, 1.0]),
    ([0.5, 1.0], [INF, 1.0]),
    ([0.5, 1.0], [-INF, 1.0]),
    ([INF, 1.0], [-INF, 1.0]),
    ([0.5, 1.0], [NAN, 1.0]),
])
@pytest.mark.parametrize("rtol", [0.0, 1e-5])
def test_expect_close_refuses_nan_and_inf_that_do_not_match(actual, expected, rtol):
    with pytest.raises(GradingFailure):
        expect_close(torch.tensor(actual), torch.tensor(expected), atol=1e-6, rtol=rtol)


def test_expect_close_accepts_matching_nan_and_inf():
    expected = torch.tensor([NAN, INF, -INF, 1.0])
    expect_close(torch.tensor([NAN, INF, -INF, 1.0 + 1e-7]), expected, atol=1e-6, rtol=0.0)


class Anything:
    def __eq__(self, other):
        return True

    def __bool__(self):
        return True

    def __float__(self):
        return 0.0


class Close(float):
    def __eq__(self, other):
        return True

    __hash__ = float.__hash__


@pytest.mark.parametrize("actual", [Anything(), np.zeros(3, dtype=np.float32), np.float32(0.0),
                                    torch.zeros(3).as_subclass(type("Sub", (torch.Tensor,), {}))])
def test_expect_tensor_takes_only_a_plain_tensor(actual):
    with pytest.raises(GradingFailure, match="must be a torch.Tensor"):
        expect_tensor(actual)


@pytest.mark.parametrize("actual", [Anything(), Close(0.0), np.float64(1.0), True, NAN, INF])
def test_expect_number_refuses_lookalikes_nan_and_inf(actual):
    with pytest.raises(GradingFailure):
        expect_number(actual, 1.0)


@pytest.mark.parametrize("actual", [Anything(), Close(1.0), np.float64(1.0), NAN])
def test_expect_equal_refuses_lookalikes_and_nan(actual):
    with pytest.raises(GradingFailure):
        expect_equal(actual, 1.0)
