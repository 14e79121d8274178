"""Reports: one type for every rendering, a bounded size whatever a submission returns,
written whole or not at all, and read back as untrusted input."""
from __future__ import annotations

import csv
import json

import pytest

from autograder.errors import IntakeError
from autograder.grade_history import write_report
from autograder.report import (
    MAX_MESSAGE_CHARS,
    MAX_REPORT_BYTES,
    MAX_WARNINGS,
    Report,
    TestResult,
    clip,
    read_report,
    to_gradescope,
    write_gradescope,
    write_table,
)


def report_with(messages: list[str], warnings: list[str] | None = None) -> Report:
    return Report(student="s", notebook="n.ipynb", score=0.0, max_score=1.0, sandbox="bwrap", device="cpu",
                  duration_s=1.0, warnings=warnings or [],
                  tests=[TestResult("g", f"t{i}", "failed", 0.0, 1.0, m) for i, m in enumerate(messages)])


def test_clip_keeps_both_ends_and_says_how_much_went():
    text = "head-" + "x" * 10_000_000 + "-tail"
    clipped = clip(text, 500)
    assert len(clipped) == 500
    assert clipped.startswith("head-") and clipped.endswith("-tail")
    assert f"{len(text) - 500} characters cut" in clipped
    assert clip("short") == "short"


def test_a_ten_megabyte_message_makes_a_small_report():
    report = report_with(["got " + "0" * 10_000_000]).to_json()
    assert len(json.dumps(report)) < 4 * MAX_MESSAGE_CHARS
    assert len(report["tests"][0]["message"]) == MAX_MESSAGE_CHARS


def test_many_long_messages_stay_under_the_report_cap():
    report = report_with(["y" * 50_000] * 400, warnings=["w" * 50_000] * 100).to_json()
    assert len(json.dumps(report, indent=2)) <= MAX_REPORT_BYTES
    assert len(report["warnings"]) == MAX_WARNINGS + 1
    assert "more warnings" in report["warnings"][-1]


def test_problem_reports_score_nothing_and_say_why():
    report = Report.problem("eve", "x.ipynb", "it is a FIFO")
    assert (report.outcome, report.score, report.max_score, report.tests, report.warnings) == (
        "rejected", 0.0, 0.0, [], ["it is a FIFO"])


def test_a_report_survives_its_json_round_trip(tmp_path):
    report = report_with(["m"], warnings=["w"])
    report.submission_sha256, report.schema_version, report.grader_peak_rss_mib = "ab" * 32, 1, 300.5
    assert read_report(write_report(tmp_path, "s", "n", report)) == report
    on_disk = json.loads((tmp_path / "s" / "n.json").read_text())
    assert list(on_disk)[:11] == ["student", "assignment", "outcome", "notebook", "score", "max_score", "sandbox",
                                  "device", "duration_s", "tests", "warnings"]
    assert "grader_version" not in on_disk, "what is not known is left out, not written as null"


def test_reports_are_written_atomically_and_leave_no_temporary_files(tmp_path):
    target = write_report(tmp_path, "alice", "part_a", report_with(["m"]))
    assert json.loads(target.read_text())["tests"][0]["message"] == "m"
    write_report(tmp_path, "alice", "part_a", report_with(["n"]))
    assert sorted(p.name for p in (tmp_path / "alice").iterdir()) == ["part_a.json"]


def test_the_class_table_cannot_carry_spreadsheet_formulas(tmp_path):
    report = Report.problem("alice", "=HYPERLINK(\"http://x\")", "bad name")
    with (write_table([report], tmp_path)).open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["notebook"].startswith("'=")
    assert (row["outcome"], row["failed"], row["passed"]) == ("rejected", "0", "0")


def test_the_class_table_counts_each_status(tmp_path):
    report = report_with(["a", "b"])
    report.tests.append(TestResult("g", "t_ok", "passed", 1.0, 1.0, ""))
    with (write_table([report], tmp_path)).open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["passed"], row["failed"], row["error"]) == ("1", "2", "0")


def test_gradescope_results_carry_each_test(tmp_path):
    report = report_with(["differs from the reference"])
    report.tests.append(TestResult("g", "t_ok", "passed", 1.0, 1.0, ""))
    report.score = 1.0
    results = json.loads(write_gradescope(tmp_path, "alice", "part_a", report).read_text())
    assert results == to_gradescope(report)
    assert results["score"] == 1.0
    assert [(t["status"], t["score"], t["max_score"]) for t in results["tests"]] == [
        ("failed", 0.0, 1.0), ("passed", 1.0, 1.0)]
    assert "differs from the reference" in results["tests"][0]["output"]
    assert list(tmp_path.glob("*/*.json")) == [], "not where merge looks for reports"


def test_a_report_read_back_is_checked_and_clipped(tmp_path):
    path = write_report(tmp_path, "alice", "part_a", report_with(["z" * 100_000]))
    assert len(read_report(path).tests[0].message) == MAX_MESSAGE_CHARS
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="no report"):
        read_report(tmp_path / "list.json")
    (tmp_path / "link.json").symlink_to(path)
    with pytest.raises(IntakeError, match="symbolic link"):
        read_report(tmp_path / "link.json")


@pytest.mark.parametrize("field, value, fragment", [
    ("score", "40", "'score' has the wrong type"),
    ("score", float("nan"), "'score' has the wrong type"),
    ("warnings", ["ok", 3], "'warnings' has the wrong type"),
    ("tests", [{"grade_id": "g"}], "exactly the fields"),
    ("tests", [{"grade_id": "g", "test": "t", "status": "passed", "points": "1", "max_points": 1.0,
                "message": ""}], "'points' is not a number"),
    ("tests", [{"grade_id": "g", "test": "t", "status": "failed", "points": 0.0, "max_points": 1.0,
                "message": "m", "detail": ["expected 4"]}], "'detail' is not a string"),
    ("tests", [{"grade_id": "g", "test": "t", "status": "failed", "points": 0.0, "max_points": 1.0,
                "message": "m", "expected": 4}], "exactly the fields"),
    ("student", None, "'student' has the wrong type"),
])
def test_a_tampered_report_is_refused_with_the_field_named(tmp_path, field, value, fragment):
    data = report_with(["m"]).to_json()
    data[field] = value
    (tmp_path / "r.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=fragment):
        read_report(tmp_path / "r.json")


# ------------------------------------------------------------------ the staff's detail of a failure
def report_with_detail() -> Report:
    report = report_with(["the loss differs from the expected values: it is off by more than 1000x the tolerance"])
    report.tests[0].detail = "the loss differs from the expected values by up to 2.35; got 0, expected 2.3456"
    report.tests.append(TestResult("g", "t_ok", "passed", 1.0, 1.0, ""))
    return report


def test_the_detail_is_kept_for_the_staff_and_read_back(tmp_path):
    report = report_with_detail()
    path = write_report(tmp_path, "s", "n", report)
    on_disk = json.loads(path.read_text())
    assert on_disk["tests"][0]["detail"].endswith("expected 2.3456")
    assert "detail" not in on_disk["tests"][1], "a test without a detail is written as before"
    assert read_report(path) == report


def test_a_report_of_schema_1_without_details_is_still_read(tmp_path):
    data = report_with(["m"]).to_json()
    data["schema_version"] = 1
    assert all("detail" not in test for test in data["tests"])
    (tmp_path / "old.json").write_text(json.dumps(data))
    (test,) = read_report(tmp_path / "old.json").tests
    assert (test.message, test.detail) == ("m", "")


def test_gradescope_results_carry_the_students_message_never_the_detail(tmp_path):
    report = report_with_detail()
    text = write_gradescope(tmp_path, "alice", "part_a", report).read_text()
    assert "off by more than 1000x the tolerance" in text
    assert "2.3456" not in text and "2.35" not in text and "detail" not in text


def test_a_detail_is_clipped_like_a_message():
    report = report_with(["m"])
    report.tests[0].detail = "expected " + "9" * 10_000_000
    assert len(report.to_json()["tests"][0]["detail"]) == MAX_MESSAGE_CHARS
    shrunk = report_with(["y" * 50_000] * 400)
    for test in shrunk.tests:
        test.detail = "z" * 50_000
    assert len(json.dumps(shrunk.to_json(), indent=2)) <= MAX_REPORT_BYTES
