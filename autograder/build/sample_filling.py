"""The filling of the sample submissions: notebooks made from the committed release.

Every sample starts from what students receive (``assignments/week6``), so the samples
follow the assignment when it changes: :func:`untouched` is the release as handed out,
:func:`solved` the release with every answer filled in (code from the course's source
cells, written answers in a student's words). The rest changes cells by ``grade_id``
(:func:`replace`, :func:`with_answers`) or breaks the notebook in the ways a real
submission arrives broken (:func:`cell_surgery`, :func:`break_metadata`,
:func:`cut_in_half`). Which sample does what is data, in the student files
(:mod:`autograder.build.sample_students`); nothing here names a student.
"""
from __future__ import annotations

import copy
import re

import nbformat

from ..course import load_course
from ..notebook import is_solution_code, is_written_answer, raw_grade_id
from ..paths import RELEASE
from .sample_students import written_answers

# A marker line, also the last line of a cell (no newline after it).
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(\n|\Z)", re.M)
TEXT_STUB = "YOUR ANSWER HERE"  # nbgrader_config.py's ClearSolutions.text_stub
# The two lines of a released code cell that a student replaces.
CODE_STUB = re.compile(r"^# YOUR CODE HERE\n|^raise NotImplementedError\(\)\n?", re.M)


def untouched(stem: str):
    """The release notebook as students receive it."""
    return nbformat.read(RELEASE / f"{stem}.ipynb", as_version=4)


def solved(stem: str, written: dict[str, dict[str, str]] | None = None):
    """The release notebook with every answer filled in: each solution cell's code from the
    course's source cell (markers removed), each written answer from ``written``
    (stem -> grade_id -> answer; by default the class's, ``written_answers.toml``)."""
    written = written_answers() if written is None else written
    code = {item.grade_id: item.source for item in load_course().notebook(stem).solutions}
    answers = written.get(stem, {})
    notebook = untouched(stem)
    for cell in notebook.cells:
        grade_id = raw_grade_id(cell)
        if is_written_answer(cell):
            if grade_id not in answers:
                raise KeyError(f"{stem}: no student answer for the written question {grade_id!r}; "
                               "add one to data/sample_submissions/written_answers.toml")
            cell.source = answered(cell, answers[grade_id])
        elif is_solution_code(cell) and grade_id in code:
            cell.source = MARKER.sub("", code[grade_id])
    return notebook


def answered(release_cell, answer: str) -> str:
    """The released written-answer cell with the student's answer in place of the stub
    (some cells keep their question above it)."""
    if TEXT_STUB not in release_cell.source:
        raise ValueError(f"the released cell {raw_grade_id(release_cell)!r} has no {TEXT_STUB!r} to answer in")
    return release_cell.source.replace(TEXT_STUB, answer.strip())


def replace(notebook, sources: dict[str, str]):
    """A copy of ``notebook`` with these cells' sources (grade_id -> source)."""
    notebook = copy.deepcopy(notebook)
    for cell in notebook.cells:
        if raw_grade_id(cell) in sources:
            cell.source = sources[raw_grade_id(cell)]
    return notebook


def released(release, grade_ids) -> dict[str, str]:
    """The released sources of these cells (the stubs a student left as they were)."""
    wanted = set(grade_ids)
    return {grade_id: cell.source for cell in release.cells if (grade_id := raw_grade_id(cell)) in wanted}


def with_answers(notebook, release, answers: dict[str, str]):
    """``notebook`` with these written answers in the released cells' stubs."""
    cells = {raw_grade_id(c): c for c in release.cells}
    return replace(notebook, {grade_id: answered(cells[grade_id], answer) for grade_id, answer in answers.items()})


def released_constant(release, grade_id: str) -> str:
    """A released answer-constant cell without its stub lines (the dict of None stays), for
    a cheat that builds on the stub's keys rather than replacing them."""
    source = next(c.source for c in release.cells if raw_grade_id(c) == grade_id)
    return CODE_STUB.sub("", source)


def cell_surgery(notebook, *, delete=(), rename=None, duplicate=None):
    """``notebook`` with grade cells deleted, renamed (grade_id -> new grade_id) and
    duplicated (grade_id -> {"id": the copy's cell id, "source": its source}; the copy
    follows the original, which the grader grades)."""
    rename, duplicate = rename or {}, duplicate or {}
    notebook = copy.deepcopy(notebook)
    cells = []
    for cell in notebook.cells:
        grade_id = raw_grade_id(cell)
        if grade_id in delete:
            continue
        if grade_id in rename:
            cell.metadata["nbgrader"]["grade_id"] = rename[grade_id]
        cells.append(cell)
        if grade_id in duplicate:
            twin = copy.deepcopy(cell)
            twin.source = duplicate[grade_id]["source"]
            twin["id"] = duplicate[grade_id]["id"]
            cells.append(twin)
    notebook.cells = cells
    return notebook


def break_metadata(notebook, solution: str):
    """``notebook`` with nbgrader metadata that a student's editor (or the student) broke:
    the first two ungraded markdown cells claim nbgrader metadata that is not an object
    and metadata of the wrong types, and the solution cell ``solution`` has a string for
    its ``solution`` flag."""
    notebook = copy.deepcopy(notebook)
    cell = next(c for c in notebook.cells if raw_grade_id(c) == solution)
    title = next(c for c in notebook.cells if c.cell_type == "markdown" and "nbgrader" not in c.metadata)
    title.metadata["nbgrader"] = "not an object"
    other = next(c for c in notebook.cells if c.cell_type == "markdown" and "nbgrader" not in c.metadata)
    other.metadata["nbgrader"] = {"grade": "yes", "points": "lots"}
    cell.metadata["nbgrader"]["solution"] = "true"  # a string, not a boolean
    return notebook


def cut_in_half(notebook) -> str:
    """The first half of the notebook's JSON: a file that is not valid JSON."""
    text = nbformat.writes(notebook)
    return text[: len(text) // 2]
