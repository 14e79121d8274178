"""What a hidden test needs, and nothing more.

Hidden tests live in ``autograder/hidden/`` and run in the trusted grader process.
They reach the student's code only through :class:`Student` (the one seam between
student code and tests), draw their inputs from :func:`generator` (seeds of each
student's own where the course has a secret: ``autograder.draws``), compute the
expected answer with ``autograder.reference``, and compare with the checks below,
each with an explicit tolerance. A failed check raises :class:`GradingFailure`,
whose message is all the student sees: never the test's code, and, for a hidden
or drawn case, never the expected value or anything it follows from (the reference's
output, the largest difference of a scalar, "is 3, should be 4"). The message says
what is wrong: the shape, dtype or device, the clause, how far off relative to the
tolerance. The failure's ``detail`` keeps the full text, with what the check compared
against, for the course staff only (the report's ``detail``; the formgrader shows it,
the feedback does not). A case the release's visible tests already show may quote its
values: its check says so with ``public=True``; the default is hidden.

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
    """A check failed. The message is shown to the student as is; ``detail`` (default: the
    message) is the course staff's view, with the values the check compared; ``compared``
    is the expected value a check compared against (None for a property check); ``public``
    marks a case whose values the release already shows."""

    def __init__(self, message: str, *, detail: str | None = None, compared: Any = None, public: bool = False):
        super().__init__(message)
        self.detail = message if detail is None else detail
        self.compared = compared
        self.public = public


class PartialCredit(GradingFailure):
    """A check that earns ``fraction`` (0 to 1) of its test's points: some of several
    independent answers were right. The message says how many were not."""

    def __init__(self, message: str, fraction: float, *, detail: str | None = None):
        super().__init__(message, detail=detail)
        self.fraction = min(1.0, max(0.0, float(fraction)))


class Forbidden(Exception):
    """The item used a shortcut that does the work for the student."""


class Missing(Exception):
    """The item's solution cell is not in the submission, or did not define the name."""


class CellFailed(Exception):
    """The item's solution cell raised when it was executed."""


def graded(cell: str, points: float = 1):
    """Mark a test as scoring ``points`` of the visible-test cell ``cell``.

    A cell's points are the sum of its tests' (its nbgrader metadata states them, and
    ``tests/grading/test_suites.py`` checks that the reference earns them all); every
    hidden test of the course scores the default point."""
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
# How far off a value is, in decades of the tolerance only: beside a student's own scalar, a
# finer figure ("off by 3.2x the tolerance") would give the expected value away to within the
# tolerance, up to its sign.
DECADES = (10, 100, 1000)
# A tensor of at most this many entries is shown whole in the staff's detail.
SHOWN_ENTRIES = 16


def how_far(ratio: float) -> str:
    """A difference of ``ratio`` times the tolerance (above 1), as a student may read it."""
    low = 1
    for high in DECADES:
        if ratio <= high:
            return f"off by up to {high}x the tolerance" if low == 1 else f"off by {low}x to {high}x the tolerance"
        low = high
    return f"off by more than {DECADES[-1]}x the tolerance"  # also inf and NaN


def _position(flat: int, shape) -> tuple[int, ...]:
    """The index of entry ``flat`` of a row-major tensor of ``shape``."""
    position = []
    for size in reversed(tuple(shape)):
        flat, index = divmod(flat, size)
        position.append(index)
    return tuple(reversed(position))


def _entry(tensor: torch.Tensor, position: tuple[int, ...]) -> str:
    value = tensor[position].item()
    return f"{value:.6g}" if isinstance(value, float) else repr(value)


def _shown(tensor: torch.Tensor) -> str:
    """A tensor's values for the staff's detail (its first SHOWN_ENTRIES when it is larger)."""
    flat = tensor.detach().flatten().cpu()
    values = [f"{v:.6g}" if isinstance(v, float) else repr(v) for v in flat[:SHOWN_ENTRIES].tolist()]
    return "[" + ", ".join(values) + (", ..." if flat.numel() > SHOWN_ENTRIES else "") + "]"


def _side_by_side(actual: torch.Tensor, expected: torch.Tensor) -> str:
    return f"; got {_shown(actual)}, expected {_shown(expected)}" if expected.numel() <= SHOWN_ENTRIES else ""


def expect_tensor(actual: Any, *, dtype=None, shape=None, device=None, what: str = "the result",
                  public: bool = False) -> torch.Tensor:
    """``actual`` is exactly a ``torch.Tensor`` with the given dtype, shape, device.

    A hidden case's expected shape is not quoted (the length of a decoding or of a corrupted
    sequence follows from the reference's output): the message names the dimensions that differ.
    """
    if type(actual) is not torch.Tensor:
        raise GradingFailure(f"{what} must be a torch.Tensor, got {type(actual).__name__}")
    if shape is not None and tuple(actual.shape) != tuple(shape):
        full = f"{what} has shape {tuple(actual.shape)}, expected {tuple(shape)}"
        if public:
            message = full
        elif actual.dim() != len(shape):
            message = f"{what} has shape {tuple(actual.shape)}; it must have {len(shape)} dimensions"
        else:
            differ = [str(d) for d, (a, b) in enumerate(zip(actual.shape, shape)) if a != b]
            message = (f"{what} has shape {tuple(actual.shape)}, which differs from the expected shape in "
                       f"dimension{'s' * (len(differ) > 1)} {' and '.join(differ)}")
        raise GradingFailure(message, detail=full, compared=tuple(shape), public=public)
    if dtype is not None and actual.dtype != dtype:
        raise GradingFailure(f"{what} has dtype {actual.dtype}, expected {dtype}")
    if device is not None and actual.device.type != torch.device(device).type:
        raise GradingFailure(f"{what} is on {actual.device}, expected {torch.device(device).type}")
    return actual


def expect_close(actual: Any, expected: torch.Tensor, *, atol: float, rtol: float = 0.0,
                 what: str = "the result", check_dtype: bool = True, public: bool = False) -> None:
    """Same type, shape, device (and dtype) as ``expected``, values within tolerance.

    The student reads how many entries are off and how far the worst is, in decades of the
    tolerance (:func:`how_far`); never a difference (of a 0-dim result returned as 0, the
    largest difference is the expected value) nor where the worst is (of a result returned as
    zeros, that is where the expected values are largest), unless the case is ``public``.
    """
    expect_tensor(actual, shape=expected.shape, device=expected.device,
                  dtype=expected.dtype if check_dtype else None, what=what, public=public)
    a, e = actual.double(), expected.double()
    if not torch.equal(torch.isnan(a), torch.isnan(e)):
        raise GradingFailure(f"{what} has NaN where the expected values have none (or the reverse)",
                             detail=f"{what} has NaN where the expected values have none (or the reverse)"
                                    + _side_by_side(actual, expected), compared=expected, public=public)
    # An infinity must be matched exactly: beside one, the tolerance below is no bound
    # (inf - inf is NaN, and atol + 0 * inf is NaN), so any value would pass.
    infinite = torch.isinf(a) | torch.isinf(e)
    if not torch.equal(a[infinite], e[infinite]):
        raise GradingFailure(f"{what} has inf or -inf where the expected values do not (or the reverse)",
                             detail=f"{what} has inf or -inf where the expected values do not (or the reverse)"
                                    + _side_by_side(actual, expected), compared=expected, public=public)
    # Where the expected value is finite, so is the student's (NaN and inf were matched above).
    finite = torch.isfinite(e)
    diff = torch.where(finite, (a - e).abs(), 0.0)
    allowed = torch.where(finite, atol + rtol * e.abs(), 1.0)
    off = diff > allowed
    if not bool(off.any()):
        return
    ratio = torch.where(off, diff / allowed, 0.0)  # inf where the tolerance is 0
    worst = _position(int(ratio.flatten().argmax()), expected.shape)
    tolerance = f"atol={atol:g}, rtol={rtol:g}"
    count = f"in {int(off.sum())} of {expected.numel()} entries"
    full = (f"{what} differs from the expected values by up to {float(diff.max()):.3g} (tolerance: {tolerance}) "
            f"{count}; the worst at index {worst}: got {_entry(actual, worst)}, expected {_entry(expected, worst)}"
            + _side_by_side(actual, expected))
    if public:
        message = full
    elif expected.numel() == 1:
        message = f"{what} differs from the expected values: it is {how_far(float(ratio.max()))} ({tolerance})"
    else:
        message = (f"{what} differs from the expected values {count}; the worst is "
                   f"{how_far(float(ratio.max()))} ({tolerance})")
    raise GradingFailure(message, detail=full, compared=expected, public=public)


def expect_equal(actual: Any, expected: Any, *, what: str = "the result", public: bool = False) -> None:
    """Exact equality; tensors must match in type, dtype, shape, device and values. A hidden case's
    message says in how many entries a tensor differs, and that a value is not the expected one;
    never what is, nor where (of a result returned as zeros, where it differs is where the
    expected tensor is not zero)."""
    if type(expected) is torch.Tensor:
        expect_tensor(actual, dtype=expected.dtype, shape=expected.shape, device=expected.device, what=what,
                      public=public)
        if not torch.equal(actual, expected):
            differ = actual != expected
            first = _position(int(differ.flatten().nonzero()[0]), expected.shape)
            message = f"{what} differs from the expected tensor in {int(differ.sum())} of {expected.numel()} entries"
            full = (f"{message}, the first at index {first}: got {_entry(actual, first)}, expected "
                    f"{_entry(expected, first)}" + _side_by_side(actual, expected))
            raise GradingFailure(full if public else message, detail=full, compared=expected, public=public)
        return
    if type(actual) is not type(expected) and not (
        isinstance(expected, (int, float)) and type(actual) in (int, float) and type(actual) is not bool
    ):
        raise GradingFailure(f"{what} must be a {type(expected).__name__}, got {type(actual).__name__}")
    if actual != expected:
        full = f"{what} is {actual!r}, expected {expected!r}"
        raise GradingFailure(full if public else f"{what} is {actual!r}, not the expected value", detail=full,
                             compared=expected, public=public)


def expect_number(actual: Any, expected: float, *, rel: float = 1e-6, abs_tol: float = 0.0,
                  what: str = "the result", public: bool = False) -> None:
    """A Python int/float (or 0-dim tensor) close to ``expected``; a hidden case's message says
    how far off in decades of the tolerance (:func:`how_far`), never the expected value."""
    if type(actual) is torch.Tensor and actual.dim() == 0:
        actual = actual.item()
    if type(actual) not in (int, float):
        raise GradingFailure(f"{what} must be a number, got {type(actual).__name__}")
    try:
        close = math.isclose(actual, expected, rel_tol=rel, abs_tol=abs_tol)
    except OverflowError:  # an int beyond any float
        close = False
    if not close:
        tolerance = f"rel {rel:g}, abs {abs_tol:g}"
        full = f"{what} is {actual!r}, expected {expected!r} ({tolerance})"
        try:
            allowed = max(rel * max(abs(actual), abs(expected)), abs_tol)
            ratio = abs(actual - expected) / allowed if math.isfinite(actual) and allowed > 0 else math.inf
        except OverflowError:  # an int beyond any float
            ratio = math.inf
        if public:
            message = full
        elif math.isfinite(ratio) and math.isfinite(expected):
            message = f"{what} is {actual!r}, {how_far(ratio)} ({tolerance})"
        else:
            message = f"{what} is {actual!r}, not the expected value ({tolerance})"
        raise GradingFailure(message, detail=full, compared=expected, public=public)


def expect_pair(actual: Any, *, what: str, names: str = "a tuple of two values") -> tuple[Any, Any]:
    """A tuple or list of exactly two values (e.g. ``(probs, ids)``), unpacked."""
    if type(actual) not in (tuple, list):
        raise GradingFailure(f"{what} must return a pair ({names}), got {type(actual).__name__}")
    if len(actual) != 2:
        raise GradingFailure(f"{what} must return a pair ({names}), got a {type(actual).__name__} "
                             f"of length {len(actual)}")
    return actual[0], actual[1]


def expect_each(right: int, total: int, message: str, *, detail: str | None = None) -> None:
    """``total`` independent answers, ``right`` of them right: the test earns that share of its
    points (per answer, not all or nothing), with ``message`` when any is wrong (``detail``, for
    the course staff, may name the wrong ones)."""
    if right < total:
        raise PartialCredit(message, right / total if total else 0.0, detail=detail)


def expect(condition: bool, message: str, *, detail: str | None = None, public: bool = False) -> None:
    """A property check with the message a student needs to find the bug. For a hidden case the
    message quotes no value the reference computed; ``detail`` (default: the message) may, for
    the course staff."""
    if not condition:
        raise GradingFailure(message, detail=detail, public=public)


def within_sigma(count: int, trials: int, p: float, *, sigmas: float = 5.0) -> bool:
    """Is ``count`` successes in ``trials`` consistent with rate ``p`` (normal approx.)?"""
    sd = math.sqrt(trials * p * (1 - p))
    return abs(count - trials * p) <= sigmas * sd + 1e-9
