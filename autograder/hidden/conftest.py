"""Fixtures of the hidden suites (run only inside autograder.grading)."""
from __future__ import annotations

import pytest

from autograder.suite import Student, current_session


@pytest.fixture
def student(request) -> Student:
    """The student's code for the item this test grades.

    The item is the grade cell's name without its ``test_`` prefix: tests of the
    cell ``test_softmax`` call the solution cell ``softmax``.
    """
    marker = request.node.get_closest_marker("graded")
    if marker is None:
        raise RuntimeError(f"{request.node.name} has no @graded(...) marker")
    cell = marker.kwargs["cell"]
    solution = cell[len("test_"):] if cell.startswith("test_") else cell
    return Student(current_session(), solution)


@pytest.fixture
def device(request) -> str:
    """The device of a test variant (see autograder.suite.on_devices)."""
    return getattr(request, "param", "cpu")
