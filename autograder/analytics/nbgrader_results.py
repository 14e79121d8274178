"""A class graded through nbgrader, read into the class report's :class:`ClassResults`.

``nbgrader autograde`` keeps its scores in the course's ``gradebook.db`` and each
notebook's per-test messages in the autograded notebook's test-cell outputs (written
by ``nbgrader.plugin.cell_outputs``). :func:`load_gradebook` reads both into one
:class:`~autograder.report.Report` per (student, notebook):

* the score of every visible-test cell from the gradebook (``Grade.auto_score``), and
  the written answers' points and how many still await a TA;
* each hidden test's status, points and message from the cell's output
  (:func:`results_from_outputs`); where every hidden test passed, the output names the
  tests but not their points, so each gets an equal share of the cell's points;
* what the notebook recorded for the written answers that quote numbers, from those
  cells' metadata (``printed.CELL_KEY``), as ``Report.printed``;
* a notebook in ``submitted/`` that the gradebook does not hold, or whose autograded copy
  is missing (nbgrader could not read or grade it), as a report of outcome ``failed``,
  naming nbgrader's log; a notebook not handed in, which nbgrader keeps as a zero, has
  no report, as with the grader.

nbgrader records no grading time, so the report's timing section says so instead.
"""
from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from ..course import Course, load_course
from ..errors import ConfigurationError, IntakeError
from ..intake import collect
from ..notebook import UnreadableNotebook, cell_points, is_test_cell, read_notebook
from ..paths import ASSIGNMENT
from ..printed import CELL_KEY, Printed
from ..report import Report, TestResult
from .results import ClassResults

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# nbgrader.plugin.feedback_lines: "<STATUS padded to 9> <points>/<max>  <test name>", then the message indented.
TEST_LINE = re.compile(r"^([A-Z]+) +([0-9.e+-]+)/([0-9.e+-]+)  (.+)$")
PASSED_LINE = re.compile(r"^  passed  (.+)$")
NOT_GRADED = re.compile(r"this cell was not graded \((.*)\)$", re.S)
STATUS_NAMES = {"PASSED", "FAILED", "ERROR", "TIMEOUT", "FORBIDDEN", "MISSING"}


def results_from_outputs(grade_id: str, outputs: list, max_points: float) -> tuple[list[TestResult], str | None]:
    """The hidden tests of one autograded test cell, read back from its output, and why it was
    not graded (None when it was)."""
    tests: list[TestResult] = []
    for output in outputs:
        kind = output.get("output_type")
        if kind == "stream":
            names = [m.group(1) for line in str(output.get("text", "")).splitlines()
                     if (m := PASSED_LINE.match(line))]
            share = round(max_points / len(names), 4) if names else 0.0
            tests += [TestResult(grade_id, name, "passed", share, share, "") for name in names]
        elif kind == "error" and output.get("ename") == "NotGraded":
            found = NOT_GRADED.search(str(output.get("evalue", "")))
            return [], found.group(1) if found else str(output.get("evalue", ""))
        elif kind == "error":
            for entry in output.get("traceback", [])[1:]:
                lines = ANSI.sub("", str(entry)).splitlines()
                match = TEST_LINE.match(lines[0]) if lines else None
                if match is None or match.group(1) not in STATUS_NAMES:
                    continue  # nbgrader's own "output truncated" line, or anything it added
                status, points, most, name = match.groups()
                message = " ".join(line.strip() for line in lines[1:])
                tests.append(TestResult(grade_id, name, status.lower(), float(points), float(most), message))
    return tests, None


def _course_id(database: Path, assignment: str) -> str:
    """The course of ``assignment`` in a gradebook, read without writing to it (nbgrader's
    ``Gradebook`` adds the course it is given when the database lacks it)."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        ids = [row[0] for row in connection.execute("SELECT course_id FROM assignment WHERE name = ?", (assignment,))]
    except sqlite3.DatabaseError as err:
        raise ConfigurationError(f"{database} is not an nbgrader gradebook ({err})") from None
    finally:
        connection.close()
    if len(ids) != 1:
        raise ConfigurationError(f"{database} has no assignment '{assignment}': run nbgrader generate_assignment "
                                 f"{assignment} and nbgrader autograde {assignment} first" if not ids else
                                 f"{database} has '{assignment}' in {len(ids)} courses; the report reads one")
    return ids[0]


def load_gradebook(course_root: Path, course: Course | None = None, assignment: str = ASSIGNMENT) -> ClassResults:
    """The class as nbgrader graded it, from ``course_root/gradebook.db`` and ``course_root/autograded/``."""
    from nbgrader.api import Gradebook, MissingEntry

    course = course or load_course()
    root = Path(course_root).resolve()
    database = root / "gradebook.db"
    if not database.is_file():
        raise ConfigurationError(f"no gradebook at {database}: run nbgrader autograde {assignment} in the course root "
                                 "first, or name the course root with --course-root")
    results = ClassResults("nbgrader", str(database), [], course, timing=False)
    graded: set[tuple[str, str]] = set()
    with Gradebook(f"sqlite:///{database}", _course_id(database, assignment)) as gradebook:
        for student in gradebook.students:
            try:
                submission = gradebook.find_submission(assignment, student.id)
            except MissingEntry:
                continue
            for submitted in submission.notebooks:
                stem = submitted.notebook.name
                if not (root / "submitted" / student.id / assignment / f"{stem}.ipynb").is_file():
                    continue  # nbgrader keeps a zero for a notebook not handed in; the grader has no report
                graded.add((student.id, stem))
                report = _report(root, assignment, student.id, stem, submitted, course, results)
                results.reports.append(report)
                results.keys[id(report)] = stem
    _not_autograded(root, assignment, graded, results)
    return results


def _report(root: Path, assignment: str, student: str, stem: str, submitted, course: Course,
            results: ClassResults) -> Report:
    auto = {g.name: float(g.auto_score or 0.0) for g in submitted.grades if g.cell_type == "code"}
    written = [g for g in submitted.grades if g.cell_type == "markdown"]
    results.written[(student, stem)] = float(sum(g.score or 0.0 for g in written))
    results.ungraded_written += sum(1 for g in written if g.needs_manual_grade)
    max_score = course.notebook(stem).auto_points if stem in course.stems else float(submitted.max_code_score or 0)
    path = root / "autograded" / student / assignment / f"{stem}.ipynb"
    try:
        notebook = read_notebook(path)
    except UnreadableNotebook as err:
        return Report.problem(student, f"{stem}.ipynb", f"nbgrader autograde left no readable autograded notebook "
                              f"(see its log): {err}", outcome="failed")
    report = Report(student, f"{stem}.ipynb", score=round(sum(auto.values()), 4), max_score=max_score,
                    sandbox="nbgrader")
    beside = [cell["metadata"][CELL_KEY] for cell in notebook.cells if cell.get("cell_type") == "markdown"
              and isinstance(cell.get("metadata"), dict) and CELL_KEY in cell["metadata"]]
    try:
        report.printed = Printed.from_beside(beside)
    except ValueError as err:
        results.warnings.append(f"{student}/{stem}: what the notebook recorded is unreadable ({err})")
    for cell in notebook.cells:
        if not is_test_cell(cell):
            continue
        grade_id, max_points = cell_points(cell)
        tests, why_not = results_from_outputs(grade_id, cell.get("outputs", []), max_points)
        if why_not is not None:
            tests = [TestResult(grade_id, "(not graded)", "missing", 0.0, max_points, why_not)]
            if why_not not in report.warnings:
                report.warnings.append(why_not)
        report.tests += tests
    if report.tests and not report.warnings and all(t.status == "missing" for t in report.tests):
        # Nothing graded: the grader's report said why in each test (an unreadable notebook, say), as
        # its warnings do on the grader's path.
        report.warnings = sorted({t.message for t in report.tests})
    return report.bounded()


def _not_autograded(root: Path, assignment: str, graded: set[tuple[str, str]], results: ClassResults) -> None:
    """A report of outcome ``failed`` for each submitted notebook that nbgrader did not put in its gradebook."""
    submitted = root / "submitted"
    if not submitted.is_dir():
        return
    try:
        found = collect([submitted])
    except (ConfigurationError, IntakeError) as err:
        results.warnings.append(f"cannot list {submitted}: {err}")
        return
    for sub in found:
        stem = Path(sub.name).stem
        if sub.path is None or stem not in results.course.stems or (sub.student, stem) in graded:
            continue
        report = Report.problem(sub.student, sub.name, f"{sub.name} is in submitted/ but not in the gradebook: "
                                f"nbgrader autograde could not grade it (see its log), or has not run since it "
                                f"was submitted", outcome="failed")
        results.reports.append(report)
        results.keys[id(report)] = stem
