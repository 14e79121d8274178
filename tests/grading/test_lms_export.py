"""LMS export: Canvas's and Moodle's gradebook import CSV, from the reports and a mapping the TA keeps.

Canvas's file is checked against the rules of Canvas's own importer
(``GradebookImporter`` in canvas-lms: a header whose first column says "Student" and
second "ID", "SIS User ID" and "SIS Login ID" as a pair, "Section" last among the
student columns, an optional "Points Possible" row, and no grade column whose title
Canvas would take for one of its read-only totals).
"""
from __future__ import annotations

import csv
import re
import subprocess
import sys

import pytest

from autograder.analytics.lms_export import export, read_mapping
from autograder.analytics.results import load_grades
from autograder.course import load_course
from autograder.errors import ConfigurationError
from autograder.grade_history import write_report
from autograder.paths import REPO
from autograder.report import Report, TestResult

COURSE = load_course()
STEMS = COURSE.stems
# Canvas's importer drops grade columns matching these (its read-only totals), wherever in the title.
CANVAS_READ_ONLY = re.compile("Current Score|Current Points|Current Grade|Final Score|Final Points|Final Grade|"
                              "Override Score|Override Grade|Override Status")


def graded(student: str, stem: str, score: float, outcome: str = "graded") -> Report:
    notebook = COURSE.notebook(stem)
    return Report(student, f"{stem}.ipynb", outcome=outcome, score=score, max_score=notebook.auto_points,
                  tests=[TestResult(notebook.tests[0].grade_id, "t", "passed", score, score, "")])


@pytest.fixture
def grades(tmp_path):
    out = tmp_path / "grades"
    write_report(out, "alice", "part_a_discovery", graded("alice", "part_a_discovery", 12))
    write_report(out, "alice", "part_b_bert_gpt", graded("alice", "part_b_bert_gpt", 40.3333))
    write_report(out, "bob", "part_a_discovery", graded("bob", "part_a_discovery", 7.5))
    return out


def mapping(tmp_path, text: str):
    path = tmp_path / "mapping.csv"
    path.write_text(text)
    return path


def rows_of(path):
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def check_canvas_import(rows: list[list[str]]) -> None:
    """What Canvas's importer requires of the header (its row_has_student_headers and update_column_count)."""
    header = rows[0]
    assert "Student" in header[0] and "ID" in header[1]
    assert re.search(r"SIS\s+User\s+ID", header[2]) and re.search(r"SIS\s+Login\s+ID", header[3])
    assert "Section" in header[4], "Section closes the student columns"
    assert not any(CANVAS_READ_ONLY.search(title) for title in header[5:])
    assert not any(re.search(r"\s\(\d+\)$", title) for title in header[5:]), "no title claims a Canvas assignment id"
    assert "Points Possible" in rows[1][0]
    assert all(len(row) == len(header) for row in rows)


def test_canvas_file_has_canvas_headers_points_possible_and_one_column_per_notebook(tmp_path, grades):
    table = mapping(tmp_path, "student,name,sis_login_id,section\nalice,Alice Liddell,aliddell,L01\n"
                              "bob,Bob Ross,bross,L02\ncarol,Carol Danvers,cdanvers,L01\n")
    out, notes = export(load_grades(grades), table, "canvas", tmp_path / "canvas.csv")
    rows = rows_of(out)
    check_canvas_import(rows)
    assert rows[0][5:] == [f"week6 {stem}" for stem in STEMS] + ["week6 total"]
    assert rows[1][5:] == [f"{nb.auto_points:g}" for nb in COURSE.notebooks] + [f"{COURSE.auto_points:g}"]
    alice = dict(zip(rows[0], rows[2]))
    assert (alice["Student"], alice["ID"], alice["SIS User ID"], alice["SIS Login ID"], alice["Section"]) == (
        "Alice Liddell", "", "", "aliddell", "L01")
    assert (alice["week6 part_a_discovery"], alice["week6 part_b_bert_gpt"],
            alice["week6 exercise1_masked_predictions"], alice["week6 total"]) == ("12", "40.33", "0", "52.33"), \
        "a notebook not handed in counts 0"
    carol = dict(zip(rows[0], rows[4]))
    assert carol["week6 total"] == "" and any("carol" in note for note in notes), "no report: left as it was"


def test_canvas_columns_can_be_the_total_only(tmp_path, grades):
    table = mapping(tmp_path, "student,canvas_id\nalice,101\nbob,102\n")
    rows = rows_of(export(load_grades(grades), table, "canvas", tmp_path / "c.csv", columns="total")[0])
    check_canvas_import(rows)
    assert rows[0][5:] == ["week6 total"] and rows[2][1:2] == ["101"] and rows[3][5] == "7.5"


def test_moodle_file_has_the_mapped_identity_column_and_the_grades(tmp_path, grades):
    table = mapping(tmp_path, "student,email,username\nalice,alice@uni.example,aliddell\nbob,bob@uni.example,bross\n")
    out, notes = export(load_grades(grades), table, "moodle", tmp_path / "moodle.csv", columns="notebooks")
    rows = rows_of(out)
    assert rows[0] == ["Username", "Email address", *[f"week6 {stem}" for stem in STEMS]]
    assert rows[1][:4] == ["aliddell", "alice@uni.example", "12", "40.33"]
    assert any("map from 'Username'" in note for note in notes)


def test_cells_are_safe_to_open_in_a_spreadsheet(tmp_path, grades):
    table = mapping(tmp_path, 'student,name,sis_login_id,section\nalice,"=HYPERLINK(""http://x"")",aliddell,'
                              '@SUM(A1)\nbob,+cmd,bross,-1\n')
    rows = rows_of(export(load_grades(grades), table, "canvas", tmp_path / "c.csv")[0])
    cells = [cell for row in rows[2:] for cell in row]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@")]
    assert rows[2][0] == "'=HYPERLINK(\"http://x\")" and rows[2][4] == "'@SUM(A1)"


@pytest.mark.parametrize("text, problem", [
    ("name,sis_login_id\nAlice,a\n", "'student' is missing"),
    ("student,sis_login_id,favourite_colour\nalice,a,red\n", "unknown: favourite_colour"),
    ("student,name\nalice,Alice\n", "no column that Canvas matches students by"),
    ("student,sis_login_id\nalice,a\nalice,b\n", "'alice' is also on line 2"),
    ("student,sis_login_id\nalice,a\nbob,a\n", "sis_login_id 'a' is also on line 2"),
    ("student,sis_login_id\nalice,=cmd|' /C calc'!A0\n", "starts like a spreadsheet formula"),
    ("student,canvas_id\nalice,12ab\n", "not Canvas's numeric user ID"),
    ("student,sis_login_id,name\nalice,,Alice\n", "has none of canvas_id, sis_user_id, sis_login_id"),
    ("student,sis_login_id\nalice,a\x07b\n", "control characters"),
])
def test_a_bad_mapping_is_refused_with_the_line_and_the_fix(tmp_path, text, problem):
    with pytest.raises(ConfigurationError) as raised:
        read_mapping(mapping(tmp_path, text), "canvas")
    assert problem in str(raised.value)


def test_moodle_needs_its_key_column_on_every_row(tmp_path):
    with pytest.raises(ConfigurationError, match="has no idnumber"):
        read_mapping(mapping(tmp_path, "student,idnumber,email\nalice,,a@x\n"), "moodle")


def test_a_student_missing_from_the_mapping_stops_the_export(tmp_path, grades):
    with pytest.raises(ConfigurationError, match=r"1 student\(s\) with reports are not in .*\(bob\): add a row"):
        export(load_grades(grades), mapping(tmp_path, "student,sis_login_id\nalice,a\n"), "canvas", tmp_path / "x.csv")
    assert not (tmp_path / "x.csv").exists(), "nothing half-written"


def test_a_notebook_the_grader_did_not_finish_stops_the_export(tmp_path, grades):
    write_report(grades, "bob", "part_b_bert_gpt", Report.problem("bob", "part_b_bert_gpt.ipynb", "killed",
                                                                  outcome="failed"))
    with pytest.raises(ConfigurationError, match="grading did not finish .*bob/part_b_bert_gpt.ipynb.*run the same"):
        export(load_grades(grades), mapping(tmp_path, "student,sis_login_id\nalice,a\nbob,b\n"), "canvas",
               tmp_path / "x.csv")


def test_the_cli_writes_the_file_and_refuses_a_bad_mapping_with_status_3(tmp_path, grades):
    good = mapping(tmp_path, "student,sis_login_id\nalice,a\nbob,b\n")
    result = subprocess.run([sys.executable, "-m", "autograder", "export", str(grades), "--format", "canvas",
                             "--map", str(good)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    check_canvas_import(rows_of(grades / "canvas-grades.csv"))
    bad = tmp_path / "bad.csv"
    bad.write_text("who,sis_login_id\nalice,a\n")
    result = subprocess.run([sys.executable, "-m", "autograder", "export", str(grades), "--format", "moodle",
                             "--map", str(bad)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 3 and "'student' is missing" in result.stderr
