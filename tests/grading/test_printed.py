"""What a student's notebook recorded, beside the written answers that quote it (``autograder/printed.py``).

Submissions are the release notebook of Part B's fine-tuning with the record outputs a run of
``week6_helpers.reference.record`` leaves, planted here; the slow test at the end runs a real
notebook as a student (fast mode, the student's id in the environment), grades it, and checks
the staff's recomputation of that run (``benchmarks/reference_values.py --student``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import nbformat
import pytest
from nbformat.v4 import new_output

from autograder.analytics import class_report, statistics
from autograder.analytics.results import load_grades
from autograder.course import CourseError, load_course, read_course
from autograder.grade_history import write_report
from autograder.paths import REPO, venv_env
from autograder.printed import MAX_LABELS, Printed, printed_values, quoted_numbers
from autograder.report import Report, read_report
from week6_helpers.reference import MEASURES_MIME, student_seed

STEM = "part_b_finetuning"
NOTEBOOK = load_course().notebook(STEM)
B3 = "B3 learning rate"
MEASURED = {"dev accuracy before fine-tuning": 0.533, "dev accuracy, lr 3e-5": 0.5671, "dev accuracy, lr 1e-2": 0.4961}


def measures(experiment=B3, values=None, *, seed=None, student="alice", source="STUDENT_ID"):
    values = MEASURED if values is None else values
    data = {"experiment": experiment, "values": [[k, v] for k, v in values.items()],
            "seed": student_seed(student) if seed is None else seed, "student": student, "seed_source": source,
            "mode": "full"}
    return new_output("display_data", data={"text/plain": "Recorded for your answers", MEASURES_MIME: data})


def submission(*outputs, answer="", where=f'record("{B3}"'):
    """The release notebook with ``outputs`` on the cell that records B3 and ``answer`` as b3_large_lr's."""
    nb = nbformat.read(REPO / "assignments" / "week6" / f"{STEM}.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "code" and where in c.source)
    cell.outputs = list(outputs)
    next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "b3_large_lr").source = answer
    return nb


def b3(printed: Printed):
    return printed.answer("b3_large_lr")


# ------------------------------------------------------------------------------ quoted numbers
def test_quoted_numbers_are_decimals_and_percentages_not_counts_or_settings():
    text = "dev accuracy 0.853 (85.3 %), .75, 12% after 1,024 reviews, 3 epochs, lr 3e-5, v1.2, 2.5 and 0.853."
    assert quoted_numbers(text) == ["0.853", "85.3 %", ".75", "12%", "2.5"]


def test_each_quoted_number_is_matched_to_a_recorded_value_or_the_reference_table():
    answer = "3e-5 gave 0.567, 1e-2 gave 49.6 %; before: 0.508, and 1e-4 reached 0.772. Also 0.9999 and 53.3."
    printed = printed_values(submission(measures(), answer=answer), NOTEBOOK, "alice")
    found = {n.text: (n.match, n.label) for n in b3(printed).numbers}
    assert found == {
        "0.567": ("recorded", f"{B3}: dev accuracy, lr 3e-5"),          # cut off at the third decimal
        "49.6 %": ("recorded", f"{B3}: dev accuracy, lr 1e-2"),         # as a percentage
        "0.508": ("reference table", f"{B3}: dev accuracy before fine-tuning"),
        "0.772": ("reference table", f"{B3}: dev accuracy, lr 1e-4"),
        "0.9999": ("none", ""),
        "53.3": ("recorded", f"{B3}: dev accuracy before fine-tuning"),  # a percentage without its sign
    }
    assert list(b3(printed).recorded[B3]) == list(MEASURED), "the values keep the order the notebook recorded"
    assert printed.seed == printed.expected_seed == student_seed("alice") and printed.seed_note == ""
    lora = printed.answer("b6_lora_tradeoffs")
    assert lora.missing == ["B6 LoRA"] and lora.recorded == {}


@pytest.mark.parametrize("outputs, student, note", [
    ((), "alice", "no recorded values"),
    ((measures(),), "bob", "ran with the student id 'alice'"),
    ((measures(student=None, seed=0, source="default"),), "alice", "ran without a student id"),
    ((measures(seed=1, source="WEEK6_SEED"),), "alice", "WEEK6_SEED=1"),
    ((measures(), measures(seed=5)), "alice", "different seeds"),
])
def test_a_run_not_seeded_with_the_students_id_is_said(outputs, student, note):
    printed = printed_values(submission(*outputs), NOTEBOOK, student)
    assert note in printed.seed_note and str(student_seed(student)) in printed.seed_note


def test_the_last_record_of_an_experiment_is_the_one_shown():
    later = {**MEASURED, "dev accuracy, lr 3e-5": 0.6}
    printed = printed_values(submission(measures(), measures(values=later)), NOTEBOOK, "alice")
    assert b3(printed).recorded[B3]["dev accuracy, lr 3e-5"] == 0.6


def test_hostile_records_are_read_within_limits():
    many = {f"label {i}": i / 1000 for i in range(10 * MAX_LABELS)}
    bad = [new_output("display_data", data={MEASURES_MIME: data}) for data in (
        "not an object", {"experiment": B3, "values": {"a dict": 1}}, {"experiment": "made up", "values": [["x", 1]]},
        {"experiment": B3, "values": [["nan", float("nan")], [3, 1], ["ok", True], "x" * 10]})]
    printed = printed_values(submission(*bad, measures(values={"<b>" * 500: 0.5, **many})), NOTEBOOK, "alice")
    values = b3(printed).recorded[B3]
    assert len(values) == MAX_LABELS and max(len(label) for label in values) <= 120
    assert "made up" not in b3(printed).recorded, "only the notebook's own experiments are read"
    only_bad = printed_values(submission(*bad), NOTEBOOK, "alice")
    assert b3(only_bad).recorded == {B3: {}}, "a record whose values are all unusable shows none of them"


def test_the_report_keeps_what_was_printed_and_refuses_a_tampered_entry(tmp_path):
    printed = printed_values(submission(measures(), answer="0.567 and 0.508"), NOTEBOOK, "alice")
    report = Report("alice", f"{STEM}.ipynb", printed=printed)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report.to_json()))
    again = read_report(path)
    assert again.printed.to_json() == printed.to_json()
    data = report.to_json()
    data["printed"]["answers"][0]["numbers"][0]["match"] = "<script>"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="quoted number"):
        read_report(path)
    assert Printed.from_beside([printed.beside(a.grade_id) for a in printed.answers]).to_json() == printed.to_json()


def test_a_quote_must_name_an_experiment_the_notebook_records(tmp_path):
    folder = tmp_path / "solutions" / "week6"
    shutil.copytree(REPO / "solutions" / "week6", folder)
    path = folder / f"{STEM}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "b3_large_lr")
    cell.metadata["week6"]["quotes"] = ["B3 learning rates"]
    nbformat.write(nb, path)
    with pytest.raises(CourseError, match="'B3 learning rates'.*one of: B3 learning rate, B6 LoRA"):
        read_course(tmp_path / "solutions")


def test_every_written_answer_that_asks_for_numbers_quotes_its_experiment():
    """The answers whose question says to quote measured numbers name their experiment."""
    quoting = {item.grade_id for item in load_course().items("written") if item.quotes}
    assert {"b3_large_lr", "ex2_loss_curves", "ex2_data_efficiency", "ex2_out_of_domain", "ex3_compare_with_finetuning",
            "ex3_decoder_finetuning", "ex4_size_tradeoffs", "ex5_rouge_discussion", "b1_token_counts",
            "a4_general_share"} <= quoting


# ------------------------------------------------------------------------------ the class report
def test_the_class_report_lists_the_numbers_to_check(tmp_path):
    out = tmp_path / "grades"
    answers = {"ann": "0.567 and 49.6 %", "bea": "I got 0.508 before and 0.772 with 1e-4", "cal": "0.567, 0.9999"}
    for student, answer in answers.items():
        printed = printed_values(submission(measures(student="ann"), answer=answer), NOTEBOOK, student)
        write_report(out, student, STEM, Report(student, f"{STEM}.ipynb", printed=printed))
    for student, answer in {"dan": "I remember 0.75", "eve": "no numbers"}.items():  # nothing recorded
        printed = printed_values(submission(answer=answer), NOTEBOOK, student)
        write_report(out, student, STEM, Report(student, f"{STEM}.ipynb", printed=printed))
    rows = {(n.student, n.answer, n.what): n.detail for n in statistics.numbers_to_check(load_grades(out))}
    assert rows == {
        ("bea", "", "seed"): rows[("bea", "", "seed")],
        ("cal", "", "seed"): rows[("cal", "", "seed")],
        ("bea", "b3_large_lr", "from the reference table"):
            f"0.508 ({B3}: dev accuracy before fine-tuning); 0.772 ({B3}: dev accuracy, lr 1e-4)",
        ("cal", "b3_large_lr", "not among the recorded values"): "0.9999",
        ("dan", "b3_large_lr", "not recorded"): B3,
    }, "ann ran with her own id and quoted what she recorded; bea and cal ran with ann's id; eve quotes nothing"
    page = class_report.write(load_grades(out), class_report.Extras(), out).read_text()
    assert 'id="numbers"' in page and "from the reference table" in page


# ------------------------------------------------------------------------------ a real run
@pytest.mark.slow
def test_a_students_run_is_graded_with_its_values_and_recomputed_by_the_staff(tmp_path):
    stem = "part_a_discovery"
    folder = tmp_path / "submitted" / "alice" / "week6"
    folder.mkdir(parents=True)
    shutil.copy(REPO / "data" / "sample_submissions" / "alice_full_solution" / "week6" / f"{stem}.ipynb", folder)
    env = {**venv_env(), "WEEK6_STUDENT": "alice", "WEEK6_FAST": "1"}
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                    f"{stem}.ipynb"], cwd=folder, env=env, check=True, capture_output=True, timeout=600)

    graded = tmp_path / "graded"
    subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "submitted"), "--out", str(graded),
                    "--device", "cpu"], cwd=REPO, env=venv_env(), check=True, capture_output=True, timeout=600)
    printed = read_report(graded / "alice" / f"{stem}.json").printed
    assert printed.seed == student_seed("alice") and printed.seed_note == ""
    (answer,) = printed.answers
    assert len(answer.recorded["Austen's words in movie reviews"]) == 5

    def recompute() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "benchmarks/reference_values.py", "--student", "alice", "--notebooks",
                               stem, "--mode", "fast", "--submission", str(folder)], cwd=REPO, env=venv_env(),
                              capture_output=True, text=True, timeout=600)

    run = recompute()
    assert run.returncode == 0 and "5 of 5 values agree" in run.stdout, run.stdout + run.stderr
    nb = nbformat.read(folder / f"{stem}.ipynb", as_version=4)
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            record = output.get("data", {}).get(MEASURES_MIME)
            if record:
                record["values"][0][1] = 0.99  # a number typed in by hand
    nbformat.write(nb, folder / f"{stem}.ipynb")
    run = recompute()
    assert run.returncode == 1 and "4 of 5 values agree" in run.stdout and "DIFFERS" in run.stdout, run.stdout


def test_a_notebook_whose_records_cannot_be_read_is_still_graded():
    """Reading the records informs the TA and never costs a grade: a failure there is a staff note."""
    from unittest import mock

    import autograder.grading as grading

    with mock.patch.object(grading, "printed_values", side_effect=RecursionError("nested too deep")):
        printed = grading.recorded_for_answers(submission(measures()), NOTEBOOK, "alice")
    assert printed.answers == [] and "could not be read (RecursionError)" in printed.seed_note
