"""Checks of single hidden suites that are no mutant or alternative (those: test_suites.py).

* Exercise 3: the classification tests are discriminating: a classifier that
  always answers the same class fails each of them.
* Part A's quizzes give credit per answer: one wrong answer costs its share only,
  and a defensible alternative the answer key accepts costs nothing. The student reads
  how many answers are wrong, never which (of a choice between two groups, that is the
  answer key); the staff's detail names them.

Suites run in this process with a stand-in student (tests/grading/inprocess.py), on the CPU.
"""
from __future__ import annotations

import pytest

from autograder.reference import answers
from tests.grading.inprocess import grade_in_process, grading_environment, points_per_cell, student_namespace
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


def test_quizzes_give_credit_per_answer():
    stem = "part_a_discovery"
    reuse = dict(answers.SPANISH_REUSE, **{"the Latin alphabet": "learn"})  # one of the four "reuse" items
    categories = dict(answers.TASK_CATEGORIES, **{"Medical diagnosis terms": "general",  # one of two "specific"
                                                  "Recognizing sentiment words": "specific"})  # accepted either way
    results = grade_in_process(stem, student_namespace(stem, SPANISH_REUSE=reuse, TASK_CATEGORIES=categories))
    cells = points_per_cell(results)
    assert cells["test_spanish_reuse"] == (2 - 1 / 4, 2.0)
    assert cells["test_task_categories"] == (2 - 1 / 2, 2.0)
    failed = {r.test: r for r in results if r.status == "failed"}
    assert set(failed) == {"test_spanish_reuse_what_transfers", "test_task_categories_specific_skills"}
    reuse = failed["test_spanish_reuse_what_transfers"]
    assert "3 of the 4" in reuse.message and "the Latin alphabet" not in reuse.message
    assert "'the Latin alphabet'" in reuse.detail
    categories = failed["test_task_categories_specific_skills"]
    assert "1 of the 2" in categories.message and "Medical diagnosis" not in categories.message
    assert "'Medical diagnosis terms'" in categories.detail
