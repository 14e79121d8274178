"""What the grader will run for one submission, decided once before anything runs.

The grader never trusts a submission's structure. The plan follows the course
model's copy of the instructor notebook (``course.py``, read once per process) and
looks up each of its cells in the submission by ``grade_id``:

* setup cells (locked imports and constants) always come from the instructor
  copy, so edits to them change nothing;
* solution code cells come from the submission; a deleted, renamed or
  type-changed cell is reported as *missing* for the items that need it;
* everything else in the submission (experiments, extra cells) is ignored.

The static half of the forbidden-shortcut check (``forbidden.py``) reads each
solution cell's syntax tree here, once, rather than at every call of its function.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import forbidden
from .course import Course, UnknownNotebook, load_course
from .notebook import (
    UnreadableNotebook,
    _nbgrader,
    cell_source,
    metadata_problem,
    raw_grade_id,
)


@dataclass(frozen=True)
class Cell:
    grade_id: str
    source: str
    kind: str  # "setup" | "solution"


@dataclass
class GradingPlan:
    """What to execute for one submission, and what was wrong with it."""

    stem: str
    cells: list[Cell]  # in instructor order: setup cells and student solution cells
    missing: dict[str, str] = field(default_factory=dict)  # solution grade_id -> why
    warnings: list[str] = field(default_factory=list)
    forbidden: dict[str, list[str]] = field(default_factory=dict)  # solution grade_id -> shortcuts its cell names


def plan_grading(submission, stem: str, course: Course | None = None) -> GradingPlan:
    """Match a parsed submission against the course's notebook ``stem``.

    Raises :class:`~autograder.notebook.UnreadableNotebook` for a file name that is
    not one of the course's notebooks."""
    course = course or load_course()
    try:
        notebook = course.notebook(stem)
    except UnknownNotebook:
        raise UnreadableNotebook(
            f"no assignment notebook is called '{stem}.ipynb' (known: {', '.join(sorted(course.stems))}). "
            "Submit the notebook under its original file name."
        ) from None
    plan = GradingPlan(stem=stem, cells=[])
    by_id: dict[str, list] = {}
    malformed: dict[str, str] = {}
    for index, cell in enumerate(submission.cells):
        why = metadata_problem(cell)
        if why is not None:
            claimed = raw_grade_id(cell)
            if claimed is not None:
                malformed.setdefault(claimed, why)
            plan.warnings.append(f"cell {index + 1}" + (f" ('{claimed}')" if claimed else "")
                                 + f" was ignored: {why}")
            continue
        grade_id = _nbgrader(cell).get("grade_id")
        if grade_id:
            by_id.setdefault(str(grade_id), []).append(cell)

    for item in notebook.items:
        grade_id = item.grade_id
        if item.kind == "setup":
            plan.cells.append(Cell(grade_id, item.source, "setup"))
        elif item.kind != "solution":
            continue
        elif grade_id in malformed and grade_id not in by_id:
            plan.missing[grade_id] = (f"the solution cell '{grade_id}' has malformed nbgrader metadata "
                                      f"({malformed[grade_id]}); copy the cell back from the released notebook.")
        else:
            candidates = [c for c in by_id.get(grade_id, []) if c.get("cell_type") == "code"]
            if not candidates:
                why = (
                    f"the solution cell '{grade_id}' is not a code cell any more"
                    if by_id.get(grade_id)
                    else f"the solution cell '{grade_id}' is missing (deleted, or its grade_id was changed)"
                )
                plan.missing[grade_id] = why + "; copy the cell back from the released notebook."
                continue
            if len(candidates) > 1:
                plan.warnings.append(
                    f"{len(candidates)} cells share the grade_id '{grade_id}'; the first one was graded."
                )
            source = cell_source(candidates[0])
            plan.cells.append(Cell(grade_id, source, "solution"))
            used = forbidden.static_violations(grade_id, source)
            if used:
                plan.forbidden[grade_id] = used
    return plan
