"""What a TA sees in nbgrader's lifecycle: the autograde log, the autograded test cells
(the formgrader's view), the feedback HTML, the exported CSV, and the sample students'
written answers.

The tests marked slow run nbgrader itself on a scratch course of three students:
Alice's full solution, Carol's half-correct notebook, and Pat, who edited a locked
test cell and whose clm_loss fails one hidden test (3 of 4 points).
"""
from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_output

from autograder.course import load_course
from autograder.nbgrader.export import NotebookScoresExport, notebook_columns
from autograder.nbgrader.feedback_math import latex_to_mathml
from autograder.nbgrader.plugin import cell_outputs
from autograder.notebook import SOLUTION_REGION, solution_regions
from autograder.paths import REPO, venv_env
from autograder.printed import CELL_KEY
from autograder.pytest_plugin import suite_modules
from autograder.report import TestResult
from week6_helpers.reference import MEASURES_MIME, student_seed

SAMPLES = REPO / "data" / "sample_submissions"
SOLUTIONS = REPO / "solutions" / "week6"
STEM = "part_b_bert_gpt"
B1_TARGETS = "B1 masking: targets per sentence"
HIDDEN_REGION = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)
ANY_MARKER = re.compile(r"(BEGIN|END) (HIDDEN TESTS|SOLUTION)")
CODE_MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION", re.M)


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def cell_named(notebook, name: str):
    return next(c for c in notebook.cells if grade_id(c) == name)


# ============================================================== LaTeX to MathML (fast)
@pytest.mark.parametrize("markdown", [
    "It costs $5 and $10, or $20.",           # dollar amounts
    "From $5-$10 a month.",                   # a closing $ followed by a digit is no closing $
    "An escaped \\$x\\$ stays text.",
    "Code `$x$` and ``a $b$ c`` stay code.",
    "```python\nprice = f\"${x}$\"\n```",    # a fenced code block
    "$ x $ has spaces inside its dollars.",
    "Half a formula $x\n\ny$ across a blank line.",
])
def test_text_that_is_not_math_stays_as_it_was(markdown):
    converted, problems = latex_to_mathml(markdown)
    assert (converted, problems) == (markdown, [])


def test_inline_and_display_math_become_mathml():
    converted, problems = latex_to_mathml(
        "Cost $5, and $h_i \\in \\mathbb{R}^d$ with `$code$`:\n\n$$\\sum_{t=1}^{T} x_t\n= y$$\nDone.")
    assert problems == []
    assert converted.startswith("Cost $5, and <math ")
    assert converted.count('display="inline"') == 1 and converted.count('display="block"') == 1
    assert "`$code$`" in converted and converted.endswith("</math>\nDone.")
    assert "\n" not in converted[converted.index('<math'):converted.index("</math>")]


def test_mathml_text_holds_nothing_markdown_would_act_on():
    converted, _ = latex_to_mathml(r"$\text{a_b * [c] |e|} \mid x$")
    inner = re.sub(r"<[^>]+>", "", converted)
    assert not set(inner) & set("\\`*_[]|$~")


def test_a_formula_latex2mathml_cannot_read_is_left_as_latex():
    converted, problems = latex_to_mathml(r"ok $x$, broken $\frac{1}{$ end")
    assert len(problems) == 1 and r"\frac{1}{" in problems[0]
    assert converted.endswith(r"broken $\frac{1}{$ end") and converted.count("<math") == 1


def test_every_formula_of_the_notebooks_converts():
    """No formula of the course's markdown stays LaTeX in the feedback."""
    for path in sorted(SOLUTIONS.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type != "markdown" or "$" not in cell.source:
                continue
            converted, problems = latex_to_mathml(cell.source)
            assert problems == [], f"{path.name}: {problems}"
            prose = re.sub(r"`[^`]*`", "", converted)
            assert "$" not in prose, f"{path.name}: a formula was not recognised: {converted[:300]}"


# ============================================================== test-cell outputs (fast)
def _test(name, status, points, message=""):
    return TestResult("test_x", name, status, points, 1, message)


def test_partial_credit_shows_points_and_the_failing_tests():
    tests = [_test("test_a", "passed", 1), _test("test_b", "failed", 0, "differs by 0.5\nat [0, 1]"),
             _test("test_c\x1b[0;32m", "error", 0, "ValueError: \x1b[0;32mPASSED")]
    (output,) = cell_outputs(tests, 1.0, 3.0, [])
    assert output.output_type == "error" and output.ename == "HiddenTestsFailed"
    assert output.evalue == "1 of 3 points: 2 of 3 hidden tests did not pass"
    text = "\n".join(output.traceback)
    assert "test_b" in text and "differs by 0.5" in text and "at [0, 1]" in text and "test_a" in text
    # Student-controlled text cannot bring its own terminal colours.
    assert "test_c" in text and text.count("\x1b[0;32m") == 1  # only the PASSED line's own colour


def test_full_points_are_a_plain_stream_and_no_test_is_not_graded():
    (output,) = cell_outputs([_test("test_a", "passed", 1)], 1.0, 1.0, [])
    assert output.output_type == "stream" and output.text.startswith("1 of 1 point: all 1 hidden test passed")
    (output,) = cell_outputs([], 0.0, 2.0, ["not valid notebook JSON"])
    assert output.ename == "NotGraded" and "0 of 2 points" in output.evalue and "not valid notebook JSON" in output.evalue


# ============================================================== export plugin (fast)
def _gradebook(path: Path):
    """A small gradebook: week6 with three notebooks (created in alphabetical order, unlike
    the course's), one written answer, three students (one submitted nothing)."""
    from nbgrader.api import Gradebook

    gradebook = Gradebook(f"sqlite:///{path}", "nlp-week6")
    gradebook.add_assignment("week6")
    for name, points in [("exercise1_masked_predictions", 3), ("part_a_discovery", 12), ("part_b_bert_gpt", 40)]:
        gradebook.add_notebook(name, "week6")
        gradebook.add_grade_cell(f"test_{name}", name, "week6", max_score=points, cell_type="code")
    gradebook.add_grade_cell("a1_written", "part_a_discovery", "week6", max_score=2, cell_type="markdown")
    gradebook.add_student("alice", first_name="Alice", last_name="Smith, Jr.", email="alice@example.org")
    gradebook.add_student("mallory", first_name="=HYPERLINK(\"http://x\")", last_name="M")
    gradebook.add_student("zed")
    for student, scores in [("alice", {"exercise1_masked_predictions": 3, "part_a_discovery": 10,
                                       "part_b_bert_gpt": 40, "a1_written": 1.5}),
                            ("mallory", {"exercise1_masked_predictions": 0, "part_a_discovery": 2,
                                         "part_b_bert_gpt": 21, "a1_written": 0})]:
        gradebook.add_submission("week6", student)
        for cell, score in scores.items():
            notebook = "part_a_discovery" if cell == "a1_written" else cell
            cell = cell if cell == "a1_written" else f"test_{cell}"
            grade = gradebook.find_grade(cell, notebook, "week6", student)
            grade.auto_score = score
    gradebook.db.commit()
    return gradebook


def test_export_adds_a_score_per_notebook_in_the_course_order(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", venv_env()["PATH"])  # nbgrader sets up a gradebook with the alembic command
    out = tmp_path / "grades.csv"
    with _gradebook(tmp_path / "gradebook.db") as gradebook:
        NotebookScoresExport(to=str(out)).export(gradebook)
    with out.open(newline="") as handle:
        rows = list(csv.reader(handle))
    header, body = rows[0], {row[3]: dict(zip(rows[0], row)) for row in rows[1:]}
    assert header == ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
                      "raw_score", "late_submission_penalty", "score", "max_score",
                      "part_a_discovery_score", "part_a_discovery_max_score",
                      "part_b_bert_gpt_score", "part_b_bert_gpt_max_score",
                      "exercise1_masked_predictions_score", "exercise1_masked_predictions_max_score"]
    alice = body["alice"]
    assert alice["last_name"] == "Smith, Jr." and float(alice["score"]) == 54.5 and float(alice["max_score"]) == 57
    assert [float(alice[k]) for k in ("part_a_discovery_score", "part_a_discovery_max_score", "part_b_bert_gpt_score",
                                      "exercise1_masked_predictions_score")] == [11.5, 14, 40, 3]
    assert body["mallory"]["first_name"].startswith("'="), "a name must not run as a spreadsheet formula"
    zed = body["zed"]  # nothing submitted: zeros, as nbgrader's own columns
    assert zed["timestamp"] == "" and float(zed["score"]) == 0 and float(zed["part_b_bert_gpt_score"]) == 0
    assert float(zed["part_b_bert_gpt_max_score"]) == 40


def test_export_follows_the_course_order():
    """The columns follow the course model's order (the handout's too), unknown notebooks last by name."""
    stems = load_course().stems
    assert notebook_columns(set(stems)) == stems
    assert notebook_columns({"zz_extra", stems[-1], "aa_extra", stems[0]}) == [stems[0], stems[-1], "aa_extra",
                                                                                "zz_extra"]


# ============================================================== sample written answers (fast)
def _words(text: str, n: int = 8) -> set[tuple[str, ...]]:
    """Runs of ``n`` words (numbers left out: students quote the same measurements)."""
    words = re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower())
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


def test_sample_written_answers_are_the_students_own_words():
    """No sample quotes a model answer or rubric of solutions/, nor a solution marker."""
    checked = 0
    for path in sorted(SAMPLES.glob("*/week6/*.ipynb")):
        try:
            notebook = nbformat.read(path, as_version=4)
        except Exception:  # erin's notebook is broken JSON on purpose
            continue
        source = nbformat.read(SOLUTIONS / path.name, as_version=4)
        outside = set().union(*(_words(SOLUTION_REGION.sub("", c.source)) for c in source.cells))
        model = {grade_id(c): "".join(solution_regions(c.source)) for c in source.cells}
        for cell in notebook.cells:
            if not isinstance(cell.get("metadata", {}).get("nbgrader"), dict):
                continue
            where = f"{path.relative_to(SAMPLES)} {grade_id(cell)}"
            if cell.cell_type == "code":
                assert not CODE_MARKER.search(cell.source), f"{where}: a solution marker"
                continue
            if not (cell.metadata["nbgrader"].get("solution") and grade_id(cell) in model):
                continue
            checked += 1
            assert not ANY_MARKER.search(cell.source), f"{where}: a solution marker"
            assert not re.search(r"\b(model answer|rubric)\b", cell.source, re.I), f"{where}: model answer or rubric"
            copied = (_words(cell.source) & _words(model[grade_id(cell)])) - outside
            assert not copied, f"{where} quotes the model answer: {[' '.join(w) for w in copied][:3]}"
    assert checked >= 26 + 5, "at least Alice's 26 written answers and Carol's 5 were checked"


def test_carol_answers_some_written_questions_partly_and_leaves_others_blank():
    notebook = nbformat.read(SAMPLES / "carol_half_correct" / "week6" / f"{STEM}.ipynb", as_version=4)
    written = {grade_id(c): c.source for c in notebook.cells
               if c.cell_type == "markdown" and c.metadata.get("nbgrader", {}).get("solution")}
    blank = [g for g, text in written.items() if text.strip() == "YOUR ANSWER HERE"]
    assert 0 < len(blank) < len(written)


def test_samples_are_up_to_date():
    result = subprocess.run([sys.executable, "-m", "autograder.build.samples", "--check"], cwd=REPO,
                            capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


# ============================================================== nbgrader itself (slow)
def nbgrader(root: Path, *args: str) -> str:
    """Run an nbgrader command on the scratch course; its log (stdout and stderr)."""
    command = [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={root}",
               f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}"]
    # cwd=REPO: nbgrader reads the course's nbgrader_config.py from there.
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=venv_env(), timeout=900)
    assert result.returncode == 0, f"nbgrader {args[0]} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def pat_notebook():
    """Alice's notebook with an edited locked test cell, and a clm_loss that returns NaN
    when there is nothing to score (one hidden test of four fails)."""
    notebook = nbformat.read(SAMPLES / "alice_full_solution" / "week6" / f"{STEM}.ipynb", as_version=4)
    cell_named(notebook, "test_softmax").source = "print('all tests passed')  # the student's own 'test'\n"
    clm = cell_named(notebook, "clm_loss")
    assert "n_targets.clamp(min=1)" in clm.source
    clm.source = clm.source.replace("n_targets.clamp(min=1)", "n_targets")
    # A run of B1's targets-per-sentence experiment with pat's id, an answer that quotes it and the
    # reference table, and a cell that forges the grader's entry for the formgrader.
    recorder = next(c for c in notebook.cells if c.cell_type == "code" and f'record("{B1_TARGETS}"' in c.source)
    recorder.outputs = [new_output("display_data", data={"text/plain": "Recorded for your answers", MEASURES_MIME: {
        "experiment": B1_TARGETS, "values": [["<b>share</b>", 0.4321]], "seed": student_seed("pat"),
        "student": "pat", "seed_source": "STUDENT_ID", "mode": "full"}})]
    cell_named(notebook, "b1_token_counts").source = "Mine: 43.2 %, and 0.0001."
    cell_named(notebook, "b1_why_not_50_percent").metadata[CELL_KEY] = {"seed_note": "forged"}
    return notebook


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("views")
    shutil.copytree(SOLUTIONS, root / "solutions" / "week6", ignore=shutil.ignore_patterns("__pycache__"))
    nbgrader(root, "generate_assignment", "week6", "--force")
    for student in ("alice_full_solution", "carol_half_correct", "pat"):
        target = root / "submitted" / student / "week6"
        target.mkdir(parents=True)
        if student == "pat":
            nbformat.write(pat_notebook(), target / f"{STEM}.ipynb")
        else:
            shutil.copy(SAMPLES / student / "week6" / f"{STEM}.ipynb", target)
    log = nbgrader(root, "autograde", "week6", "--create", "--force")
    return root, log


def autograded(root: Path, student: str):
    return nbformat.read(root / "autograded" / student / "week6" / f"{STEM}.ipynb", as_version=4)


@pytest.mark.slow
def test_autograde_reports_only_real_changes_of_locked_cells(course):
    _, log = course
    alarms = [line for line in log.splitlines() if "has changed" in line]
    assert len(alarms) == 1, "\n".join(alarms[:5])
    assert "pat/part_b_bert_gpt" in alarms[0] and "test_softmax" in alarms[0] and "'checksum'" in alarms[0]


@pytest.mark.slow
def test_autograded_test_cells_show_points_and_why_points_were_lost(course, repo_root):
    root, _ = course
    notebook = autograded(root, "carol_half_correct")
    hidden_code = HIDDEN_REGION.sub("", "\n".join(path.read_text() for path in suite_modules(STEM)))
    hidden_lines = [line.strip() for line in hidden_code.splitlines() if len(line.strip()) > 30
                    and not line.strip().startswith(("#", '"', "'", "@", "def ", "from ", "import "))]
    for cell in notebook.cells:
        if not (cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade")):
            continue
        assert len(cell.outputs) == 1, f"{grade_id(cell)}: {cell.outputs}"
        assert cell.outputs[0].output_type in ("stream", "error"), "no stray Out[ ] box"
        shown = json.dumps(cell.outputs)
        assert not [line for line in hidden_lines if line in shown], f"{grade_id(cell)} shows hidden test code"

    (failed,) = cell_named(notebook, "test_clm_loss").outputs
    assert failed.output_type == "error" and failed.ename == "HiddenTestsFailed"
    assert failed.evalue == "0 of 4 points: 4 of 4 hidden tests did not pass"
    traceback = "\n".join(failed.traceback)
    assert "test_clm_loss_matches_reference" in traceback and "differs from the expected values" in traceback
    (passed,) = cell_named(notebook, "test_softmax").outputs
    assert passed.output_type == "stream" and passed.text.startswith("3 of 3 points: all 3 hidden tests passed")
    (stub,) = cell_named(notebook, "test_mlm_loss").outputs
    assert "0 of 3 points" in stub.evalue and "NotImplementedError" in "\n".join(stub.traceback)


@pytest.mark.slow
def test_partial_credit_reaches_the_gradebook(course):
    from nbgrader.api import Gradebook

    root, _ = course
    (output,) = cell_named(autograded(root, "pat"), "test_clm_loss").outputs
    assert output.evalue == "3 of 4 points: 1 of 4 hidden tests did not pass"
    assert "test_clm_loss_with_nothing_to_score_is_zero" in "\n".join(output.traceback)
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "nlp-week6") as gradebook:
        grade = gradebook.find_grade("test_clm_loss", STEM, "week6", "pat")
        assert (grade.auto_score, grade.needs_manual_grade) == (3.0, False)
        notebooks = {s: gradebook.find_submission_notebook(STEM, "week6", s)
                     for s in ("alice_full_solution", "carol_half_correct", "pat")}
        full = load_course().notebook(STEM).auto_points
        assert {s: nb.code_score for s, nb in notebooks.items()} == {
            "alice_full_solution": full, "carol_half_correct": 27, "pat": full - 1}


@pytest.mark.slow
def test_feedback_renders_math_without_a_network(course):
    root, _ = course
    nbgrader(root, "generate_feedback", "week6", "--force")
    html = (root / "feedback" / "pat" / "week6" / f"{STEM}.html").read_text()
    assert html.count("<math") > 20
    # B1's binomial "$P(k) = \binom{n}{k}\,0.15^k\,0.85^{n-k}$", and Pat's own derivation.
    assert "<msup><mn>0.15</mn><mi>k</mi></msup>" in html and "onehot" in html
    assert "\\binom{n}" not in html and "\\frac{\\partial" not in html
    assert not re.search(r"<script[^>]*\bsrc=", html), "the feedback loads no script"
    assert "cdn.jsdelivr" not in html and "cdnjs" not in html
    assert "MathJax.Hub" not in html and not re.search(r"mathjax[^\s\"']*\.js", html, re.I)


@pytest.mark.slow
def test_export_through_nbgrader_has_notebook_columns(course):
    root, _ = course
    out = root / "grades.csv"
    nbgrader(root, "export", f"--to={out}")
    with out.open(newline="") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    notebook = load_course().notebook(STEM)  # pat loses one hidden test of clm_loss; no answer is graded yet
    assert float(rows["pat"]["part_b_bert_gpt_score"]) == notebook.auto_points - 1
    assert float(rows["pat"]["part_b_bert_gpt_max_score"]) == notebook.points
    assert float(rows["carol_half_correct"]["part_a_discovery_score"]) == 0
    assert list(rows["pat"])[11::2] == [f"{name}_score" for name in load_course().stems]


@pytest.mark.slow
def test_the_formgrader_shows_the_staff_detail_and_the_feedback_leaves_it_out(course):
    """The staff's detail of a failure (the reference's values) is in the autograded notebook the
    formgrader shows, and not in the feedback HTML that students receive."""
    from autograder.nbgrader.feedback_detail import is_staff_only

    root, _ = course
    staff = [entry for cell in autograded(root, "carol_half_correct").cells if cell.cell_type == "code"
             for output in cell.get("outputs", []) if output.output_type == "error"
             for entry in output.traceback if is_staff_only(entry)]
    expected = sorted({m.group(0) for entry in staff for m in re.finditer(r"expected -?\d+\.\d{3,}", entry)})
    assert staff and expected, "the failed checks of Carol's notebook keep what they compared for the TA"
    nbgrader(root, "generate_feedback", "week6", "--force")
    html = (root / "feedback" / "carol_half_correct" / "week6" / f"{STEM}.html").read_text()
    assert "differs from the expected values" in html, "the students' messages are in the feedback"
    assert "For the course staff" not in html
    assert not [text for text in expected if text in html], "the feedback quotes the reference's values"


@pytest.mark.slow
def test_the_formgrader_gets_what_the_notebook_recorded_beside_the_answer_that_quotes_it(course):
    root, _ = course
    cells = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in autograded(root, "pat").cells}
    beside = cells["b1_token_counts"].metadata[CELL_KEY]
    assert beside["seed_note"] == "" and beside["recorded"] == {B1_TARGETS: [["<b>share</b>", 0.4321]]}
    assert [(n["text"], n["match"]) for n in beside["numbers"]] == [("43.2 %", "recorded"), ("0.0001", "none")]
    assert CELL_KEY not in cells["b1_why_not_50_percent"].metadata, "a submitted cell cannot forge the entry"
    alice = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell for cell in autograded(root, "alice_full_solution").cells}
    assert "no recorded values" in alice["b1_token_counts"].metadata[CELL_KEY]["seed_note"]
