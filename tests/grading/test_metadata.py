"""A submission's nbgrader metadata is checked cell by cell; a malformed cell never stops a notebook."""
from __future__ import annotations

import copy

import nbformat
import pytest

from autograder.notebook import metadata_problem
from autograder.paths import REPO
from autograder.plan import plan_grading

STEM = "part_a_discovery"
FULL = REPO / "data" / "sample_submissions" / "alice_full_solution" / "week6" / f"{STEM}.ipynb"


@pytest.fixture
def submission():
    return nbformat.read(FULL, as_version=4)


def cell_of(notebook, grade_id):
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


@pytest.mark.parametrize("meta, fragment", [
    ("a string", "not a JSON object"),
    ([1, 2], "not a JSON object"),
    ({"grade": "yes"}, "nbgrader.grade is str"),
    ({"points": "lots"}, "nbgrader.points is str"),
    ({"points": True}, "nbgrader.points is bool"),
    ({"points": -3}, "negative"),
    ({"grade_id": ["x"]}, "nbgrader.grade_id is list"),
    ({"grade_id": "../../etc"}, "characters other than"),
    ({"solution": 1}, "nbgrader.solution is int"),
])
def test_malformed_metadata_is_named(meta, fragment):
    assert fragment in metadata_problem({"cell_type": "code", "metadata": {"nbgrader": meta}, "source": ""})


def test_well_formed_cells_pass(submission):
    assert all(metadata_problem(c) is None for c in submission.cells)
    assert metadata_problem({"cell_type": "code", "metadata": "x", "source": ""}) == "its metadata is not a JSON object"
    assert "source" in metadata_problem({"cell_type": "code", "metadata": {}, "source": [1, 2]})


def test_a_malformed_ungraded_cell_is_ignored_with_a_warning(submission):
    broken = copy.deepcopy(submission)
    markdown = next(c for c in broken.cells if c.cell_type == "markdown" and "nbgrader" not in c.metadata)
    markdown.metadata["nbgrader"] = "garbage"
    plan = plan_grading(broken, STEM)
    assert plan.missing == {} and plan.cells == plan_grading(submission, STEM).cells
    assert len(plan.warnings) == 1 and "was ignored" in plan.warnings[0]


def test_a_malformed_solution_cell_counts_as_missing_with_the_reason(submission):
    broken = copy.deepcopy(submission)
    cell_of(broken, "sequence_logprob").metadata["nbgrader"]["points"] = "many"
    plan = plan_grading(broken, STEM)
    assert set(plan.missing) == {"sequence_logprob"}
    assert "malformed nbgrader metadata" in plan.missing["sequence_logprob"]
    assert {c.grade_id for c in plan.cells} == {c.grade_id for c in plan_grading(submission, STEM).cells} - {
        "sequence_logprob"}


def test_a_cell_whose_source_is_not_text_does_not_crash_planning(submission):
    broken = copy.deepcopy(submission)
    cell_of(broken, "top_k_next_tokens")["source"] = [1, None]
    assert "top_k_next_tokens" in plan_grading(broken, STEM).missing
