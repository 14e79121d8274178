"""What a hidden test needs, and nothing more.

Hidden tests live in ``autograder/hidden/`` and run in the trusted grader process.
They reach the student's code only through :class:`Student` (the one seam between
student code and tests), draw their inputs from :func:`generator` (seeds of each
student's own where the course has a secret: ``autograder.draws``), compute the
expected answer with ``autograder.reference``, and compare with the checks below,
each with an explicit tolerance. A failed check raises :class:`GradingFailure`,
whose message is all the student sees: never the test's code.

Each test is marked with the grade cell it scores and its points::

    @graded("test_softmax", points=1)
    def test_rows_sum_to_one(student, device): ...
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from .draws import PUBLIC, Draws


class GradingFailure(AssertionError):
    """A check failed; the message is shown to the student as is."""


class PartialCredit(GradingFailure):
    """A check that earns ``fraction`` (0 to 1) of its test's points: some of several
    independent answers were right. The message says which were not."""

    def __init__(self, message: str, fraction: float):
        super().__init__(message)
        self.fraction = min(1.0, max(0.0, float(fraction)))


class Forbidden(Exception):
    """The item used a shortcut that does the work for the student."""


class Missing(Exception):
    """The item's solution cell is not in the submission, or did not define the name."""


class CellFailed(Exception):
    """The item's solution cell raised when it was executed."""


def graded(cell: str, points: float):
    """Mark a test as scoring ``points`` of the visible-test cell ``cell``."""
    return pytest.mark.graded(cell=cell, points=points)


def on_devices(test):
    """Run a test on the CPU and, where a GPU is visible, on CUDA as well.

    The test's points are shared by the variants that run, so a machine without
    a GPU grades the CPU variant for all of them.
    """
    params = [
        pytest.param("cpu", id="cpu"),
        pytest.param("cuda", id="cuda", marks=pytest.mark.cuda),
    ]
    return pytest.mark.parametrize("device", params)(test)


# ----------------------------------------------------------------- the seam
# The grading session of the suite that is running (``autograder.grading``'s, or the
# tests' in-process stand-in); the hidden suites reach it through ``Student``.
_ACTIVE = None
# The seeds of the student being graded (public ones unless a course secret is set).
_DRAWS: Draws = PUBLIC


@contextlib.contextmanager
def active_session(session, draws: Draws = PUBLIC) -> Iterator[None]:
    global _ACTIVE, _DRAWS
    previous = _ACTIVE, _DRAWS
    _ACTIVE, _DRAWS = session, draws
    try:
        yield
    finally:
        _ACTIVE, _DRAWS = previous


def current_session():
    if _ACTIVE is None:
        raise RuntimeError("hidden tests run only inside the grader (python -m autograder grade)")
    return _ACTIVE


def seed_for(number: int) -> int:
    """The seed of the hidden inputs a test numbers ``number``, for the student being graded:
    ``number`` itself without a course secret, a number of this student's own with one."""
    return _DRAWS.seed(number)


def generator(number: int, device: str = "cpu") -> torch.Generator:
    """A fresh generator for the hidden inputs numbered ``number`` (see :func:`seed_for`)."""
    return torch.Generator(device=device).manual_seed(seed_for(number))


def redrawn(number: int, draw: Callable[[torch.Generator], Any], accept: Callable[[Any], bool]) -> Any:
    """``draw(generator(number))``, or where ``accept`` refuses it, the first accepted draw of the
    streams that follow (numbers ``number + 1_000_000 * i``): for inputs that must keep a margin
    (no near-tie an implementation's rounding could turn), whatever the seeds drawn."""
    for attempt in range(50):
        value = draw(generator(number + 1_000_000 * attempt))
        if accept(value):
            return value
    raise RuntimeError(f"no accepted draw of the hidden inputs {number} in 50 attempts")


def top_gaps_at_least(values: torch.Tensor, gap: float, top: int) -> bool:
    """Along the last dimension, are the ``top + 1`` largest values at least ``gap`` apart?"""
    largest = values.float().topk(min(top + 1, values.size(-1)), dim=-1).values
    return bool((largest[..., :-1] - largest[..., 1:] >= gap).all())


def drawn_ints(number: int, low: int, high: int, count: int = 1) -> list[int]:
    """``count`` whole numbers in [low, high) for the hidden inputs numbered ``number``: the
    sizes and counts of a test's drawn case (see :func:`seed_for`)."""
    return torch.randint(low, high, (count,), generator=generator(number)).tolist()


class Student:
    """Calls into the student's sandboxed code on behalf of one graded item.

    ``solution`` is the grade_id of the solution cell (the function's name); the
    session knows whether that cell is present, whether it ran, and whether it
    uses a forbidden shortcut, and raises :class:`Missing`, :class:`CellFailed`
    or :class:`Forbidden` before anything is called.
    """

    def __init__(self, session, solution: str):
        self._session = session
        self.solution = solution

    def call(self, *args: Any, name: str | None = None, timeout: float | None = None, **kwargs: Any) -> Any:
        """Call the student's ``name`` (default: the item's function) with plain data."""
        return self._session.call(self.solution, name or self.solution, args, kwargs, timeout=timeout)

    def probe(self, probe: str, timeout: float | None = None, **params: Any) -> Any:
        """Run a trusted probe (``autograder.sandbox.probes``) next to the student's code."""
        return self._session.probe(self.solution, probe, params, timeout=timeout)

    def value(self, name: str | None = None) -> Any:
        """A top-level constant of the student's (e.g. an answer dict)."""
        return self._session.probe(self.solution, "constant", {"name": name or self.solution}, timeout=None)


# ----------------------------------------------------------------- checks
def expect_tensor(actual: Any, *, dtype=None, shape=None, device=None, what: str = "the result") -> torch.Tensor:
    """``actual`` is exactly a ``torch.Tensor`` with the given dtype, shape, device."""
    if type(actual) is not torch.Tensor:
        raise GradingFailure(f"{what} must be a torch.Tensor, got {type(actual).__name__}")
    if shape is not None and tuple(actual.shape) != tuple(shape):
        raise GradingFailure(f"{what} has shape {tuple(actual.shape)}, expected {tuple(shape)}")
    if dtype is not None and actual.dtype != dtype:
        raise GradingFailure(f"{what} has dtype {actual.dtype}, expected {dtype}")
    if device is not None and actual.device.type != torch.device(device).type:
        raise GradingFailure(f"{what} is on {actual.device}, expected {torch.device(device).type}")
    return actual


def expect_close(actual: Any, expected: torch.Tensor, *, atol: float, rtol: float = 0.0,
                 what: str = "the result", check_dtype: bool = True) -> None:
    """Same type, shape, device (and dtype) as ``expected``, values within tolerance."""
    expect_tensor(actual, shape=expected.shape, device=expected.device,
                  dtype=expected.dtype if check_dtype else None, what=what)
    a, e = actual.double(), expected.double()
    if not torch.equal(torch.isnan(a), torch.isnan(e)):
        raise GradingFailure(f"{what} has NaN where the expected values have none (or the reverse)")
    # An infinity must be matched exactly: beside one, the tolerance below is no bound
    # (inf - inf is NaN, and atol + 0 * inf is NaN), so any value would pass.
    infinite = torch.isinf(a) | torch.isinf(e)
    if not torch.equal(a[infinite], e[infinite]):
        raise GradingFailure(f"{what} has inf or -inf where the expected values do not (or the reverse)")
    finite = torch.isfinite(e)
    diff = (a[finite] - e[finite]).abs()
    allowed = atol + rtol * e[finite].abs()
    if diff.numel() and bool((diff > allowed).any()):
        raise GradingFailure(
            f"{what} differs from the expected values by up to {float(diff.max()):.3g} "
            f"(tolerance: atol={atol:g}, rtol={rtol:g})"
        )


def expect_equal(actual: Any, expected: Any, *, what: str = "the result") -> None:
    """Exact equality; tensors must match in type, dtype, shape, device and values."""
    if type(expected) is torch.Tensor:
        expect_tensor(actual, dtype=expected.dtype, shape=expected.shape, device=expected.device, what=what)
        if not torch.equal(actual, expected):
            wrong = int((actual != expected).sum())
            raise GradingFailure(f"{what} differs from the expected tensor in {wrong} of {expected.numel()} entries")
        return
    if type(actual) is not type(expected) and not (
        isinstance(expected, (int, float)) and type(actual) in (int, float) and type(actual) is not bool
    ):
        raise GradingFailure(f"{what} must be a {type(expected).__name__}, got {type(actual).__name__}")
    if actual != expected:
        raise GradingFailure(f"{what} is {actual!r}, expected {expected!r}")


def expect_number(actual: Any, expected: float, *, rel: float = 1e-6, abs_tol: float = 0.0,
                  what: str = "the result") -> None:
    """A Python int/float (or 0-dim tensor) close to ``expected``."""
    if type(actual) is torch.Tensor and actual.dim() == 0:
        actual = actual.item()
    if type(actual) not in (int, float):
        raise GradingFailure(f"{what} must be a number, got {type(actual).__name__}")
    if not math.isclose(actual, expected, rel_tol=rel, abs_tol=abs_tol):
        raise GradingFailure(f"{what} is {actual!r}, expected {expected!r} (rel {rel:g}, abs {abs_tol:g})")


def expect_pair(actual: Any, *, what: str, names: str = "a tuple of two values") -> tuple[Any, Any]:
    """A tuple or list of exactly two values (e.g. ``(probs, ids)``), unpacked."""
    if type(actual) not in (tuple, list):
        raise GradingFailure(f"{what} must return a pair ({names}), got {type(actual).__name__}")
    if len(actual) != 2:
        raise GradingFailure(f"{what} must return a pair ({names}), got a {type(actual).__name__} "
                             f"of length {len(actual)}")
    return actual[0], actual[1]


def expect_each(right: int, total: int, message: str) -> None:
    """``total`` independent answers, ``right`` of them right: the test earns that share of its
    points (per answer, not all or nothing), with ``message`` when any is wrong."""
    if right < total:
        raise PartialCredit(message, right / total if total else 0.0)


def expect(condition: bool, message: str) -> None:
    """A property check with the message a student needs to find the bug."""
    if not condition:
        raise GradingFailure(message)


def within_sigma(count: int, trials: int, p: float, *, sigmas: float = 5.0) -> bool:
    """Is ``count`` successes in ``trials`` consistent with rate ``p`` (normal approx.)?"""
    sd = math.sqrt(trials * p * (1 - p))
    return abs(count - trials * p) <= sigmas * sd + 1e-9
