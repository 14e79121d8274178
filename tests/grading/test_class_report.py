"""The class report: its figures, its problems and grading time, its page, and the nbgrader path.

The figures are checked on a class of reports built with ``Report`` (scores chosen so that
each figure has a value worked out by hand below); the page is checked for being one
self-contained file that shows student text as text. The slow tests grade real
submissions: through ``python -m autograder grade`` then ``report``, and through
``nbgrader autograde`` then ``report --nbgrader``, which must give the same figures.
"""
from __future__ import annotations

import csv
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.analytics import class_report, statistics
from autograder.analytics.nbgrader_results import results_from_outputs
from autograder.analytics.results import load_grades
from autograder.course import load_course
from autograder.grade_history import write_report
from autograder.nbgrader.plugin import cell_outputs
from autograder.paths import REPO, venv_env
from autograder.report import Report, TestResult

SAMPLES = REPO / "data" / "sample_submissions"
STEM = "part_a_discovery"
ITEMS = {item.grade_id: item.points for item in load_course().notebook(STEM).tests}
# test cell -> points per student s1..s6 (strong students first). sequence_logprob: the strong
# half earns it all; top_k_next_tokens: only the weak half does; spanish_reuse: everyone.
POINTS = {
    "test_spanish_reuse": [2, 2, 2, 2, 2, 2],
    "test_sequence_logprob": [3, 3, 3, 0, 0, 0],
    "test_top_k_next_tokens": [0, 0, 0, 2, 2, 2],
    "test_task_categories": [2, 2, 2, 1, 0, 0],
    "test_pretraining_costs": [3, 3, 2, 1, 1, 0],
}
STUDENTS = [f"s{i}" for i in range(1, 7)]


def report_of(student: str, points: dict[str, float], *, messages: dict[str, str] | None = None,
              statuses: dict[str, str] | None = None, duration: float = 1.0, **fields) -> Report:
    """A part_a_discovery report: one hidden test per point of each item, the first ``points`` of them passed."""
    tests = []
    for grade_id, earned in points.items():
        for i in range(int(ITEMS[grade_id])):
            passed = i < earned
            status = "passed" if passed else (statuses or {}).get(grade_id, "failed")
            message = "" if passed else (messages or {}).get(grade_id, "differs from the expected values")
            tests.append(TestResult(grade_id, f"{grade_id}_case{i}", status, float(passed), 1.0, message))
    return Report(student, f"{STEM}.ipynb", score=float(sum(points.values())), max_score=12.0, sandbox="bwrap",
                  duration_s=duration, tests=tests, **fields)


@pytest.fixture
def grades(tmp_path) -> Path:
    out = tmp_path / "grades"
    costs = {"s3": "differs from the expected values by up to 0.5",
             "s4": "differs from the expected values by up to 12",
             "s5": "differs from the expected values by up to 1.25", "s6": "your code raised ZeroDivisionError"}
    for index, student in enumerate(STUDENTS):
        points = {grade_id: values[index] for grade_id, values in POINTS.items()}
        message = {"test_pretraining_costs": costs[student]} if student in costs else None
        write_report(out, student, STEM, report_of(student, points, messages=message, duration=float(index + 1)))
    return out


def test_scores_summary_matches_a_hand_count(grades):
    results = load_grades(grades)
    notebooks, total = statistics.notebook_figures(results)
    part_a = next(n for n in notebooks if n.stem == STEM)
    assert sorted(part_a.scores) == [4, 5, 6, 9, 10, 10]
    s = part_a.summary
    # numpy's default quartiles interpolate between order statistics: Q1 at position 1.25, Q3 at 3.75 (from 0).
    assert (s.n, s.median, s.q1, s.q3, s.minimum, s.maximum) == (6, 7.5, 5.25, 9.75, 4, 10)
    assert s.mean == pytest.approx(44 / 6)
    assert total.summary.mean == pytest.approx(44 / 6) and total.max_points == load_course().auto_points
    other = next(n for n in notebooks if n.stem == "part_b_bert_gpt")
    assert (other.handed_in, other.summary) == (0, None)


def point_biserial(passed: list[int], rest: list[float]) -> float:
    """The textbook formula: (M1 - M0) / s * sqrt(p q), s the standard deviation of all (population)."""
    ones = [r for p, r in zip(passed, rest) if p]
    zeros = [r for p, r in zip(passed, rest) if not p]
    mean = sum(rest) / len(rest)
    deviation = math.sqrt(sum((r - mean) ** 2 for r in rest) / len(rest))
    share = len(ones) / len(rest)
    return (sum(ones) / len(ones) - sum(zeros) / len(zeros)) / deviation * math.sqrt(share * (1 - share))


def test_item_figures(grades):
    items = {f.grade_id: f for f in statistics.item_figures(load_grades(grades))}
    totals = [sum(values[i] for values in POINTS.values()) for i in range(6)]
    sequence = items["test_sequence_logprob"]
    assert (sequence.function, sequence.n, sequence.share_full, sequence.points_lost, sequence.difficulty) == (
        "sequence_logprob", 6, 0.5, 9.0, 0.5)
    rest = [t - p for t, p in zip(totals, POINTS["test_sequence_logprob"])]
    assert sequence.discrimination == pytest.approx(point_biserial([1, 1, 1, 0, 0, 0], rest))
    assert sequence.discrimination > 0.7, "the strong students earn it"
    assert items["test_top_k_next_tokens"].discrimination < -0.9, "only the weak students earn it"
    assert items["test_spanish_reuse"].discrimination is None, "everyone earned it: nothing to correlate"
    costs = items["test_pretraining_costs"]
    assert (costs.share_full, costs.points_lost) == (pytest.approx(2 / 6), 8.0)


def test_hidden_test_figures_group_failure_messages(grades):
    tests = {f.test: f for f in statistics.hidden_test_figures(load_grades(grades))}
    first = tests["test_pretraining_costs_case0"]   # failed by s6 only
    assert (first.n, first.passed, first.points_lost) == (6, 5, 1.0)
    last = tests["test_pretraining_costs_case2"]    # failed by s3 (0.5), s4 (12), s5 (1.25) and s6 (an exception)
    assert last.share_passed == pytest.approx(2 / 6)
    groups = last.top_failures()
    assert [(status, count) for status, _, count in groups] == [("failed", 3), ("failed", 1)]
    assert groups[0][1] == "differs from the expected values by up to 0.5", "an example of the group is shown"
    assert "ZeroDivisionError" in groups[1][1]


def test_problems_name_each_kind_with_its_reason(tmp_path):
    out = tmp_path / "grades"
    full = {grade_id: ITEMS[grade_id] for grade_id in ITEMS}
    write_report(out, "ann", STEM, report_of("ann", {**full, "test_task_categories": 0},
                                             statuses={"test_task_categories": "timeout"},
                                             messages={"test_task_categories": "your code did not finish"}))
    write_report(out, "bea", STEM, report_of("bea", {**full, "test_top_k_next_tokens": 0},
                                             statuses={"test_top_k_next_tokens": "forbidden"},
                                             messages={"test_top_k_next_tokens": "'top_k_next_tokens' uses topk"}))
    write_report(out, "cal", "misplaced-abc", Report.problem("cal", "old/part_a_discovery.ipynb", "in a sub-folder"))
    write_report(out, "dan", STEM, Report.problem("dan", f"{STEM}.ipynb", "the grading process was killed",
                                                  outcome="failed"))
    write_report(out, "eve", STEM, Report("eve", f"{STEM}.ipynb", max_score=12, warnings=["not valid notebook JSON"],
                                          tests=[TestResult("test_spanish_reuse", "t", "missing", 0, 2, "x")]))
    results = load_grades(out)
    found = {(p.student, p.kind): p.reason for p in statistics.problems(results)}
    assert set(found) == {("ann", "timed out"), ("bea", "forbidden shortcut"), ("cal", "not taken in"),
                          ("dan", "grader failed"), ("eve", "not readable")}
    assert found[("ann", "timed out")] == "task_categories: your code did not finish"
    assert found[("dan", "grader failed")] == "the grading process was killed"
    notebooks, total = statistics.notebook_figures(results)
    part_a = next(n for n in notebooks if n.stem == STEM)
    assert (part_a.handed_in, part_a.not_graded, len(part_a.scores)) == (4, 1, 3), \
        "cal's misplaced file is no notebook; dan's unfinished grading is no grade"


def test_grading_time_per_notebook(grades):
    (timing,) = statistics.timings(load_grades(grades))
    assert (timing.stem, timing.n, timing.median_s, timing.slowest_s, timing.slowest_student) == (
        STEM, 6, 3.5, 6.0, "s6")


# --------------------------------------------------------------------- the page
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_the_page_is_one_self_contained_file_that_shows_student_text_as_text(grades):
    hostile = grades / HOSTILE.replace("/", "")  # a folder name can hold anything but '/'
    student = hostile.name
    report = report_of(student, {g: 0 for g in ITEMS}, messages={g: f"your code raised {HOSTILE}" for g in ITEMS},
                       warnings=[HOSTILE])
    write_report(grades, student, STEM, report)
    page = class_report.write(load_grades(grades), class_report.Extras(), grades).read_text()
    assert "<script" not in page.lower() and "onerror=" not in page.replace("onerror=alert(1)&gt;", "")
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page, "shown, escaped"
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page), "nothing is loaded"
    images = re.findall(r'<img src="([^"]+)"', page)
    assert len(images) == page.count("<img") == 9, "the histograms are the only images"
    assert all(src.startswith("data:image/svg+xml;base64,") for src in images)
    for section in ("scores", "items", "tests", "problems", "timing", "similarity", "history"):
        assert f'id="{section}"' in page


def test_the_page_lists_grade_changes(grades):
    points = {grade_id: values[0] for grade_id, values in POINTS.items()}
    write_report(grades, "s1", STEM, report_of("s1", {**points, "test_top_k_next_tokens": 2},
                                               submission_sha256="b" * 64))
    path, _, extras = class_report.build(grades, similarity=False)
    (change,) = extras.changes
    assert (change.student, change.cause, change.old_score, change.new_score) == ("s1", "submission", 10, 12)
    page = path.read_text()
    history = page[page.index('id="history"'):]
    assert "submission" in history and ">10<" in history and ">12<" in history


def test_a_student_folder_named_like_the_page_is_refused_by_intake():
    from autograder.intake import student_problem

    assert "class report" in student_problem("class-report.html")
    assert student_problem("similarity.csv") and student_problem("canvas-grades.csv")


# --------------------------------------------------------------------- real runs
def run(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, env=venv_env(),
                            timeout=900)
    assert result.returncode == 0, f"{args}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


# Alice's sequence_logprob body, retyped: other names and comments, two independent lines swapped.
MALLORY_SEQUENCE_LOGPROB = """
    # my own work
    lp = logits.float().log_softmax(dim = -1)
    tgt = token_ids[1:].to(logits.device)
    rows = lp[:-1]
    chosen = rows[torch.arange(len(tgt), device = logits.device), tgt]
    return chosen.sum()
"""


def disguised_class(root: Path) -> Path:
    """Alice and Bob (the untouched release) as handed in, and Mallory: Alice's notebook, sequence_logprob retyped."""
    for student in ("alice_full_solution", "bob_untouched_release"):
        (root / student / "week6").mkdir(parents=True)
        shutil.copy(SAMPLES / student / "week6" / f"{STEM}.ipynb", root / student / "week6")
    notebook = nbformat.read(SAMPLES / "alice_full_solution" / "week6" / f"{STEM}.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "sequence_logprob")
    body = cell.source.split('"""')[-1]
    cell.source = cell.source[: len(cell.source) - len(body)] + MALLORY_SEQUENCE_LOGPROB
    (root / "mallory" / "week6").mkdir(parents=True)
    nbformat.write(notebook, root / "mallory" / "week6" / f"{STEM}.ipynb")
    return root


@pytest.mark.slow
def test_grade_then_report_finds_the_copy_where_grade_found_the_files(tmp_path):
    submitted, out = disguised_class(tmp_path / "submitted"), tmp_path / "grades"
    run("autograder", "grade", str(submitted), "--out", str(out), "--device", "cpu")
    result = run("autograder", "report", str(out))
    assert "class report:" in result.stdout
    page = (out / "class-report.html").read_text()
    assert "mallory" in page and "sequence_logprob" in page
    rows = (out / "similarity.csv").read_text().splitlines()
    assert rows[0] == "student_a,student_b,notebook,item,score"
    top = [r for r in rows[1:] if ",sequence_logprob," in r][0].split(",")
    assert {top[0], top[1]} >= {"mallory"} and float(top[4]) >= 0.75
    scores = [float(r.split(",")[4]) for r in rows[1:]]
    assert scores == sorted(scores, reverse=True)


def test_outputs_of_the_nbgrader_plugin_read_back_as_the_tests_they_show():
    tests = [TestResult("test_x", "test_a[cpu]", "failed", 0.5, 1.0, "differs by up to 3\nsecond line"),
             TestResult("test_x", "test_b", "timeout", 0.0, 2.0, "your code did not finish"),
             TestResult("test_x", "test_c", "passed", 1.0, 1.0, "")]
    outputs = cell_outputs(tests, 1.5, 4.0, [])
    back, why_not = results_from_outputs("test_x", [dict(o) for o in outputs], 4.0)
    assert why_not is None
    assert [(t.test, t.status, t.points, t.max_points) for t in back] == [
        (t.test, t.status, t.points, t.max_points) for t in tests]
    assert back[0].message == "differs by up to 3 second line"
    passed = cell_outputs(tests[2:], 1.0, 1.0, [])
    assert [(t.test, t.status) for t in results_from_outputs("test_x", [dict(o) for o in passed], 1.0)[0]] == [
        ("test_c", "passed")]
    not_graded = cell_outputs([], 0.0, 4.0, ["the solution cell 'x' is missing"])
    assert results_from_outputs("test_x", [dict(o) for o in not_graded], 4.0) == (
        [], "the solution cell 'x' is missing")


@pytest.mark.slow
def test_nbgrader_path_gives_the_same_figures(tmp_path):
    """The same submissions graded by nbgrader autograde and by grade: the same items, tests and failures."""
    root = tmp_path / "course"
    shutil.copytree(REPO / "solutions" / "week6", root / "solutions" / "week6",
                    ignore=shutil.ignore_patterns("__pycache__"))
    disguised_class(root / "submitted")
    flags = [f"--CourseDirectory.root={root}", f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}"]
    run("nbgrader", "generate_assignment", "week6", "--force", *flags)
    # A notebook nbgrader cannot read is reported, not silently dropped.
    (root / "submitted" / "erin" / "week6").mkdir(parents=True)
    shutil.copy(SAMPLES / "erin_invalid_json" / "week6" / "part_b_bert_gpt.ipynb",
                root / "submitted" / "erin" / "week6")
    subprocess.run([sys.executable, "-m", "nbgrader", "autograde", "week6", "--create", "--force", *flags], cwd=REPO,
                   capture_output=True, text=True, env=venv_env(), timeout=900)
    out = tmp_path / "from-nbgrader"
    run("autograder", "report", str(out), "--nbgrader", "--course-root", str(root))
    page = (out / "class-report.html").read_text()
    assert "nbgrader&#39;s gradebook" in page or "nbgrader's gradebook" in page
    assert "does not record how long grading took" in page
    assert "erin" in page[page.index('id="problems"'):page.index('id="timing"')]

    graded = tmp_path / "graded"
    shutil.rmtree(root / "submitted" / "erin")
    run("autograder", "grade", str(root / "submitted"), "--out", str(graded), "--device", "cpu")
    from autograder.analytics.nbgrader_results import load_gradebook

    via_nbgrader, via_grade = load_gradebook(root), load_grades(graded)
    for figures in (statistics.item_figures, statistics.hidden_test_figures):
        ours = [(f.grade_id, f.n, f.share_full if hasattr(f, "share_full") else f.share_passed, f.points_lost)
                for f in figures(via_grade)]
        theirs = [(f.grade_id, f.n, f.share_full if hasattr(f, "share_full") else f.share_passed, f.points_lost)
                  for f in figures(via_nbgrader) if f.notebook == STEM]
        assert theirs == ours
    failures = {f.test: [(s, c) for s, _, c in f.top_failures()] for f in statistics.hidden_test_figures(via_grade)}
    assert failures == {f.test: [(s, c) for s, _, c in f.top_failures()]
                        for f in statistics.hidden_test_figures(via_nbgrader) if f.notebook == STEM}
    similar = (out / "similarity.csv").read_text()
    assert ",sequence_logprob," in similar and "mallory" in similar

    # The LMS export from the gradebook: its scores, written answers included (none graded yet here).
    from nbgrader.api import Gradebook

    roster = tmp_path / "roster.csv"
    roster.write_text("student,sis_login_id\nalice_full_solution,a\nbob_untouched_release,b\nmallory,m\nerin,e\n")
    run("autograder", "export", str(out), "--nbgrader", "--course-root", str(root), "--format", "canvas",
        "--map", str(roster))
    with (out / "canvas-grades.csv").open(newline="") as handle:
        rows = list(csv.reader(handle))
    by_login = {row[3]: dict(zip(rows[0], row)) for row in rows[2:]}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "nlp-week6") as gradebook:
        for login, student in (("a", "alice_full_solution"), ("b", "bob_untouched_release"), ("m", "mallory")):
            expected = gradebook.find_submission_notebook(STEM, "week6", student).score
            assert float(by_login[login][f"week6 {STEM}"]) == pytest.approx(expected, abs=0.005)
