"""`python -m autograder grade` on the bundled samples gives the expected scores.

This is the main job (`make grade`) run end to end: one sandboxed worker per
submission, the hidden suites in the grader, reports and the class CSV. No cheat
may gain a point, and a broken submission costs only its own student.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from autograder.analytics.sources import RUN_FILE
from autograder.paths import REPO
from autograder.report import MAX_REPORT_BYTES
from autograder.sandbox.isolation import bwrap_works

SAMPLES = REPO / "data" / "sample_submissions"
EXPECTED = json.loads((SAMPLES / "expected.json").read_text())
pytestmark = pytest.mark.slow
# Bounds on the trusted grading process of one notebook, whatever the submission
# sends back (docs/threat-model.md). Honest part_b_bert_gpt: about 0.6 GiB, 10 s.
GRADER_PEAK_RSS_MIB = 2048
NOTEBOOK_SECONDS = 300


@pytest.fixture(scope="module")
def graded(tmp_path_factory, repo_root):
    out = tmp_path_factory.mktemp("grades")
    result = subprocess.run([sys.executable, "-m", "autograder", "grade", "--jobs", "2", "--out", str(out)],
                            cwd=repo_root, capture_output=True, text=True, timeout=1800)
    reports = {
        f"{path.parent.name}/{path.stem}": json.loads(path.read_text())
        for path in out.glob("*/*.json")
    }
    return result, out, reports


def test_grading_completes_with_exit_status_zero(graded):
    result, out, reports = graded
    assert result.returncode == 0, result.stderr
    assert "alice_full_solution" in result.stdout  # the printed table
    assert set(reports) == set(EXPECTED), "every sample notebook gets exactly one report"


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_sample_scores(graded, key):
    _, _, reports = graded
    report, expected = reports[key], EXPECTED[key]
    if expected.get("needs_bwrap") and report["sandbox"] != "bwrap":
        pytest.skip("this cheat is only stopped by the bubblewrap sandbox (file-system isolation)")
    assert report["score"] == expected["score"], (
        f"{key}: scored {report['score']}, expected {expected['score']} (outcome {report.get('outcome')}, "
        f"{report.get('duration_s')} s, warnings {report.get('warnings')}): "
        + "; ".join(f"{t['test']}={t['status']}" for t in report["tests"] if t["status"] != "passed")
    )
    assert report["max_score"] == expected["max_score"]
    for cell, status in expected.get("statuses", {}).items():
        seen = {t["status"] for t in report["tests"] if t["grade_id"] == cell}
        assert seen == {status}, f"{key}: {cell} has statuses {seen}, expected {status}"
    for fragment in expected.get("messages", []):
        assert any(fragment in t["message"] for t in report["tests"]) or any(
            fragment in w for w in report["warnings"]), f"{key}: no message mentions {fragment!r}"


def test_reports_follow_the_schema(graded):
    _, _, reports = graded
    for report in reports.values():
        assert set(report) >= {"student", "assignment", "notebook", "score", "max_score", "sandbox",
                               "device", "duration_s", "tests"}
        for test in report["tests"]:
            fields = {"grade_id", "test", "status", "points", "max_points", "message"}
            assert fields <= set(test) <= fields | {"detail"}  # detail: the TA's view of a failure
            assert test["status"] in {"passed", "failed", "error", "timeout", "forbidden", "missing"}
            assert 0 <= test["points"] <= test["max_points"]


def test_class_csv_has_one_row_per_notebook(graded):
    _, out, reports = graded
    with (out / "grades.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == len(reports)
    assert {(r["student"], r["notebook"]) for r in rows} == {(r["student"], r["notebook"]) for r in reports.values()}


def test_reports_and_the_grading_process_stay_within_their_bounds(graded):
    """Hostile replies (victor) cost the trusted process no more than an honest notebook."""
    _, out, reports = graded
    for path in out.glob("*/*.json"):
        assert path.stat().st_size <= MAX_REPORT_BYTES, f"{path} is {path.stat().st_size} bytes"
    for key, report in reports.items():
        if report["sandbox"] != "none":
            assert report["grader_peak_rss_mib"] < GRADER_PEAK_RSS_MIB, (key, report["grader_peak_rss_mib"])
            assert report["duration_s"] < NOTEBOOK_SECONDS, (key, report["duration_s"])


def test_a_notebook_filed_under_another_student_is_not_theirs(graded):
    _, out, reports = graded
    assert [p.stem for p in (out / "alice_full_solution").glob("*.json")].count("part_b_bert_gpt") == 1
    mallet = [r for k, r in reports.items() if k.startswith("mallet_files_under_alice/")]
    assert len(mallet) == 1 and mallet[0]["student"] == "mallet_files_under_alice"


def test_detached_process_cannot_rewrite_reports(graded):
    _, out, reports = graded
    before = {p: p.read_bytes() for p in out.glob("*/*.json")}
    time.sleep(6)  # the cheat's daemon waits 4 s before it strikes
    assert {p: p.read_bytes() for p in out.glob("*/*.json")} == before
    # Workers of this checkout only (their command starts with this interpreter): other
    # checkouts on the machine may be grading at the same time, and this test process
    # may hold zygotes of its own (nbgrader run in process by other tests keeps a pool).
    ours = {p.pid for p in psutil.Process().children(recursive=True)}
    left = []
    for process in psutil.process_iter(["pid", "cmdline"]):
        command = " ".join(process.info["cmdline"] or [])
        if process.info["pid"] not in ours and any(f"{sys.executable} -s -m autograder.sandbox.{entry}" in command
                                                   for entry in ("worker_main", "zygote_main")):
            left.append(command)
    assert left == [], "a sandboxed worker, or a zygote and the workers it forked, outlived the run"


def test_sandbox_is_bubblewrap_where_available(graded):
    _, _, reports = graded
    expected = "bwrap" if bwrap_works() else "degraded"
    # A notebook that cannot be read runs no code: its report says "none", and its
    # tests are all "missing". Every other report names the sandbox that ran it.
    ran = {k: r for k, r in reports.items() if any(t["status"] != "missing" for t in r["tests"])}
    assert {r["sandbox"] for r in ran.values()} == {expected}
    assert reports["erin_invalid_json/part_b_bert_gpt"]["sandbox"] == "none"


def _under_bwrap(reports, student):
    return next(r for k, r in reports.items() if k.startswith(f"{student}/"))["sandbox"] == "bwrap"


def test_the_output_folder_holds_exactly_the_reports(graded):
    """Forged reports, CSVs and Gradescope files (gina) are not in the output folder,
    nor planted modules (kevin) in the repository, its samples or its environment."""
    _, out, reports = graded
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == sorted(
        ["grades.csv", RUN_FILE] + [f"{key}.json" for key in EXPECTED])
    if not (_under_bwrap(reports, "gina_forges_report_files") and _under_bwrap(reports, "kevin_shadows_torch")):
        pytest.skip("these samples write only inside the bubblewrap sandbox")
    for path in out.rglob("*"):
        assert path.is_dir() or b"forged-by-gina" not in path.read_bytes(), path
    for student in ("gina_forges_report_files", "kevin_shadows_torch"):
        assert [p.name for p in (SAMPLES / student).rglob("*") if p.is_file()] == ["part_a_discovery.ipynb"]
    planted = ("sitecustomize.py", "usercustomize.py", "kevin_shadow.pth", "torch.py")
    folders = [REPO, REPO / "grades", *sys.path]
    assert [f"{folder}/{name}" for folder in folders for name in planted
            if (Path(folder) / name).is_file() and b"torch.allclose" in (Path(folder) / name).read_bytes()] == []


def test_printed_scores_do_not_reach_the_grader(graded):
    """What a student prints (hank: score lines, report-like JSON) stays out of the
    grader's own output and of every report."""
    result, out, _ = graded
    assert "printed-by-hank" not in result.stdout + result.stderr
    assert all(b"printed-by-hank" not in p.read_bytes() for p in out.rglob("*") if p.is_file())
