"""A stand-in grading session that runs "student" code in this process.

Only for testing the hidden suites themselves: the reference implementations
(or deliberately broken copies) play the student, so a suite can be shown to
give full marks to correct code and to fail wrong code, without notebooks or a
sandbox. Real grading always uses ``autograder.session.GradingSession``.
Values still make the round trip through the wire format, so a suite that
depends on anything the protocol would refuse fails here too.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from autograder.drivers import models, probes  # noqa: F401  (the fixtures and probes of the suites)
from autograder.draws import PUBLIC, Draws
from autograder.pytest_plugin import run_hidden_suite
from autograder.report import TestResult
from autograder.sandbox import protocol
from autograder.sandbox.errors import StudentError
from autograder.sandbox.fixtures import resolve_fixtures
from autograder.sandbox.probes import get_probe
from tests.grading import variants


def _round_trip(value: Any) -> Any:
    return protocol.decode(protocol.encode(value))


class InProcessSession:
    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace
        self.sandbox = "in-process (tests only)"

    def _run(self, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except Exception as err:  # mirror the worker: student exceptions become StudentError
            raise StudentError(type(err).__name__, str(err)) from err

    def call(self, solution: str, name: str, args, kwargs, *, timeout=None) -> Any:
        if name not in self.namespace:
            raise StudentError("NameError", f"name {name!r} is not defined")
        args = resolve_fixtures(list(_round_trip(list(args))))
        kwargs = resolve_fixtures(dict(_round_trip(dict(kwargs))))
        return _round_trip(self._run(self.namespace[name], *args, **kwargs))

    def probe(self, solution: str, probe: str, params: dict, *, timeout=None) -> Any:
        params = resolve_fixtures(dict(_round_trip(dict(params))))
        return _round_trip(self._run(get_probe(probe), self.namespace, params))


def reference_namespace() -> dict[str, Any]:
    """Every public name of every reference module, as a student namespace."""
    import importlib
    import pkgutil

    import autograder.reference as package

    namespace: dict[str, Any] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"autograder.reference.{module_info.name}")
        namespace.update({k: v for k, v in vars(module).items() if not k.startswith("_")})
    return namespace


def student_namespace(stem: str, /, **overrides) -> dict[str, Any]:
    """The reference implementations (and answers) as the student of ``stem``: what the
    notebook's variants module adds (``EXTRA_NAMESPACE``), then ``overrides``."""
    namespace = reference_namespace()
    namespace.update(getattr(variants.of(stem), "EXTRA_NAMESPACE", {}))
    namespace.update(overrides)
    return namespace


# A test that crashed inside a hidden suite says this in its message.
GRADER_BUG = "the grader could not run this test"


@contextlib.contextmanager
def grading_environment() -> Iterator[None]:
    """One CPU thread (threads fight over a busy CPU) and no tracebacks from the
    inner pytest runs (the results carry the messages)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("PYTEST_ADDOPTS", "--tb=no -p no:warnings")
            yield
    finally:
        torch.set_num_threads(threads)


def grade_in_process(stem: str, namespace: dict[str, Any], draws: Draws = PUBLIC) -> list[TestResult]:
    """The hidden suite of ``stem`` with ``namespace`` playing the student, on the CPU, its
    inputs drawn with ``draws`` (default: the public seeds)."""
    return run_hidden_suite(stem, InProcessSession(namespace), device="cpu", draws=draws)


def points_per_cell(results) -> dict[str, tuple[float, float]]:
    """cell -> (points earned, points available)."""
    cells: dict[str, tuple[float, float]] = {}
    for result in results:
        earned, available = cells.get(result.grade_id, (0.0, 0.0))
        cells[result.grade_id] = (earned + result.points, available + result.max_points)
    return cells


def failures(results, cell: str | None = None) -> str:
    """The tests that did not pass (of ``cell``), one line each, for assertion messages."""
    return "\n".join(f"  {r.test} [{r.status}] {r.message[:300]}" for r in results
                     if r.status != "passed" and (cell is None or r.grade_id == cell))
