"""The job runner: each grading job in a process forked from the preloaded fork server.

Whatever a job does (exit, raise, die of a signal, hang with a child that left
its process group), the caller gets a status back, and nothing it started lives on.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import psutil
import pytest

from autograder import runner
from autograder.config import GradingConfig
from tests.grading import runner_jobs


def test_job_runs_forked_from_the_preloaded_server_in_its_own_session(tmp_path):
    out, log = tmp_path / "out.json", tmp_path / "log.txt"
    status = runner.run_forked(runner_jobs.describe_process, (str(out),), timeout=120, log_path=log)
    assert status == 0, log.read_text()
    facts = json.loads(out.read_text())
    assert facts["pid"] != os.getpid()
    assert facts["sid"] == facts["pid"], "each job leads a session of its own"
    assert Path(facts["cwd"]) == runner.REPO
    # Imported by the server before the fork, not by the job: this is the saving.
    assert set(facts["preloaded"]) == {"torch", "pytest", "transformers.models.bert.modeling_bert",
                                       "autograder.grading"}
    assert facts["cuda_initialized"] is False
    assert "hello from the job" in log.read_text()


def test_two_jobs_are_two_fresh_processes(tmp_path):
    pids = []
    for index in range(2):
        out = tmp_path / f"out{index}.json"
        assert runner.run_forked(runner_jobs.describe_process, (str(out),), timeout=120,
                                 log_path=tmp_path / f"log{index}.txt") == 0
        pids.append(json.loads(out.read_text())["pid"])
    assert pids[0] != pids[1]


@pytest.mark.parametrize("job, args, expected, in_log", [
    (runner_jobs.exit_with, (3,), 3, "leaving with 3"),
    (runner_jobs.raise_error, (), 1, "the job broke on purpose"),
    (runner_jobs.kill_itself, (), -11, ""),
])
def test_exit_status_and_log_of_a_failing_job(tmp_path, job, args, expected, in_log):
    log = tmp_path / "log.txt"
    assert runner.run_forked(job, args, timeout=120, log_path=log) == expected
    assert in_log in log.read_text()


def test_a_job_past_its_deadline_is_killed_with_everything_it_started(tmp_path):
    pid_file = tmp_path / "child.pid"
    started = time.monotonic()
    status = runner.run_forked(runner_jobs.hang_with_escaped_child, (str(pid_file),), timeout=8,
                               log_path=tmp_path / "log.txt")
    assert status is None, "a timeout is reported as None"
    assert time.monotonic() - started < 60
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 10
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the job's child (in a session of its own) outlived the job"
        time.sleep(0.1)


def test_a_failed_grading_process_becomes_a_report(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "run_forked", lambda *a, **k: None)
    report = runner.grade_in_subprocess(tmp_path / "x.ipynb", student="eve",
                                        config=GradingConfig(device="cpu", timeout_notebook=5))
    assert report.score == 0 and report.sandbox == "none"
    assert "did not finish within 5 s" in report.warnings[0]
    monkeypatch.setattr(runner, "run_forked", lambda *a, **k: 1)
    report = runner.grade_in_subprocess(tmp_path / "x.ipynb", student="eve", config=GradingConfig(device="cpu"))
    assert report.warnings[0].startswith("the grader process failed (exit 1)")


def grade_names(tmp_path, names, timeout=600.0):
    reports = []
    runner.grade_submission([tmp_path / name for name in names], student="eve",
                            config=GradingConfig(device="cpu", timeout_notebook=timeout),
                            on_report=lambda index, report: reports.append((index, report)),
                            job=runner_jobs.grade_by_name)
    return reports


def test_one_process_grades_a_submissions_notebooks_in_order(tmp_path):
    reports = grade_names(tmp_path, ["a.ipynb", "b.ipynb", "c.ipynb"])
    assert [(index, report.notebook, report.score) for index, report in reports] == [
        (0, "a.ipynb", 1.0), (1, "b.ipynb", 1.0), (2, "c.ipynb", 1.0)]
    assert len({report.warnings[0] for _, report in reports}) == 1, "one grading process for the submission"


def test_a_notebook_that_crashes_the_process_is_reported_and_the_rest_graded_in_a_new_one(tmp_path):
    reports = grade_names(tmp_path, ["a.ipynb", "crash.ipynb", "c.ipynb", "crash2.ipynb"])
    assert [index for index, _ in reports] == [0, 1, 2, 3], "each notebook exactly once, in order"
    (_, a), (_, crash), (_, c), (_, crash2) = reports
    assert a.score == c.score == 1.0 and a.outcome == c.outcome == "graded"
    for failed in (crash, crash2):
        assert failed.outcome == "failed" and failed.score == 0
        assert failed.warnings[0].startswith("the grader process failed (exit 9)"), failed.warnings
        assert "crashing on" in failed.warnings[0], "the log's last lines say what happened"
    assert a.warnings != c.warnings, "the notebooks after a crash are graded by a new process"


def test_a_hanging_notebook_is_stopped_at_its_own_deadline(tmp_path):
    started = time.monotonic()
    reports = grade_names(tmp_path, ["a.ipynb", "hang.ipynb", "c.ipynb"], timeout=6)
    assert time.monotonic() - started < 60
    assert [(report.notebook, report.outcome) for _, report in reports] == [
        ("a.ipynb", "graded"), ("hang.ipynb", "failed"), ("c.ipynb", "graded")]
    assert "did not finish within 6 s" in reports[1][1].warnings[0]
