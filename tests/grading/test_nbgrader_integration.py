"""`nbgrader autograde` grades in the sandbox; gradebook, feedback and export work."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.course import load_course
from autograder.paths import REPO, venv_env
from autograder.pytest_plugin import suite_modules

SAMPLES = REPO / "data" / "sample_submissions"
STEM = "part_b_bert_gpt"
# The notebook's auto-graded points, from the course model (not a copy of its total).
AUTO_POINTS = load_course().notebook(STEM).auto_points
pytestmark = pytest.mark.slow


def nbgrader(root: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={root}",
               f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}"]
    # cwd=REPO: nbgrader reads the course's nbgrader_config.py from there.
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=venv_env(), timeout=900)
    assert result.returncode == 0, f"nbgrader {args[0]} failed:\n{result.stdout}\n{result.stderr}"
    return result


@pytest.fixture(scope="module")
def course(tmp_path_factory, repo_root):
    root = tmp_path_factory.mktemp("course")
    shutil.copytree(repo_root / "solutions" / "week6", root / "solutions" / "week6",
                    ignore=shutil.ignore_patterns("__pycache__"))
    nbgrader(root, "generate_assignment", "week6", "--force")
    for student in ("alice_full_solution", "ivan_patches_comparisons"):
        target = root / "submitted" / student / "week6"
        target.mkdir(parents=True)
        shutil.copy(SAMPLES / student / "week6" / f"{STEM}.ipynb", target)
    autograde = nbgrader(root, "autograde", "week6", "--create", "--force")
    return root, autograde


def test_autograde_writes_sandboxed_scores_to_the_gradebook(course):
    from nbgrader.api import Gradebook

    root, _ = course
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "nlp-week6") as gradebook:
        full = gradebook.find_submission_notebook(STEM, "week6", "alice_full_solution")
        cheat = gradebook.find_submission_notebook(STEM, "week6", "ivan_patches_comparisons")
        assert full.code_score == full.max_code_score == AUTO_POINTS
        assert cheat.code_score == 0
        # Written answers are left for the formgrader.
        assert full.needs_manual_grade


def test_no_student_code_ran_in_a_kernel(course):
    """The autograded notebook's test cells hold the grader's report, not kernel output."""
    import nbformat

    root, _ = course
    notebook = nbformat.read(root / "autograded" / "ivan_patches_comparisons" / "week6" / f"{STEM}.ipynb",
                             as_version=4)
    softmax_cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_softmax")
    (output,) = softmax_cell.outputs
    assert output["output_type"] == "error" and output["evalue"].startswith("0 of 3 points")
    assert "FAILED" in "\n".join(output["traceback"])
    experiment_outputs = [c for c in notebook.cells if c.cell_type == "code" and c.outputs
                          and not c.metadata.get("nbgrader", {}).get("grade")]
    assert experiment_outputs == [], "experiment cells must not be executed during autograding"


def test_feedback_shows_messages_but_no_hidden_test_code(course, repo_root):
    root, _ = course
    nbgrader(root, "generate_feedback", "week6", "--force")
    html = (root / "feedback" / "ivan_patches_comparisons" / "week6" / f"{STEM}.html").read_text()
    assert "test_softmax" in html and "differs from" in html
    hidden_source = "\n".join(path.read_text() for path in suite_modules(STEM))
    for line in hidden_source.splitlines():
        line = line.strip()
        if len(line) > 40 and not line.startswith(("#", '"', "'")) and "expect" in line:
            assert line not in html, f"feedback leaks hidden test code: {line!r}"
    assert "BEGIN HIDDEN TESTS" not in html


def test_export_lists_both_students(course):
    root, _ = course
    out = root / "grades.csv"
    nbgrader(root, "export", f"--to={out}")
    text = out.read_text()
    assert "alice_full_solution" in text and "ivan_patches_comparisons" in text


def test_merge_imports_reports_of_a_sharded_run_into_the_gradebook(course, repo_root):
    """Scores graded outside nbgrader (a Slurm array) reach the gradebook without grading again."""
    import json

    from nbgrader.api import Gradebook

    root, _ = course
    reports = root / "reports"
    graded = subprocess.run([sys.executable, "-m", "autograder", "grade", str(root / "submitted"), "--out",
                             str(reports), "--device", "cpu", "--shard", "0/1"], cwd=repo_root, capture_output=True,
                            text=True, env=venv_env(), timeout=900)
    assert graded.returncode == 0, graded.stderr[-2000:]
    # A score only the report holds: if the import graded again, it would be full marks.
    path = reports / "alice_full_solution" / f"{STEM}.json"
    report = json.loads(path.read_text())
    report["tests"][0]["points"] = 0.0
    path.write_text(json.dumps(report))
    merged = subprocess.run([sys.executable, "-m", "autograder", "merge", str(reports), "--nbgrader",
                             "--course-root", str(root)], cwd=repo_root, capture_output=True, text=True,
                            env=venv_env(), timeout=900)
    assert merged.returncode == 0, merged.stdout[-2000:] + merged.stderr[-2000:]
    assert "scores from the report" in merged.stderr
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "nlp-week6") as gradebook:
        full = gradebook.find_submission_notebook(STEM, "week6", "alice_full_solution")
        cheat = gradebook.find_submission_notebook(STEM, "week6", "ivan_patches_comparisons")
        assert (full.code_score, cheat.code_score) == (AUTO_POINTS - report["tests"][0]["max_points"], 0)
