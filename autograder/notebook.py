"""Reading notebooks and their nbgrader metadata, never trusting either.

:func:`read_notebook` parses a submitted file or says how to fix it. The cell
accessors (:func:`is_setup`, :func:`is_solution_code`, :func:`is_test_cell`,
:func:`is_written_answer`, :func:`cell_points`) are the only code that reads
nbgrader metadata; the course model (``course.py``) reads the instructor's
notebooks through them, and the grading plan (``plan.py``) a submission's.

A submission's cell metadata is student-controlled JSON. Each cell's nbgrader
metadata is checked against :data:`NBGRADER_SCHEMA` before anything reads it; a
malformed cell is reported, never fatal: it counts as missing when it is one of
the graded solution cells, and is ignored with a warning otherwise.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import IntakeError
from .files import read_regular_file, structure_problem
from .paths import ASSIGNMENT, SOURCE_DIR


class UnreadableNotebook(Exception):
    """The submission is not a notebook we can read; it scores zero, others go on."""


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


def reference_table(cell) -> str | None:
    """The experiment of a "What you should see" table cell (its ``metadata.week6.reference_values``,
    written by ``make regen``), or None for any other cell."""
    week6 = cell.get("metadata", {}).get("week6", {})
    name = week6.get("reference_values") if isinstance(week6, dict) else None
    return name if cell.get("cell_type") == "markdown" and isinstance(name, str) and name else None


def quoted_experiments(cell) -> tuple[str, ...]:
    """The experiments whose recorded values a written answer quotes: the names in its
    ``metadata.week6.quotes`` (docs/authoring.md), or () when it names none.

    Read from the instructor's notebooks only; ``ValueError`` says what is malformed."""
    week6 = cell.get("metadata", {}).get("week6", {})
    quotes = week6.get("quotes", []) if isinstance(week6, dict) else None
    if not (isinstance(quotes, list) and all(isinstance(name, str) and name.strip() for name in quotes)):
        raise ValueError("metadata.week6.quotes is not a list of experiment names")
    return tuple(quotes)


def read_notebook(path: Path):
    """Parse a notebook file or raise :class:`UnreadableNotebook` with the fix.

    Only a regular file of bounded size is read (``files.read_regular_file``), and it is
    parsed only within the intake's limits on its cells, JSON values and nesting
    (``files.structure_problem``), so that no notebook costs more than a bounded time.
    ``python -m autograder grade`` and ``nbgrader autograde`` (``nbgrader/intake.py``)
    both read submissions here."""
    import nbformat  # 0.9 s of imports: only where a notebook is read

    try:
        data = read_regular_file(path)
        if why := structure_problem(data):
            raise IntakeError(f"{Path(path).name}: {why}.")
        raw = data.decode("utf-8")
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


def cell_source(cell) -> str:
    """A cell's source as one string (nbformat allows a list of lines)."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


# nbgrader's solution markers, each alone on its line (indented in a function body):
# everything between "### BEGIN SOLUTION" and "### END SOLUTION" is the instructor's.
SOLUTION_REGION = re.compile(r"^[ \t]*### BEGIN SOLUTION[^\n]*\n(.*?)^[ \t]*### END SOLUTION[^\n]*", re.S | re.M)


def solution_regions(source: str) -> list[str]:
    """The text of each solution region of a cell's source, the marker lines left out."""
    return SOLUTION_REGION.findall(source)


def cell_points(cell) -> tuple[str, float]:
    """(grade_id, points) of a graded cell (one that :func:`is_test_cell` or :func:`is_written_answer` accepted)."""
    meta = _nbgrader(cell)
    return str(meta.get("grade_id", "")), float(meta.get("points", 0))
