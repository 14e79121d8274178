"""One bad notebook costs only its author in `nbgrader autograde`, as in `python -m autograder grade`.

A scratch course of one notebook (``part_a_discovery``) and a class in which hostile
submissions sit before, between and after honest ones in the order nbgrader visits
the students (sorted folder names): the four ways to give two cells one ``grade_id``
(a copied test cell, a stub before or after its solution, a copied written answer),
cells whose nbgrader metadata nbgrader itself refuses, missing and moved cells,
50,000 tiny cells, a notebook over the size limit (a sparse file), a FIFO and a link
to the instructor's solution in place of a notebook, and a student folder whose name
is HTML.

Real ``nbgrader autograde`` grades the class once and ``python -m autograder grade``
grades the same ``submitted/`` tree once; every test reads those two runs. Every
honest student gets full marks; every notebook nbgrader keeps gets the CLI's score;
each bad one gets its own result, with the cell or limit named in the log, and in the
autograded notebook and its feedback; the HTML name is refused and never reaches the
gradebook.
"""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import files, intake
from autograder.course import load_course
from autograder.paths import REPO, venv_env

SAMPLES = REPO / "data" / "sample_submissions"
STEM = "part_a_discovery"
ALICE = SAMPLES / "alice_full_solution" / "week6" / f"{STEM}.ipynb"
RELEASE = REPO / "assignments" / "week6" / f"{STEM}.ipynb"
AUTO_POINTS = load_course().notebook(STEM).auto_points
HTML_ID = "<img src=x onerror=alert(1)>"
HONEST = ("alice", "mia", "zoe")
pytestmark = pytest.mark.slow


def cell_index(notebook, grade_id: str) -> int:
    return next(i for i, c in enumerate(notebook.cells) if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def cell_named(notebook, grade_id: str):
    return notebook.cells[cell_index(notebook, grade_id)]


def alice():
    return nbformat.read(ALICE, as_version=4)


def released_cell(grade_id: str):
    """The cell as the student received it: a stub for a solution cell."""
    return copy.deepcopy(cell_named(nbformat.read(RELEASE, as_version=4), grade_id))


def with_cell_twice(grade_id: str):
    """Alice's notebook with the cell ``grade_id`` copied right below itself."""
    notebook = alice()
    at = cell_index(notebook, grade_id)
    notebook.cells.insert(at + 1, copy.deepcopy(notebook.cells[at]))
    return notebook


# ---------------------------------------------------------------- the hostile notebooks
def duplicated_test_cell():
    return with_cell_twice("test_sequence_logprob")


def stub_before_solution():
    notebook = alice()
    notebook.cells.insert(cell_index(notebook, "sequence_logprob"), released_cell("sequence_logprob"))
    return notebook


def stub_after_solution():
    notebook = alice()
    notebook.cells.insert(cell_index(notebook, "sequence_logprob") + 1, released_cell("sequence_logprob"))
    return notebook


def duplicated_answer_cell():
    return with_cell_twice("a1_movie_review_skills")


def refused_metadata():
    """Metadata the CLI's schema accepts and nbgrader refuses: an old schema version on a
    solution cell (nbgrader stops the whole class for it), an unknown key on a test cell,
    and a markdown cell that claims to be graded without points."""
    notebook = alice()
    cell_named(notebook, "top_k_next_tokens").metadata.nbgrader["schema_version"] = 1
    cell_named(notebook, "test_task_categories").metadata.nbgrader["reviewed"] = True
    notebook.cells.append(nbformat.v4.new_markdown_cell("My own notes.", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": False, "grade_id": "my_notes", "schema_version": 3}}))
    return notebook


def missing_cells():
    """A test cell, a written answer and a solution cell deleted."""
    notebook = alice()
    for grade_id in ("test_top_k_next_tokens", "a2_which_is_more_accurate", "pretraining_costs"):
        del notebook.cells[cell_index(notebook, grade_id)]
    return notebook


def moved_cells():
    """A test cell moved to the end, and a test cell of another notebook pasted in."""
    notebook = alice()
    notebook.cells.append(notebook.cells.pop(cell_index(notebook, "test_spanish_reuse")))
    foreign = cell_named(nbformat.read(REPO / "assignments" / "week6" / "part_b_bert_gpt.ipynb", as_version=4),
                         "test_softmax")
    notebook.cells.insert(3, copy.deepcopy(foreign))
    return notebook


HOSTILE = {
    "bea_duplicated_test_cell": duplicated_test_cell,
    "ben_stub_before_solution": stub_before_solution,
    "bob_stub_after_solution": stub_after_solution,
    "cal_duplicated_answer_cell": duplicated_answer_cell,
    "dan_refused_metadata": refused_metadata,
    "nat_missing_cells": missing_cells,
    "ned_moved_cells": moved_cells,
}
MANY_CELLS, OVERSIZED = "oli_many_cells", "ora_oversized"
# A FIFO, which nbgrader's open() waited on forever, and a link to the instructor's
# solution, which nbgrader read and graded as the student's.
NOT_A_FILE = {"pia_fifo_notebook": "FIFO", "pim_linked_solution": "symbolic link"}
# The cells each hostile notebook's log lines and notices must name.
NAMED = {
    "bea_duplicated_test_cell": ["test_sequence_logprob"],
    "ben_stub_before_solution": ["sequence_logprob"],
    "bob_stub_after_solution": ["sequence_logprob"],
    "cal_duplicated_answer_cell": ["a1_movie_review_skills"],
    "dan_refused_metadata": ["top_k_next_tokens", "test_task_categories", "my_notes"],
    "nat_missing_cells": ["test_top_k_next_tokens", "a2_which_is_more_accurate"],
    "ned_moved_cells": ["test_softmax"],
}


def many_cells(target: Path) -> None:
    """Alice's notebook and 50,000 tiny cells, written as plain JSON (nbformat would
    validate them all)."""
    notebook = json.loads(ALICE.read_text())
    notebook["cells"] += [{"cell_type": "code", "execution_count": None, "id": f"tiny{i}", "metadata": {},
                           "outputs": [], "source": ""} for i in range(50_000)]
    target.write_text(json.dumps(notebook))


def oversized(target: Path) -> None:
    """Alice's notebook followed by a hole up to one byte over the limit: no disk used."""
    target.write_bytes(ALICE.read_bytes())
    with open(target, "r+b") as handle:
        handle.truncate(files.MAX_NOTEBOOK_BYTES + 1)


# ---------------------------------------------------------------- the two runs
def run(command: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    # cwd=REPO: nbgrader reads the course's nbgrader_config.py from there.
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=venv_env(), timeout=timeout)


def nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={root}",
                f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}"])


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("class-run")
    (root / "solutions" / "week6").mkdir(parents=True)
    shutil.copy(REPO / "solutions" / "week6" / f"{STEM}.ipynb", root / "solutions" / "week6")
    generated = nbgrader(root, "generate_assignment", "week6", "--force")
    assert generated.returncode == 0, generated.stdout + generated.stderr

    def folder(student: str) -> Path:
        target = root / "submitted" / student / "week6"
        target.mkdir(parents=True)
        return target / f"{STEM}.ipynb"

    for student in (*HONEST, HTML_ID):
        shutil.copy(ALICE, folder(student))
    for student, make in HOSTILE.items():
        nbformat.write(make(), folder(student))
    many_cells(folder(MANY_CELLS))
    oversized(folder(OVERSIZED))
    os.mkfifo(folder("pia_fifo_notebook"))
    folder("pim_linked_solution").symlink_to(REPO / "solutions" / "week6" / f"{STEM}.ipynb")

    autograde = nbgrader(root, "autograde", "week6", "--create", "--force")
    cli = run([sys.executable, "-m", "autograder", "grade", str(root / "submitted"), "--out", str(root / "cli"),
               "--device", "cpu", "--jobs", "2"])
    return root, autograde, cli


@pytest.fixture(scope="module")
def log(course) -> str:
    _, autograde, _ = course
    return autograde.stdout + autograde.stderr


def gradebook(root: Path):
    from nbgrader.api import Gradebook

    return Gradebook(f"sqlite:///{root / 'gradebook.db'}", "nlp-week6")


def cli_score(root: Path, student: str) -> float:
    return json.loads((root / "cli" / student / f"{STEM}.json").read_text())["score"]


def autograded(root: Path, student: str):
    return nbformat.read(root / "autograded" / student / "week6" / f"{STEM}.ipynb", as_version=4)


def notices(notebook) -> str:
    """The text of the cells the intake added: markdown cells without nbgrader metadata
    that say what was not graded."""
    return "\n".join(c.source for c in notebook.cells
                     if c.cell_type == "markdown" and "nbgrader" not in c.metadata and "Not graded" in c.source)


# ---------------------------------------------------------------- the class run
def test_the_class_run_finishes_without_an_error(course, log):
    _, autograde, cli = course
    assert autograde.returncode == 0, log[-6000:]
    assert "old version" not in log and "There was an error processing assignment" not in log, log[-6000:]
    assert cli.returncode == 0, cli.stderr[-3000:]


def test_every_honest_student_gets_full_marks(course):
    root, _, _ = course
    with gradebook(root) as gb:
        for student in HONEST:
            assert gb.find_submission_notebook(STEM, "week6", student).code_score == AUTO_POINTS, student


@pytest.mark.parametrize("student", sorted(HOSTILE))
def test_a_notebook_with_bad_cells_gets_the_score_the_cli_gives(course, log, student):
    root, _, _ = course
    with gradebook(root) as gb:
        assert gb.find_submission_notebook(STEM, "week6", student).code_score == cli_score(root, student)
    mine = [line for line in log.splitlines() if f"{student}/{STEM}" in line]
    for grade_id in NAMED[student]:
        assert any(grade_id in line for line in mine), f"the log does not name {grade_id}:\n" + "\n".join(mine)


def test_fair_scores_for_the_duplicate_variants(course):
    """What the CLI gives (and so nbgrader): the copied cells cost nothing, the graded
    copy of a solution is the first one, as the CLI's report warns."""
    root, _, _ = course
    sequence_logprob = 3  # the points of test_sequence_logprob
    assert cli_score(root, "bea_duplicated_test_cell") == AUTO_POINTS
    assert cli_score(root, "bob_stub_after_solution") == AUTO_POINTS
    assert cli_score(root, "cal_duplicated_answer_cell") == AUTO_POINTS
    assert cli_score(root, "ben_stub_before_solution") == AUTO_POINTS - sequence_logprob
    assert cli_score(root, "dan_refused_metadata") == AUTO_POINTS
    assert cli_score(root, "ned_moved_cells") == AUTO_POINTS
    assert cli_score(root, "nat_missing_cells") == AUTO_POINTS - 3  # pretraining_costs deleted


def test_a_missing_cell_is_put_back_and_named(course):
    root, _, _ = course
    notebook = autograded(root, "nat_missing_cells")
    # The test cell is back, with the points of a solution that is still there.
    (output,) = cell_named(notebook, "test_top_k_next_tokens").outputs
    assert output.output_type == "stream" and output.text.startswith("2 of 2 points")
    shown = notices(notebook)
    assert "test_top_k_next_tokens" in shown and "a2_which_is_more_accurate" in shown
    with gradebook(root) as gb:
        answer = gb.find_grade("a2_which_is_more_accurate", STEM, "week6", "nat_missing_cells")
        assert (answer.auto_score, answer.needs_manual_grade) == (0, False)
        kept = gb.find_grade("a1_movie_review_skills", STEM, "week6", "nat_missing_cells")
        assert kept.needs_manual_grade, "a written answer that is there is left to the TA"


def test_only_one_copy_of_a_duplicated_cell_is_graded(course):
    root, _, _ = course
    for student, grade_id in (("bea_duplicated_test_cell", "test_sequence_logprob"),
                              ("cal_duplicated_answer_cell", "a1_movie_review_skills")):
        notebook = autograded(root, student)
        ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in notebook.cells]
        assert ids.count(grade_id) == 1, student
        assert grade_id in notices(notebook)


@pytest.mark.parametrize("student, limit", [(MANY_CELLS, f"{files.MAX_CELLS:,} cells"),
                                            (OVERSIZED, f"{files.MAX_NOTEBOOK_BYTES // files.MiB} MiB")])
def test_a_notebook_over_a_limit_scores_zero_with_the_limit_named(course, log, student, limit):
    root, _, _ = course
    with gradebook(root) as gb:
        submission = gb.find_submission_notebook(STEM, "week6", student)
        assert submission.code_score == 0 == cli_score(root, student)
        assert submission.written_score == 0 and not submission.needs_manual_grade
    notebook = autograded(root, student)
    assert limit in notices(notebook), notices(notebook)
    assert len(notebook.cells) < 100, "the autograded notebook is the released one, not the submission"
    assert any(student in line and limit in line for line in log.splitlines()), log[-3000:]


@pytest.mark.parametrize("student", sorted(NOT_A_FILE))
def test_a_notebook_that_is_not_a_regular_file_is_never_read_and_scores_zero(course, student):
    root, _, _ = course
    with gradebook(root) as gb:
        assert gb.find_submission_notebook(STEM, "week6", student).code_score == 0 == cli_score(root, student)
    notebook = autograded(root, student)
    assert NOT_A_FILE[student] in notices(notebook)
    assert "### BEGIN SOLUTION" not in json.dumps(notebook), "the instructor's solution was read"


def test_an_html_student_id_is_refused_and_never_reaches_the_gradebook(course, log):
    root, _, _ = course
    with gradebook(root) as gb:
        assert HTML_ID not in {student.id for student in gb.students}
        assert set(HONEST) <= {student.id for student in gb.students}
    assert not (root / "autograded" / HTML_ID).exists()
    refusal = [line for line in log.splitlines() if "onerror" in line]
    assert refusal and all(intake.STUDENT_ID_RULE in line and "rename the folder" in line for line in refusal)
    # The CLI refuses it too, with the same words, under a report name of its own.
    reports = [json.loads(p.read_text()) for p in (root / "cli").glob("unusable-name-*/*.json")]
    assert len(reports) == 1 and intake.student_folder_refusal(HTML_ID.encode()) in reports[0]["warnings"][0]


def test_feedback_shows_each_student_what_was_not_graded(course):
    root, _, _ = course
    shown = {MANY_CELLS: f"{files.MAX_CELLS:,} cells", "nat_missing_cells": "a2_which_is_more_accurate",
             "bea_duplicated_test_cell": "test_sequence_logprob"}
    others = sorted(p.name for p in (root / "autograded").iterdir() if p.name not in shown)
    done = nbgrader(root, "generate_feedback", "week6", "--force",
                    f"--CourseDirectory.student_id_exclude={','.join(others)}")
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    for student, named in shown.items():
        html = (root / "feedback" / student / "week6" / f"{STEM}.html").read_text()
        assert "Not graded as submitted" in html and named in html, student
    assert not (root / "feedback" / HTML_ID).exists()
    assert not re.search(r"<img src=x", "".join(p.read_text() for p in (root / "feedback").rglob("*.html")))
