"""Every auto-graded notebook's hidden suite, graded in this process with stand-in students.

For each notebook of the course model (autograder/course.py) with auto-graded points:

* the reference implementations earn every point, and the points of each grade
  cell add up to the cell's points;
* correct solutions written differently from the reference (``ALTERNATIVES`` of
  tests/grading/variants/<stem>/) earn every point;
* deliberately wrong solutions (``MUTANTS``) lose points on the cells they belong
  to, and only there, and crash no test;
* every graded function and class that still raises NotImplementedError scores
  zero, with the status "error" and a message that says it is not implemented.

Nothing here lists notebooks, functions or cells by hand: the graded names are
read from the instructor's solution cells (``Item.source``), and a name belongs to
the cell that defines it, graded by that cell's visible-test cell. A new notebook or
graded function is therefore covered as soon as it is in the course, and a test
says so when its variants module is missing. Checks of a single suite that are no
mutant or alternative: test_suite_details.py.

Suites run through ``autograder.pytest_plugin.run_hidden_suite`` with an
``InProcessSession`` (no sandbox, values still cross the wire format), on the CPU.
"""
from __future__ import annotations

import ast

import pytest
import torch

from autograder.course import Notebook, load_course
from tests.grading import variants
from tests.grading.inprocess import (
    GRADER_BUG,
    failures,
    grade_in_process,
    grading_environment,
    points_per_cell,
    student_namespace,
)

COURSE = load_course()
STEMS = [notebook.stem for notebook in COURSE.notebooks if notebook.auto_points]
FUNCTION, CLASS, CONSTANT = "function", "class", "constant"


@pytest.fixture(scope="module", autouse=True)
def _grading_environment():
    with grading_environment():
        yield


# --------------------------------------------------------------------------- the names the suites grade
def defined_names(source: str) -> dict[str, str]:
    """Each top-level name that a cell's ``source`` defines -> FUNCTION, CLASS or CONSTANT."""
    names: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = FUNCTION
        elif isinstance(node, ast.ClassDef):
            names[node.name] = CLASS
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(dict.fromkeys((t.id for t in targets if isinstance(t, ast.Name)), CONSTANT))
    return names


def student_names(notebook: Notebook) -> dict[str, str]:
    """Each name that a solution cell of ``notebook`` defines -> the visible-test cell that grades it."""
    return {name: item.test for item in notebook.solutions for name in defined_names(item.source)}


def graded_definitions(notebook: Notebook) -> dict[str, str]:
    """The graded functions and classes of ``notebook`` (answer constants excluded) -> FUNCTION or CLASS."""
    return {name: kind for item in notebook.solutions for name, kind in defined_names(item.source).items()
            if kind != CONSTANT}


def _rounds(table: str) -> list:
    """(stem, index) of every round of ``table`` (MUTANTS or ALTERNATIVES) of every variants module."""
    return [pytest.param(stem, index, id=f"{stem}-{index}")
            for stem in STEMS for index in range(len(getattr(variants.of(stem), table, [])))]


@pytest.mark.parametrize("stem", STEMS)
def test_each_solution_cell_defines_the_names_its_tests_grade(stem):
    notebook = COURSE.notebook(stem)
    defined = [(name, item.grade_id) for item in notebook.solutions for name in defined_names(item.source)]
    for item in notebook.solutions:
        assert defined_names(item.source), f"the solution cell {item.grade_id} defines no name"
    names = [name for name, _ in defined]
    assert len(names) == len(set(names)), f"a name defined by two solution cells: {sorted(defined)}"
    assert set(student_names(notebook).values()) == set(notebook.test_points)


@pytest.mark.parametrize("stem", STEMS)
def test_variants_exist_and_name_student_definitions(stem):
    """A typo in a variant's name would test nothing: the reference would stand in for it."""
    module = variants.of(stem)
    assert module is not None, f"tests/grading/variants/{stem}/ is missing: every auto-graded notebook needs one"
    names = student_names(COURSE.notebook(stem))
    for table in ("MUTANTS", "ALTERNATIVES"):
        assert hasattr(module, table), f"{module.__name__} has no {table} (a list of rounds, possibly empty)"
        for index, variant_round in enumerate(getattr(module, table)):
            assert variant_round, f"{module.__name__}.{table}[{index}] is an empty round"
            unknown = sorted(set(variant_round) - set(names))
            assert not unknown, f"{module.__name__}.{table}[{index}]: no solution cell of {stem} defines {unknown}"
    assert module.MUTANTS, f"{module.__name__}: MUTANTS needs at least one round"


@pytest.mark.parametrize("stem", STEMS)
def test_every_graded_function_has_two_alternative_implementations(stem):
    """A suite that accepts only the reference's way is unfair to every other correct solution:
    each graded function and class has at least two correct variants written differently."""
    module = variants.of(stem)
    counts = {name: sum(name in variant_round for variant_round in getattr(module, "ALTERNATIVES", []))
              for name in graded_definitions(COURSE.notebook(stem))}
    short = {name: count for name, count in counts.items() if count < 2}
    assert not short, (f"{module.__name__}.ALTERNATIVES: fewer than two correct variants of {short} "
                       "(rounds that name each); add implementations written differently from the reference")


def test_every_variants_module_belongs_to_an_auto_graded_notebook():
    assert not set(variants.stems()) - set(STEMS), (
        f"variants modules without an auto-graded notebook: {sorted(set(variants.stems()) - set(STEMS))}")


# --------------------------------------------------------------------------- full marks
@pytest.mark.parametrize("stem", STEMS)
def test_reference_earns_every_point(stem):
    cell_points = COURSE.notebook(stem).test_points
    results = grade_in_process(stem, student_namespace(stem))
    assert results, f"the suite of {stem} ran no test"
    assert all(r.status == "passed" for r in results), "the reference lost points:\n" + failures(results)
    cells = points_per_cell(results)
    assert set(cells) == set(cell_points), f"cells graded by the suite: {sorted(cells)}"
    for cell, points in cell_points.items():
        assert cells[cell] == (points, points), f"{cell}: earned/available {cells[cell]}, the cell has {points}"


@pytest.mark.parametrize("stem, index", _rounds("ALTERNATIVES"))
def test_alternative_correct_solutions_earn_every_point(stem, index):
    results = grade_in_process(stem, student_namespace(stem, **variants.of(stem).ALTERNATIVES[index]))
    assert all(r.status == "passed" for r in results), (
        f"correct solutions written differently from the reference lost points:\n{failures(results)}")


# --------------------------------------------------------------------------- wrong solutions
@pytest.mark.parametrize("stem, index", _rounds("MUTANTS"))
def test_wrong_solutions_lose_points_on_their_cell(stem, index):
    mutants = variants.of(stem).MUTANTS[index]
    cell_of = student_names(COURSE.notebook(stem))
    mutated_cells = {cell_of[name] for name in mutants}
    assert len(mutated_cells) == len(mutants), "one mutant per cell and round"
    results = grade_in_process(stem, student_namespace(stem, **mutants))
    assert not any(GRADER_BUG in r.message for r in results), "a test crashed:\n" + failures(results)
    cells = points_per_cell(results)
    for name, mutant in mutants.items():
        earned, available = cells[cell_of[name]]
        assert earned < available, f"{getattr(mutant, '__name__', name)} kept all {available} points of {cell_of[name]}"
    for cell, (earned, available) in cells.items():
        if cell not in mutated_cells:
            assert earned == available, f"{cell} lost points although it was not mutated:\n{failures(results, cell)}"


@pytest.mark.parametrize("stem", STEMS)
def test_not_implemented_scores_zero_with_error_status(stem):
    def stub(*args, **kwargs):
        raise NotImplementedError

    class StubLayer(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            raise NotImplementedError

    notebook = COURSE.notebook(stem)
    stubs = {name: StubLayer if kind == CLASS else stub for name, kind in graded_definitions(notebook).items()}
    results = grade_in_process(stem, student_namespace(stem, **stubs))
    cell_of = student_names(notebook)
    graded_cells = {cell_of[name] for name in stubs}
    stubbed = [r for r in results if r.grade_id in graded_cells]
    assert {r.grade_id for r in stubbed} == graded_cells
    for result in stubbed:
        assert result.points == 0 and result.status == "error", (result.test, result.status, result.message)
        assert "not implemented" in result.message, (result.test, result.message)
