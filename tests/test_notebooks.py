"""The source notebooks follow docs/authoring.md, and the release leaks nothing."""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import nbformat
import pytest

from autograder.course import load_course
from autograder.notebook import is_setup, is_solution_code, solution_regions
from autograder.paths import RELEASE, SOURCE
from autograder.pytest_plugin import suite_dir, suite_files
from autograder.suite import graded

DEFAULT_POINTS = inspect.signature(graded).parameters["points"].default
# The course model reads every source notebook: it refuses one missing from its order (or
# the reverse), malformed metadata, a duplicated grade_id, and a solution cell without
# its visible-test cell test_<grade_id>.
COURSE = load_course()
NOTEBOOKS = COURSE.stems


def _nb(folder: Path, stem: str):
    return nbformat.read(folder / f"{stem}.ipynb", as_version=4)


def _meta(cell) -> dict:
    return cell.metadata.get("nbgrader", {})


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 4, f"expected the week's notebooks in {SOURCE}, found {NOTEBOOKS}"


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_cells_follow_the_conventions(stem):
    notebook = _nb(SOURCE, stem)
    items = COURSE.notebook(stem)
    solutions = {item.grade_id: notebook.cells[item.index] for item in items.solutions}
    tests = {item.grade_id: notebook.cells[item.index] for item in items.tests}
    for grade_id, cell in solutions.items():
        assert "### BEGIN SOLUTION" in cell.source, f"{stem}:{grade_id} has no solution markers"
        # Definitions only: the grader runs these cells, so no experiments at top level.
        for node in ast.parse(cell.source).body:
            assert isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef,
                                     ast.Assign, ast.AnnAssign, ast.Expr)), (
                f"{stem}:{grade_id} runs a {type(node).__name__} at top level; solution cells hold definitions only")
            if isinstance(node, ast.Expr):
                assert isinstance(node.value, ast.Constant), f"{stem}:{grade_id} has a top-level call"
    for grade_id, cell in tests.items():
        assert _meta(cell).get("locked"), f"{stem}:{grade_id} must be locked"
        assert "### BEGIN HIDDEN TESTS" in cell.source, f"{stem}:{grade_id} lacks the hidden-test hook"
    for cell in notebook.cells:
        assert not cell.get("outputs"), f"{stem} is committed with outputs; clear them"


# Left in a model answer while its numbers were still being measured.
PLACEHOLDER = re.compile(r"__[A-Z][A-Z0-9_]*__|\bXX_\w+|\bTODO\b|\bTBD\b")


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_no_placeholder_is_left(stem):
    for cell in _nb(SOURCE, stem).cells:
        found = PLACEHOLDER.findall(cell.source)
        assert not found, f"{stem}: placeholder {found} in a {cell.cell_type} cell: {cell.source[:120]!r}"


DOCS = ["README.md", "student/README.md", "handouts/week6.md", "handouts/grading_map.md", "data/checkpoints/README.md",
        "data/checkpoints/austen-bert-mlm/README.md", "data/checkpoints/austen-gpt-clm/README.md"]


@pytest.mark.parametrize("doc", DOCS)
def test_docs_have_no_placeholder(doc, repo_root):
    found = PLACEHOLDER.findall((repo_root / doc).read_text(encoding="utf-8"))
    assert not found, f"{doc}: placeholders {found}"


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_hidden_points_add_up_to_cell_points(stem):
    """Each visible-test cell's points equal the sum of its hidden tests' points."""
    cells = COURSE.notebook(stem).test_points
    suite = suite_files(stem)
    if not cells:
        return
    assert suite, f"{stem} has auto-graded cells but no hidden suite in {suite_dir(stem)}"
    hidden: dict[str, float] = {}
    for node in (node for path in suite for node in ast.walk(ast.parse(path.read_text()))):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "graded":
            cell = ast.literal_eval(node.args[0])
            given = [kw.value for kw in node.keywords if kw.arg == "points"] + node.args[1:]
            points = ast.literal_eval(given[0]) if given else DEFAULT_POINTS
            hidden[cell] = hidden.get(cell, 0.0) + float(points)
    assert {k: round(v, 6) for k, v in hidden.items()} == cells


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_release_leaks_no_solution(stem):
    release_text = (RELEASE / f"{stem}.ipynb").read_text()
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "autograder."):
        assert marker not in release_text, f"assignments/{stem}.ipynb contains {marker!r}"
    release = _nb(RELEASE, stem)
    released_lines = {line.strip() for cell in release.cells for line in cell.source.splitlines()}
    for cell in _nb(SOURCE, stem).cells:
        for block in solution_regions(cell.source):
            for line in block.splitlines():
                line = line.strip()
                # Short or generic lines (return x, pass, comments) may legitimately recur.
                if len(line) > 25 and not line.startswith("#"):
                    assert line not in released_lines, f"solution line leaked into the release of {stem}: {line!r}"
    for cell in release.cells:
        if is_solution_code(cell):
            assert "raise NotImplementedError" in cell.source, f"{stem}: a stub must end in raise NotImplementedError"


@pytest.mark.parametrize("stem", NOTEBOOKS)
def test_release_keeps_setup_and_tests(stem):
    source_cells = {_meta(c)["grade_id"]: c for c in _nb(SOURCE, stem).cells if _meta(c).get("grade_id")}
    for cell in _nb(RELEASE, stem).cells:
        grade_id = _meta(cell).get("grade_id")
        if grade_id and is_setup(cell):
            assert cell.source == source_cells[grade_id].source


def test_release_matches_nbgrader_output():
    """assignments/ is exactly what `make release` generates from solutions/."""
    import tempfile

    from autograder.build.release import differences, generate

    with tempfile.TemporaryDirectory() as scratch:
        generated = generate(Path(scratch))
        assert differences(generated, RELEASE) == [], "assignments/ is out of date: run `make release`"
