"""The CLI's contract for class-scale runs: resume, shards and merge, exit status.

Small classes of ``part_a_discovery`` notebooks (the cheapest to grade) built from
the samples; everything runs through ``python -m autograder`` as a TA would.
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder import cli
from autograder.config import GradingConfig
from autograder.paths import REPO
from autograder.report import Report

SAMPLES = REPO / "data" / "sample_submissions"
STEM = "part_a_discovery"
pytestmark = pytest.mark.slow


def small_class(root: Path, students=("alice_full_solution", "nina_malformed_metadata",
                                      "sybil_reads_root_only_files")) -> Path:
    for student in students:
        target = root / student / "week6"
        target.mkdir(parents=True)
        shutil.copy(SAMPLES / student / "week6" / f"{STEM}.ipynb", target)
    return root


def run(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "autograder", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=900, **kwargs)


def scores(out: Path) -> dict[str, tuple[str, str, str]]:
    with (out / "grades.csv").open() as handle:
        return {f"{r['student']}/{r['notebook']}": (r["outcome"], r["score"], r["max_score"])
                for r in csv.DictReader(handle)}


def reports(out: Path) -> dict[str, bytes]:
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in out.glob("*/*.json")}


def test_shards_merged_equal_one_run(tmp_path):
    root = small_class(tmp_path / "submitted")
    whole, sharded = tmp_path / "whole", tmp_path / "sharded"
    assert run("grade", str(root), "--out", str(whole), "--device", "cpu", "--format", "gradescope").returncode == 0
    assert len(list(whole.glob("*/gradescope/*.json"))) == 3
    for index in range(2):
        result = run("grade", str(root), "--out", str(sharded), "--device", "cpu", "--shard", f"{index}/2")
        assert result.returncode == 0, result.stderr
        assert not (sharded / "grades.csv").exists(), "a shard writes no class table"
    assert run("merge", str(sharded)).returncode == 0
    assert scores(sharded) == scores(whole)
    assert len(scores(whole)) == 3
    assert set(reports(sharded)) == set(reports(whole))


def test_a_rerun_skips_what_is_graded_and_regrades_what_changed(tmp_path):
    root = small_class(tmp_path / "submitted", ("alice_full_solution", "nina_malformed_metadata"))
    out = tmp_path / "grades"
    assert run("grade", str(root), "--out", str(out), "--device", "cpu").returncode == 0
    first = reports(out)
    again = run("grade", str(root), "--out", str(out), "--device", "cpu")
    assert again.returncode == 0 and "2 already graded" in again.stdout
    assert reports(out) == first
    # Nina resubmits (Alice's notebook): only hers is graded again.
    shutil.copy(root / "alice_full_solution" / "week6" / f"{STEM}.ipynb", root / "nina_malformed_metadata" / "week6")
    changed = run("grade", str(root), "--out", str(out), "--device", "cpu")
    assert "Grading 1 notebook(s)" in changed.stdout and "1 already graded" in changed.stdout
    nina = json.loads((out / "nina_malformed_metadata" / f"{STEM}.json").read_text())
    assert nina["score"] == nina["max_score"] == 12
    assert reports(out)[f"alice_full_solution/{STEM}.json"] == first[f"alice_full_solution/{STEM}.json"]
    forced = run("grade", str(root), "--out", str(out), "--device", "cpu", "--force")
    assert "Grading 2 notebook(s)" in forced.stdout


def test_a_course_secret_draws_inputs_of_each_students_own_and_regrades_alike(tmp_path):
    """With $WEEK6_GRADING_SECRET the sandboxed grade is the same (a correct solution keeps
    every point), re-grading with it reproduces every report, and reports of the public seeds
    or of another secret are out of date."""
    root = small_class(tmp_path / "submitted", ("alice_full_solution",))
    public, drawn = tmp_path / "public", tmp_path / "drawn"
    plain = {k: v for k, v in os.environ.items() if k != "WEEK6_GRADING_SECRET"}
    assert run("grade", str(root), "--out", str(public), "--device", "cpu", env=plain).returncode == 0
    secret = {**plain, "WEEK6_GRADING_SECRET": "a course secret of at least sixteen characters"}
    first = run("grade", str(root), "--out", str(drawn), "--device", "cpu", env=secret)
    assert first.returncode == 0, first.stderr
    assert "each student's own, from the course secret" in first.stderr and secret["WEEK6_GRADING_SECRET"] not in (
        first.stdout + first.stderr + "".join(p.read_text() for p in drawn.rglob("*.json")))
    assert scores(drawn) == scores(public)
    key = f"alice_full_solution/{STEM}.json"
    report, public_report = json.loads(reports(drawn)[key]), json.loads(reports(public)[key])
    assert report["score"] == report["max_score"] == 12
    assert report["suite_hash"] != public_report["suite_hash"]
    assert "1 already graded" in run("grade", str(root), "--out", str(drawn), "--device", "cpu", env=secret).stdout
    assert run("grade", str(root), "--out", str(drawn), "--device", "cpu", "--force", env=secret).returncode == 0
    outcome = lambda r: [(t["test"], t["status"], t["points"], t["message"]) for t in r["tests"]]
    assert outcome(json.loads(reports(drawn)[key])) == outcome(report), "re-grading drew other inputs"
    other = {**plain, "WEEK6_GRADING_SECRET": "another course secret, sixteen characters or more"}
    assert "Grading 1 notebook(s)" in run("grade", str(root), "--out", str(drawn), "--device", "cpu", env=other).stdout


def test_a_killed_run_finishes_the_class_when_started_again(tmp_path, repo_root):
    root = small_class(tmp_path / "submitted")
    out = tmp_path / "grades"
    command = [sys.executable, "-m", "autograder", "grade", str(root), "--out", str(out), "--device", "cpu"]
    process = subprocess.Popen(command, cwd=repo_root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 300
    while not list(out.glob("*/*.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)  # the CLI, its fork server and jobs, mid-class
    process.wait()
    done = reports(out)
    assert 1 <= len(done) < 3
    result = run("grade", str(root), "--out", str(out), "--device", "cpu")
    assert result.returncode == 0, result.stderr
    assert f"{len(done)} already graded" in result.stdout
    final = reports(out)
    assert len(final) == 3 and all(final[name] == body for name, body in done.items())
    assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")], "no half-written report is left"
    assert len(scores(out)) == 3


def test_exit_status_says_whether_to_retry(tmp_path, monkeypatch):
    assert run("grade", str(tmp_path / "missing")).returncode == cli.EXIT_CONFIGURATION
    assert run("grade", "--shards", "3", "--shard-from-env", "NO_SUCH_VARIABLE").returncode == cli.EXIT_CONFIGURATION
    assert run("grade", "--shard", "3/3").returncode == cli.EXIT_CONFIGURATION
    assert run("grade", "--no-such-option").returncode == cli.EXIT_CONFIGURATION
    import torch

    if not torch.cuda.is_available():
        assert run("grade", "--device", "cuda").returncode == cli.EXIT_CONFIGURATION
    root = small_class(tmp_path / "submitted", ("alice_full_solution",))

    def machine_failure(notebooks, *, student, config, on_report):
        for index, notebook in enumerate(notebooks):
            on_report(index, Report.problem(student, Path(notebook).name, "the grader process failed (exit -9)",
                                            device=config.device, outcome="failed"))

    monkeypatch.setattr(cli, "grade_submission", machine_failure)
    out = tmp_path / "grades"
    config = GradingConfig(device="cpu", out=out)
    assert cli.grade([root], config) == cli.EXIT_RETRY
    assert scores(out) == {f"alice_full_solution/{STEM}.ipynb": ("failed", "0.0", "0.0")}
    assert cli.grade([root], config) == cli.EXIT_RETRY, "a failed notebook is never taken as done"
