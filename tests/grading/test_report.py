"""Reports have a bounded size whatever a submission returns, and are written whole or not at all."""
from __future__ import annotations

import csv
import json

from autograder.report import (MAX_MESSAGE_CHARS, MAX_REPORT_BYTES, MAX_WARNINGS, bounded, clip,
                               problem_report, write_report, write_table)


def report_with(messages: list[str], warnings: list[str] | None = None) -> dict:
    return {"student": "s", "assignment": "week6", "notebook": "n.ipynb", "score": 0.0, "max_score": 1.0,
            "sandbox": "bwrap", "device": "cpu", "duration_s": 1.0, "warnings": warnings or [],
            "tests": [{"grade_id": "g", "test": f"t{i}", "status": "failed", "points": 0.0, "max_points": 1.0,
                       "message": m} for i, m in enumerate(messages)]}


def test_clip_keeps_both_ends_and_says_how_much_went():
    text = "head-" + "x" * 10_000_000 + "-tail"
    clipped = clip(text, 500)
    assert len(clipped) == 500
    assert clipped.startswith("head-") and clipped.endswith("-tail")
    assert f"{len(text) - 500} characters cut" in clipped
    assert clip("short") == "short"


def test_a_ten_megabyte_message_makes_a_small_report():
    report = bounded(report_with(["got " + "0" * 10_000_000]))
    assert len(json.dumps(report)) < 4 * MAX_MESSAGE_CHARS
    assert len(report["tests"][0]["message"]) == MAX_MESSAGE_CHARS


def test_many_long_messages_stay_under_the_report_cap():
    report = bounded(report_with(["y" * 50_000] * 400, warnings=["w" * 50_000] * 100))
    assert len(json.dumps(report, indent=2)) <= MAX_REPORT_BYTES
    assert len(report["warnings"]) == MAX_WARNINGS + 1
    assert "more warnings" in report["warnings"][-1]


def test_problem_reports_score_nothing_and_say_why():
    report = problem_report("eve", "x.ipynb", "it is a FIFO")
    assert (report["score"], report["max_score"], report["tests"], report["warnings"]) == (0.0, 0.0, [], ["it is a FIFO"])


def test_reports_are_written_atomically_and_leave_no_temporary_files(tmp_path):
    target = write_report(tmp_path, "alice", "part_a", report_with(["m"]))
    assert json.loads(target.read_text())["tests"][0]["message"] == "m"
    write_report(tmp_path, "alice", "part_a", report_with(["n"]))
    assert sorted(p.name for p in (tmp_path / "alice").iterdir()) == ["part_a.json"]


def test_the_class_table_cannot_carry_spreadsheet_formulas(tmp_path):
    report = problem_report("alice", "=HYPERLINK(\"http://x\")", "bad name")
    with (write_table([report], tmp_path)).open() as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["notebook"].startswith("'=")


def test_gradescope_results_carry_each_test(tmp_path):
    from autograder.report import write_gradescope

    report = report_with(["differs from the reference"])
    report["tests"].append({"grade_id": "g", "test": "t_ok", "status": "passed", "points": 1.0,
                            "max_points": 1.0, "message": ""})
    report["score"] = 1.0
    results = json.loads(write_gradescope(tmp_path, "alice", "part_a", report).read_text())
    assert results["score"] == 1.0
    assert [(t["status"], t["score"], t["max_score"]) for t in results["tests"]] == [
        ("failed", 0.0, 1.0), ("passed", 1.0, 1.0)]
    assert "differs from the reference" in results["tests"][0]["output"]
    assert list(tmp_path.glob("*/*.json")) == [], "not where merge looks for reports"


def test_a_report_read_back_is_checked_and_clipped(tmp_path):
    import pytest

    from autograder.intake import IntakeError
    from autograder.report import read_report

    path = write_report(tmp_path, "alice", "part_a", report_with(["z" * 100_000]))
    assert len(read_report(path)["tests"][0]["message"]) == MAX_MESSAGE_CHARS
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="no report"):
        read_report(tmp_path / "list.json")
    (tmp_path / "link.json").symlink_to(path)
    with pytest.raises(IntakeError, match="symbolic link"):
        read_report(tmp_path / "link.json")
