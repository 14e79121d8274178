"""The course model (autograder/course.py) agrees with the source notebooks, refuses a
course it cannot vouch for, and is the only home of the notebooks' order."""
from __future__ import annotations

import ast
import json
import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder import course as course_module
from autograder import notebook as notebook_module
from autograder.course import (
    KINDS,
    SOLUTION,
    TEST,
    CourseError,
    UnknownNotebook,
    load_course,
    read_course,
)
from autograder.paths import REPO

SOURCE = notebook_module.SOURCE_DIR / "week6"
COURSE_MODULE = REPO / "autograder" / "course.py"
THIS_FILE = Path(__file__).resolve()


def _raw(stem: str) -> list[tuple[str, dict]]:
    """(cell type, nbgrader metadata) of every cell, read as plain JSON: independent of the model."""
    notebook = json.loads((SOURCE / f"{stem}.ipynb").read_text(encoding="utf-8"))
    return [(cell["cell_type"], cell.get("metadata", {}).get("nbgrader", {})) for cell in notebook["cells"]]


# ================================================================ agreement with the notebooks
def test_the_course_has_eight_notebooks_in_working_order():
    stems = load_course().stems
    assert len(stems) == 8
    assert stems[:3] == ["part_a_discovery", "part_b_bert_gpt", "part_b_finetuning"]
    assert [re.match(r"exercise(\d)_", stem)[1] for stem in stems[3:]] == ["1", "2", "3", "4", "5"]
    assert sorted(stems) == sorted(p.stem for p in SOURCE.glob("*.ipynb"))
    assert all(notebook.path == SOURCE / notebook.filename for notebook in load_course().notebooks)


def test_the_course_is_well_formed():
    course = load_course()
    assert course.points == course.auto_points + course.written_points > 0
    assert sum(len(notebook.tests) for notebook in course.notebooks) == len(course.items(TEST))
    assert all(notebook.setup for notebook in course.notebooks), "every notebook has a setup cell"
    assert all(notebook.graded for notebook in course.notebooks), "every notebook carries points"


@pytest.mark.parametrize("stem", load_course().stems)
def test_items_and_points_agree_with_the_metadata(stem):
    notebook = load_course().notebook(stem)
    raw = [(cell_type, meta) for cell_type, meta in _raw(stem) if meta]
    auto = {m["grade_id"]: float(m["points"]) for t, m in raw if t == "code" and m.get("grade")}
    written = {m["grade_id"]: float(m["points"]) for t, m in raw if t == "markdown" and m.get("grade")}
    solutions = [m["grade_id"] for t, m in raw if t == "code" and m.get("solution")]
    setup = [m["grade_id"] for t, m in raw if m.get("grade_id", "").startswith("setup")]
    assert notebook.test_points == auto
    assert {item.grade_id: item.points for item in notebook.written} == written
    assert [item.grade_id for item in notebook.solutions] == solutions
    assert [item.grade_id for item in notebook.setup] == setup
    assert (notebook.auto_points, notebook.written_points) == (sum(auto.values()), sum(written.values()))
    assert [item.grade_id for item in notebook.items] == [m["grade_id"] for _, m in raw]
    assert all(item.points == 0 for item in notebook.items if not item.graded)


@pytest.mark.parametrize("stem", load_course().stems)
def test_items_carry_the_instructor_source_the_plan_runs(stem):
    notebook = load_course().notebook(stem)
    cells = nbformat.read(SOURCE / f"{stem}.ipynb", as_version=4).cells
    for item in notebook.items:
        assert item.source == cells[item.index].source, item.grade_id
    assert all(item.source.strip() for item in notebook.setup)


@pytest.mark.parametrize("stem", load_course().stems)
def test_each_solution_is_linked_to_its_test_cell(stem):
    notebook = load_course().notebook(stem)
    for item in notebook.solutions:
        test = notebook.test_of(item.grade_id)
        assert (test.grade_id, test.kind, test.solution) == (f"test_{item.grade_id}", TEST, item.grade_id)
        assert item.index < test.index
    assert {item.solution for item in notebook.tests} == {item.grade_id for item in notebook.solutions}


def test_lookups_and_points_except():
    course = load_course()
    main = course.notebook("part_b_bert_gpt")
    assert main.item("test_softmax").points == 3 and main.item("softmax").kind == SOLUTION
    assert main.points_except("softmax", "beam_search") == main.auto_points - 3 - 5
    with pytest.raises(KeyError, match="no cell with grade_id 'nope'"):
        main.item("nope")
    with pytest.raises(KeyError, match="not a solution cell"):
        main.test_of("test_softmax")
    assert [item.notebook for item in course.items()] == [nb.stem for nb in course.notebooks for _ in nb.items]
    assert {item.kind for item in course.items()} == set(KINDS)
    with pytest.raises(ValueError, match="unknown item kind"):
        course.items("autograded")


def test_load_course_reads_once():
    assert load_course() is load_course()


def test_an_unknown_notebook_is_a_clear_error():
    with pytest.raises(UnknownNotebook) as caught:
        load_course().notebook("exercise6_prompting")
    message = str(caught.value)
    assert "'exercise6_prompting' is not one of the course's notebooks" in message
    assert "part_a_discovery" in message and "NOTEBOOK_ORDER in autograder/course.py" in message
    assert isinstance(caught.value, LookupError) and isinstance(caught.value, CourseError)


# ================================================================ a course it refuses
@pytest.fixture
def scratch_source(tmp_path) -> Path:
    """A copy of solutions/ to break."""
    shutil.copytree(SOURCE, tmp_path / "week6", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return tmp_path


def test_a_notebook_missing_from_the_order_is_named_with_the_fix(scratch_source):
    shutil.copy(SOURCE / "exercise5_span_corruption.ipynb", scratch_source / "week6" / "exercise6_prompting.ipynb")
    with pytest.raises(CourseError, match=r"exercise6_prompting\.ipynb .* is not in the course's order: add it to "
                                          r"NOTEBOOK_ORDER in autograder/course.py"):
        load_course(scratch_source)


def test_a_notebook_missing_from_disk_is_named_with_the_fix(scratch_source):
    (scratch_source / "week6" / "exercise4_model_size.ipynb").unlink()
    with pytest.raises(CourseError, match=r"NOTEBOOK_ORDER in autograder/course.py names exercise4_model_size\.ipynb, "
                                          r"missing from .*: restore the notebook, or remove it from NOTEBOOK_ORDER"):
        read_course(scratch_source)


def _edit(source: Path, stem: str, edit) -> None:
    path = source / "week6" / f"{stem}.ipynb"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    edit({c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c for c in notebook["cells"]}, notebook)
    path.write_text(json.dumps(notebook), encoding="utf-8")


def _rename(cells, old, new):
    cells[old]["metadata"]["nbgrader"]["grade_id"] = new


BROKEN = {
    "a duplicated grade_id": (lambda cells, nb: _rename(cells, "test_softmax", "test_causal_mask"),
                              "share the grade_id 'test_causal_mask'"),
    "a solution without its test cell": (lambda cells, nb: _rename(cells, "test_softmax", "test_softmax_2"),
                                         "'softmax' has no visible-test cell 'test_softmax'"),
    "malformed metadata": (lambda cells, nb: cells["test_softmax"]["metadata"]["nbgrader"].update(points="lots"),
                           "nbgrader.points is str"),
    "an autograded answer cell": (lambda cells, nb: cells["softmax"]["metadata"]["nbgrader"].update(grade=True),
                                  "neither a visible-test cell nor a written answer"),
}


@pytest.mark.parametrize("broken", BROKEN)
def test_a_notebook_the_grader_cannot_use_is_refused(scratch_source, broken):
    edit, message = BROKEN[broken]
    _edit(scratch_source, "part_b_bert_gpt", edit)
    with pytest.raises(CourseError, match=re.escape(message)):
        read_course(scratch_source)


# ================================================================ the order's only home
SKIPPED_FOLDERS = {"__pycache__", "build", "dist", "node_modules", "_downloads"}


def _python_files(repo_root: Path):
    for folder, subfolders, files in os.walk(repo_root):
        subfolders[:] = [name for name in subfolders if name not in SKIPPED_FOLDERS
                         and not name.startswith(".") and not name.endswith(".egg-info")]
        yield from (Path(folder) / name for name in files if name.endswith(".py"))


def test_the_course_model_is_the_only_home_of_the_notebook_order(repo_root):
    """No module but autograder/course.py names NOTEBOOK_ORDER or spells out the list of notebooks:
    the others read the order from load_course()."""
    stems = set(course_module.NOTEBOOK_ORDER)
    offenders = []
    files = list(_python_files(repo_root))
    assert COURSE_MODULE in files and len(files) > 50
    for path in files:
        if path in (COURSE_MODULE, THIS_FILE):
            continue
        where = path.relative_to(repo_root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            name = (node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute)
                    else node.name if isinstance(node, ast.alias) else None)
            if name == "NOTEBOOK_ORDER":
                offenders.append(f"{where}:{node.lineno if hasattr(node, 'lineno') else '?'} names NOTEBOOK_ORDER")
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                listed = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if stems <= listed:
                    offenders.append(f"{where}:{node.lineno} lists every notebook of the course")
    assert not offenders, ("the notebooks' order has one home, NOTEBOOK_ORDER in autograder/course.py; read it "
                           "with load_course().stems instead:\n" + "\n".join(offenders))
