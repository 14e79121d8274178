"""Reading a submitted notebook and deciding what the grader will run.

The grader never trusts a submission's structure. It reads the instructor's
source notebook (``solutions/week6/<stem>.ipynb``) as the plan, then looks up
each of its cells in the submission by ``grade_id``:

* setup cells (locked imports and constants) always come from the instructor
  copy, so edits to them change nothing;
* solution code cells come from the submission; a deleted, renamed or
  type-changed cell is reported as *missing* for the items that need it;
* everything else in the submission (experiments, extra cells) is ignored.

A submission's cell metadata is student-controlled JSON. Each cell's nbgrader
metadata is checked against :data:`NBGRADER_SCHEMA` before anything reads it; a
malformed cell is reported, never fatal: it counts as missing when it is one of
the graded solution cells, and is ignored with a warning otherwise.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[1]
SOURCE_DIR = REPO / "solutions"
ASSIGNMENT = "week6"


class UnreadableNotebook(Exception):
    """The submission is not a notebook we can read; it scores zero, others go on."""


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

    def solution_source(self, grade_id: str) -> str | None:
        for cell in self.cells:
            if cell.kind == "solution" and cell.grade_id == grade_id:
                return cell.source
        return None


# nbgrader's cell metadata (schema version 3), key -> accepted types. Other keys are
# kept but never read.
NBGRADER_SCHEMA: dict[str, tuple[type, ...]] = {
    "grade": (bool,), "solution": (bool,), "locked": (bool,), "task": (bool,),
    "grade_id": (str,), "points": (int, float), "schema_version": (int,),
}
GRADE_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


def metadata_problem(cell) -> str | None:
    """Why ``cell``'s nbgrader metadata is malformed, or None when it is usable."""
    if not isinstance(cell, dict):
        return "the cell is not a JSON object"
    metadata = cell.get("metadata", {})
    if not isinstance(metadata, dict):
        return "its metadata is not a JSON object"
    source = cell.get("source", "")
    if not (isinstance(source, str) or (isinstance(source, list) and all(isinstance(s, str) for s in source))):
        return "its source is neither text nor a list of lines"
    meta = metadata.get("nbgrader")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        return "its nbgrader metadata is not a JSON object"
    for key, types in NBGRADER_SCHEMA.items():
        if key in meta and type(meta[key]) not in types:  # exact types: True is not a number of points
            return f"nbgrader.{key} is {type(meta[key]).__name__}, not {' or '.join(t.__name__ for t in types)}"
    if "grade_id" in meta and not GRADE_ID.fullmatch(meta["grade_id"]):
        return "nbgrader.grade_id holds characters other than letters, digits, '_' and '-'"
    if "points" in meta and not 0 <= meta["points"] < 1e6:
        return "nbgrader.points is negative or absurdly large"
    return None


def raw_grade_id(cell) -> str | None:
    """The grade_id a (possibly malformed) cell claims, when it is a usable string."""
    try:
        grade_id = cell["metadata"]["nbgrader"]["grade_id"]
    except (KeyError, TypeError, IndexError):
        return None
    return grade_id if isinstance(grade_id, str) and GRADE_ID.fullmatch(grade_id) else None


def _nbgrader(cell) -> dict:
    """The nbgrader metadata of a cell already checked by :func:`metadata_problem`."""
    if metadata_problem(cell) is not None:
        return {}
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def is_setup(cell) -> bool:
    meta = _nbgrader(cell)
    return (
        cell.get("cell_type") == "code"
        and meta.get("locked", False)
        and not meta.get("solution", False)
        and not meta.get("grade", False)
        and str(meta.get("grade_id", "")).startswith("setup")
    )


def is_solution_code(cell) -> bool:
    meta = _nbgrader(cell)
    return cell.get("cell_type") == "code" and meta.get("solution", False) and not meta.get("grade", False)


def is_test_cell(cell) -> bool:
    meta = _nbgrader(cell)
    return cell.get("cell_type") == "code" and meta.get("grade", False) and not meta.get("solution", False)


def is_written_answer(cell) -> bool:
    """A manually graded answer: a markdown cell with ``solution`` and ``grade`` (docs/authoring.md)."""
    meta = _nbgrader(cell)
    return cell.get("cell_type") == "markdown" and meta.get("solution", False) and meta.get("grade", False)


def read_notebook(path: Path):
    """Parse a notebook file or raise :class:`UnreadableNotebook` with the fix.

    Only a regular file of bounded size is read (``intake.read_regular_file``)."""
    from .intake import IntakeError, read_regular_file

    try:
        raw = read_regular_file(path).decode("utf-8")
    except IntakeError as err:
        raise UnreadableNotebook(str(err)) from err
    except UnicodeDecodeError as err:
        raise UnreadableNotebook(f"{Path(path).name} is not UTF-8 text ({err.reason}); "
                                 "download the notebook again from JupyterLab") from err
    try:
        notebook = nbformat.reads(raw, as_version=4)
    except (json.JSONDecodeError, nbformat.reader.NotJSONError) as err:
        raise UnreadableNotebook(
            f"{Path(path).name} is not valid notebook JSON ({err}). "
            "Download the notebook again from JupyterLab (File > Save and Export Notebook As > Notebook)."
        ) from err
    except Exception as err:  # nbformat raises several unrelated types for bad files
        raise UnreadableNotebook(f"{Path(path).name} is not a Jupyter notebook: {err}") from err
    if not isinstance(notebook.get("cells"), list):
        raise UnreadableNotebook(f"{Path(path).name} has no list of cells")
    return notebook


def source_notebook_path(stem: str, source_dir: Path = SOURCE_DIR) -> Path:
    return source_dir / ASSIGNMENT / f"{stem}.ipynb"


def instructor_notebook(stem: str, source_dir: Path = SOURCE_DIR):
    path = source_notebook_path(stem, source_dir)
    if not path.is_file():
        known = sorted(p.stem for p in (source_dir / ASSIGNMENT).glob("*.ipynb"))
        raise UnreadableNotebook(
            f"no assignment notebook is called '{stem}.ipynb' (known: {', '.join(known)}). "
            "Submit the notebook under its original file name."
        )
    return nbformat.read(path, as_version=4)


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def plan_grading(submission, stem: str, source_dir: Path = SOURCE_DIR) -> GradingPlan:
    """Match a parsed submission against the instructor notebook ``stem``."""
    instructor = instructor_notebook(stem, source_dir)
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

    for cell in instructor.cells:
        grade_id = _nbgrader(cell).get("grade_id")
        if is_setup(cell):
            plan.cells.append(Cell(grade_id, _source(cell), "setup"))
        elif is_solution_code(cell) and grade_id in malformed and grade_id not in by_id:
            plan.missing[grade_id] = (f"the solution cell '{grade_id}' has malformed nbgrader metadata "
                                      f"({malformed[grade_id]}); copy the cell back from the released notebook.")
        elif is_solution_code(cell):
            candidates = [c for c in by_id.get(grade_id, []) if c.get("cell_type") == "code"]
            if not candidates:
                other = by_id.get(grade_id)
                why = (
                    f"the solution cell '{grade_id}' is not a code cell any more"
                    if other
                    else f"the solution cell '{grade_id}' is missing (deleted, or its grade_id was changed)"
                )
                plan.missing[grade_id] = why + "; copy the cell back from the released notebook."
                continue
            if len(candidates) > 1:
                plan.warnings.append(
                    f"{len(candidates)} cells share the grade_id '{grade_id}'; the first one was graded."
                )
            plan.cells.append(Cell(grade_id, _source(candidates[0]), "solution"))
    return plan


def cell_points(cell) -> tuple[str, float]:
    """(grade_id, points) of a graded cell (one that :func:`is_test_cell` or :func:`is_written_answer` accepted)."""
    meta = _nbgrader(cell)
    return str(meta.get("grade_id", "")), float(meta.get("points", 0))


def test_cell_points(stem: str, source_dir: Path = SOURCE_DIR) -> dict[str, float]:
    """Points of every auto-graded test cell of the instructor notebook."""
    instructor = instructor_notebook(stem, source_dir)
    return dict(cell_points(cell) for cell in instructor.cells if is_test_cell(cell))
