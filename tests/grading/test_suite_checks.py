"""The ``expect_*`` checks of ``autograder.suite`` against answers made to slip through:
NaN and inf where the reference has values (or the reverse), and values that claim
equality without being the type the check asks for; and their messages, which tell a
student what is wrong and never the expected value of a hidden case (the staff's
``detail`` has it)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from autograder.suite import (GradingFailure, PartialCredit, expect, expect_close, expect_each, expect_equal,
                              expect_number, expect_tensor, how_far)

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


# --------------------------------------------------------------------------- what a message may quote
def failure(check, *args, **kwargs) -> GradingFailure:
    with pytest.raises(GradingFailure) as caught:
        check(*args, **kwargs)
    return caught.value


def renderings(value: float) -> set[str]:
    """The ways a message could show ``value``: the formats the checks and the suites use."""
    return {text for x in (value, -value) for text in (repr(x), f"{x:.3g}", f"{x:g}", f"{x:.4f}", f"{x:.2f}",
                                                       str(round(x, 4)), f"{x:.6g}", f"{x:e}", f"{x:.2e}")}


def quotes(message: str, value: float) -> list[str]:
    return sorted(text for text in renderings(value) if text in message)


def test_a_0_dim_result_returned_as_0_does_not_give_away_the_expected_value():
    # The largest difference of a scalar returned as 0 is the expected value itself.
    caught = failure(expect_close, torch.tensor(0.0), torch.tensor(2.3456), atol=1e-5, rtol=1e-5, what="the loss")
    assert not quotes(str(caught), 2.3456), str(caught)
    assert "the loss differs from the expected values" in str(caught)
    assert "off by more than 1000x the tolerance (atol=1e-05, rtol=1e-05)" in str(caught)
    assert "2.3456" in caught.detail and "got 0" in caught.detail, caught.detail
    assert caught.compared.item() == pytest.approx(2.3456) and not caught.public


def test_a_number_is_quoted_as_the_students_never_as_the_expected_one():
    caught = failure(expect_number, 1.0, 1e8, what="training_flops(1e8, 2e9)")
    assert str(caught) == "training_flops(1e8, 2e9) is 1.0, off by more than 1000x the tolerance (rel 1e-06, abs 0)"
    assert "100000000.0" in caught.detail
    exact = failure(expect_number, 3, 4, rel=0.0, what="the count")
    assert str(exact) == "the count is 3, not the expected value (rel 0, abs 0)"
    assert "expected 4" in exact.detail


@pytest.mark.parametrize("actual, expected", [(3, 4), (5, 4), ("abc", "abd"), ([1, 2], [1, 3])])
def test_expect_equal_says_that_a_value_is_wrong_not_what_is_right(actual, expected):
    caught = failure(expect_equal, actual, expected, what="the result")
    assert str(caught) == f"the result is {actual!r}, not the expected value"
    assert f"expected {expected!r}" in caught.detail


def test_a_tensor_message_counts_the_wrong_entries_without_their_values_or_places():
    expected = torch.tensor([[11, 12, 13], [14, 15, 16]])
    actual = expected.clone()
    actual[1, 2] = 99
    caught = failure(expect_equal, actual, expected, what="the ids")
    assert str(caught) == "the ids differs from the expected tensor in 1 of 6 entries"
    assert "index (1, 2): got 99, expected 16" in caught.detail
    values = torch.linspace(0.123, 0.987, 12).reshape(3, 4)
    caught = failure(expect_close, torch.zeros(3, 4), values, atol=1e-6, what="the weights")
    assert str(caught) == ("the weights differs from the expected values in 12 of 12 entries; the worst is off by "
                           "more than 1000x the tolerance (atol=1e-06, rtol=0)")
    assert all(not quotes(str(caught), v) for v in values.flatten().tolist())
    assert "expected 0.987" in caught.detail


@pytest.mark.parametrize("ratio, words", [(3.2, "off by up to 10x the tolerance"),
                                          (47.0, "off by 10x to 100x the tolerance"),
                                          (512.0, "off by 100x to 1000x the tolerance"),
                                          (3.1e5, "off by more than 1000x the tolerance")])
def test_how_far_off_is_told_in_decades_of_the_tolerance_only(ratio, words):
    # A finer figure beside the student's own scalar would give the expected value away.
    atol, expected = 1e-4, 0.75
    caught = failure(expect_close, torch.tensor([expected + ratio * atol]), torch.tensor([expected]), atol=atol,
                     what="x")
    assert words in str(caught) and how_far(ratio) == words
    assert str(ratio) not in str(caught) and not quotes(str(caught), expected)
    actual = expected + ratio * atol
    caught = failure(expect_number, actual, expected, rel=0.0, abs_tol=atol, what="x")
    assert str(caught) == f"x is {actual!r}, {words} (rel 0, abs 0.0001)"  # the student's own value, nothing else


def test_a_hidden_shape_is_not_quoted_but_its_dimensions_are_named():
    caught = failure(expect_tensor, torch.zeros(1, 9), shape=(1, 12), what="greedy_decode(...)")
    assert str(caught) == "greedy_decode(...) has shape (1, 9), which differs from the expected shape in dimension 1"
    assert "expected (1, 12)" in caught.detail
    caught = failure(expect_tensor, torch.zeros(4), shape=(2, 2), what="x")
    assert str(caught) == "x has shape (4,); it must have 2 dimensions"


def test_a_public_case_keeps_its_values():
    caught = failure(expect_equal, torch.tensor([0, 1, 100]), torch.tensor([0, 1, 101]), what="the worked example",
                     public=True)
    assert "got 100, expected 101" in str(caught) and caught.public
    caught = failure(expect_number, 551.0, 552.0, what="co2_tonnes", public=True)
    assert "expected 552.0" in str(caught)
    caught = failure(expect_tensor, torch.zeros(3), shape=(4,), what="x", public=True)
    assert "expected (4,)" in str(caught)


def test_property_checks_and_partial_credit_keep_a_detail_for_the_staff():
    caught = failure(expect, False, "2 of 3 predictions are wrong", detail="reviews 0 and 2: expected 1, 0")
    assert (str(caught), caught.detail) == ("2 of 3 predictions are wrong", "reviews 0 and 2: expected 1, 0")
    assert failure(expect, False, "m").detail == "m", "without a detail, the staff read the message"
    with pytest.raises(PartialCredit) as caught:
        expect_each(3, 4, "3 of the 4 are right", detail="wrong: 'the Latin alphabet'")
    assert (caught.value.fraction, caught.value.detail) == (0.75, "wrong: 'the Latin alphabet'")
