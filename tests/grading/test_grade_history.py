"""Grade history: a re-grade that changes a score keeps the report it replaces, with its cause.

Unit tests write reports with ``write_report`` as the CLI does; the last test re-grades a
real submission through ``python -m autograder grade`` after the student resubmits.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from autograder import grade_history as history
from autograder.cli import merge
from autograder.grade_history import keep_previous, read_changes, write_report
from autograder.paths import REPO
from autograder.report import Report, TestResult

SAMPLES = REPO / "data" / "sample_submissions"


def graded(points: list[float], *, sha="a" * 64, suite="s" * 64, device="cpu", outcome="graded") -> Report:
    tests = [TestResult(f"test_item{i}", f"test_{i}", "passed" if p == 1 else "failed", p, 1.0, "")
             for i, p in enumerate(points)]
    return Report("alice", "part_a_discovery.ipynb", outcome=outcome, score=sum(points), max_score=len(points),
                  device=device, tests=tests, submission_sha256=sha, suite_hash=suite, grader_version="0.4.0")


def entries(out, student="alice", key="part_a_discovery"):
    return sorted((out / student / "history" / key).glob("*.json"))


def test_a_changed_score_keeps_the_replaced_report_and_an_unchanged_one_keeps_nothing(tmp_path):
    write_report(tmp_path, "alice", "part_a_discovery", graded([1, 0, 1]))
    write_report(tmp_path, "alice", "part_a_discovery", graded([1, 0, 1]))  # same points: no trace
    assert entries(tmp_path) == []
    write_report(tmp_path, "alice", "part_a_discovery", graded([1, 1, 1], sha="b" * 64))
    (kept,) = entries(tmp_path)
    entry = json.loads(kept.read_text())
    assert (entry["cause"], entry["old_score"], entry["new_score"], entry["max_score"]) == ("submission", 2, 3, 3)
    assert entry["previous"]["tests"][1]["status"] == "failed", "the whole replaced report is kept"
    assert entry["previous"]["submission_sha256"] == "a" * 64
    assert entry["changed_at"].endswith("+00:00") and entry["previous_graded_at"].endswith("+00:00")
    # The report itself is the new one; the history is one folder below the student's.
    assert json.loads((tmp_path / "alice" / "part_a_discovery.json").read_text())["score"] == 3
    assert sorted(p.name for p in (tmp_path / "alice").iterdir()) == ["history", "part_a_discovery.json"]


def test_points_moving_between_items_count_as_a_change(tmp_path):
    write_report(tmp_path, "alice", "part_a_discovery", graded([1, 0]))
    write_report(tmp_path, "alice", "part_a_discovery", graded([0, 1], suite="t" * 64))
    (kept,) = entries(tmp_path)
    assert json.loads(kept.read_text())["cause"] == "suite"


@pytest.mark.parametrize("old, new, causes", [
    (graded([1, 0]), graded([1, 1], sha="b" * 64), ["submission"]),
    (graded([1, 0]), graded([1, 1], suite="t" * 64), ["suite"]),
    (graded([1, 0]), graded([1, 1], device="cuda"), ["device"]),
    (graded([0, 0], outcome="failed"), graded([1, 1]), ["retry"]),
    (graded([1, 0]), graded([1, 1]), ["forced"]),
    (graded([1, 0]), graded([1, 1], sha="b" * 64, suite="t" * 64), ["submission", "suite"]),
])
def test_the_cause_is_read_off_the_two_reports(tmp_path, old, new, causes):
    write_report(tmp_path, "alice", "part_a_discovery", old)
    write_report(tmp_path, "alice", "part_a_discovery", new)
    (kept,) = entries(tmp_path)
    entry = json.loads(kept.read_text())
    assert (entry["cause"], entry["causes"]) == (causes[0], causes)


def test_a_missing_or_damaged_report_has_nothing_to_keep(tmp_path):
    assert keep_previous(tmp_path, "alice", "part_a_discovery", graded([1])) is None
    (tmp_path / "alice").mkdir()
    (tmp_path / "alice" / "part_a_discovery.json").write_text("{not json")
    write_report(tmp_path, "alice", "part_a_discovery", graded([1]))
    assert entries(tmp_path) == []


def test_read_changes_lists_every_change_and_survives_a_damaged_entry(tmp_path):
    write_report(tmp_path, "alice", "part_a_discovery", graded([0, 0]))
    write_report(tmp_path, "alice", "part_a_discovery", graded([1, 0], sha="b" * 64))
    write_report(tmp_path, "alice", "part_a_discovery", graded([1, 1], sha="b" * 64, suite="t" * 64))
    bad = tmp_path / "bob" / "history" / "part_a_discovery"
    bad.mkdir(parents=True)
    (bad / "20260101T000000.000000Z.json").write_text('{"cause": "because"}')
    changes, warnings = read_changes(tmp_path)
    assert [(c.student, c.cause, c.old_score, c.new_score) for c in changes] == [
        ("alice", "submission", 0, 1), ("alice", "suite", 1, 2)]
    assert len(warnings) == 1 and "bob/history/part_a_discovery" in warnings[0]


def test_history_is_pruned_to_the_newest_entries(tmp_path, monkeypatch):
    monkeypatch.setattr(history, "MAX_KEPT", 3)
    for score in range(6):
        write_report(tmp_path, "alice", "part_a_discovery", graded([1] * score + [0] * (5 - score)))
    kept = entries(tmp_path)
    assert len(kept) == 3
    assert [json.loads(p.read_text())["new_score"] for p in kept] == [3, 4, 5], "the newest three are kept"


def test_merge_does_not_take_history_for_reports(tmp_path, capsys):
    write_report(tmp_path, "alice", "part_a_discovery", graded([0, 0]))
    write_report(tmp_path, "alice", "part_a_discovery", graded([1, 1], sha="b" * 64))
    merge([tmp_path])
    rows = (tmp_path / "grades.csv").read_text().splitlines()
    assert len(rows) == 2 and ",2.0," in rows[1]


@pytest.mark.slow
def test_a_resubmission_regraded_by_the_cli_keeps_the_old_grade(tmp_path):
    """Bob first hands in the untouched release (0 points), then Alice's full solution."""
    notebook = tmp_path / "submitted" / "bob" / "week6" / "exercise2_finetune_vs_scratch.ipynb"
    notebook.parent.mkdir(parents=True)
    out = tmp_path / "grades"

    def grade(*extra: str) -> None:
        result = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp_path / "submitted"), "--out",
                                 str(out), "--device", "cpu", *extra], cwd=REPO, capture_output=True, text=True,
                                timeout=900)
        assert result.returncode == 0, result.stderr[-3000:]

    shutil.copy(SAMPLES / "bob_untouched_release" / "week6" / notebook.name, notebook)
    grade()
    shutil.copy(SAMPLES / "alice_full_solution" / "week6" / notebook.name, notebook)
    grade()
    grade("--force")  # the same bytes again: the same score, nothing more kept
    changes, warnings = read_changes(out)
    assert warnings == []
    assert [(c.student, c.notebook, c.cause, c.old_score, c.new_score) for c in changes] == [
        ("bob", "exercise2_finetune_vs_scratch.ipynb", "submission", 0.0, 2.0)]
