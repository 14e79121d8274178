"""Checks of single hidden suites that are no mutant or alternative (those: test_suites.py).

* Exercise 3: the classification tests are discriminating: a classifier that
  always answers the same class fails each of them.

Suites run in this process with a stand-in student (tests/grading/inprocess.py), on the CPU.
"""
from __future__ import annotations

import pytest

from tests.grading.inprocess import grade_in_process, grading_environment, student_namespace
from tests.grading.variants.exercise3_classification_as_generation import (
    classify_always_negative,
    classify_always_positive,
)


@pytest.fixture(scope="module", autouse=True)
def _grading_environment():
    with grading_environment():
        yield


@pytest.mark.parametrize("constant", [classify_always_negative, classify_always_positive])
def test_every_classification_test_needs_both_classes(constant):
    stem = "exercise3_classification_as_generation"
    results = grade_in_process(stem, student_namespace(stem, classify_by_generation=constant))
    graded = [r for r in results if r.grade_id == "test_classify_by_generation"]
    assert graded and all(r.status == "failed" for r in graded), (
        f"{constant.__name__} passed a classification test:\n"
        + "\n".join(f"  {r.test} [{r.status}]" for r in graded))
