"""The Slurm set-up (cluster/slurm/) grades the bundled samples on a real cluster.

A one-node Slurm cluster of the test's own (cluster/slurm/local_cluster.py: munged,
slurmctld and slurmd in a temporary folder) runs what a course runs: submit.sh's job
array of 3 shards into one output folder, then the merge job. Together they must give
every sample exactly one report, with the score `make grade` gives it. Skipped where
the cluster cannot start (not root, slurm-wlm or munge not installed: make setup
installs them where it can).
"""
from __future__ import annotations

import csv
import importlib.util
import json
import re
import sys
import time
from pathlib import Path

import pytest

from autograder.paths import REPO
from autograder.sandbox.isolation import bwrap_works

SLURM_DIR = REPO / "cluster" / "slurm"
EXPECTED = json.loads((REPO / "data" / "sample_submissions" / "expected.json").read_text())
SHARDS = 3
# The whole sample class takes a few minutes on 2 CPUs; a stuck job fails the test.
TIMEOUT_S = 15 * 60
POLL_S = 5
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
            "DEADLINE", "PREEMPTED"}
pytestmark = pytest.mark.slow


def _load(name: str, path: Path):
    """cluster/ is not a package: import the module from its file."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


local_cluster = _load("local_cluster", SLURM_DIR / "local_cluster.py")


@pytest.fixture(scope="module")
def cluster():
    slurm = local_cluster.LocalSlurm()
    try:
        slurm.start()
    except local_cluster.ClusterUnavailable as error:
        pytest.skip(f"no local Slurm cluster: {error}")
    yield slurm
    slurm.stop()


def job_records(cluster, job_id: str) -> list[dict[str, str]]:
    """scontrol's records of a job, one per array task (pending tasks share one)."""
    result = cluster.run(["scontrol", "show", "job", "-o", job_id])
    return [dict(re.findall(r"(?:^|\s)(\w+)=(\S*)", line)) for line in result.stdout.splitlines() if line.strip()]


def finished(records: list[dict[str, str]]) -> bool:
    return bool(records) and all(r.get("JobState") in FINISHED for r in records)


def diagnostics(cluster, out: Path) -> str:
    """The jobs' output files and the daemons' logs, for a failure message."""
    parts = [f"=== {path}\n{path.read_text(errors='replace')[-4000:]}"
             for path in sorted((out / "slurm-logs").glob("*"))]
    parts.append(f"=== squeue\n{cluster.run(['squeue']).stdout}")
    parts.append(f"=== daemons' logs\n{cluster.logs()}")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def graded(cluster, tmp_path_factory, repo_root):
    """Submit the samples through submit.sh and wait for the array and the merge."""
    out = tmp_path_factory.mktemp("slurm-grades")
    # One CPU per task: two of the three shards run side by side on a 2-core machine.
    submitted = cluster.run(["bash", str(SLURM_DIR / "submit.sh"), "-n", str(SHARDS), "-o", str(out),
                             "--cpus", "1", "--mem", "4G"],
                            cwd=repo_root, env={**cluster.env, "REPO": str(repo_root), "VENV": sys.prefix})
    assert submitted.returncode == 0, submitted.stderr
    ids = dict(re.findall(r"^(ARRAY_JOB_ID|MERGE_JOB_ID)=(\d+)$", submitted.stdout, re.MULTILINE))
    started = time.monotonic()
    while time.monotonic() - started < TIMEOUT_S:
        tasks, merge = job_records(cluster, ids["ARRAY_JOB_ID"]), job_records(cluster, ids["MERGE_JOB_ID"])
        if finished(tasks) and finished(merge):
            break
        time.sleep(POLL_S)
    else:
        print(diagnostics(cluster, out))
        pytest.fail(f"the array and the merge did not finish within {TIMEOUT_S} s")
    print(f"\nSlurm graded the samples in {SHARDS} shards in {time.monotonic() - started:.0f} s")
    return {"out": out, "tasks": tasks, "merge": merge[0], "diagnostics": diagnostics(cluster, out)}


def load_reports(out: Path) -> dict[str, dict]:
    return {f"{path.parent.name}/{path.stem}": json.loads(path.read_text()) for path in out.glob("*/*.json")}


def test_every_task_and_the_merge_exit_zero(graded):
    tasks = {r["ArrayTaskId"]: (r["JobState"], r["ExitCode"]) for r in graded["tasks"]}
    assert tasks == {str(i): ("COMPLETED", "0:0") for i in range(SHARDS)}, graded["diagnostics"]
    merge = (graded["merge"]["JobState"], graded["merge"]["ExitCode"])
    assert merge == ("COMPLETED", "0:0"), graded["diagnostics"]


def test_every_sample_has_exactly_one_report(graded):
    reports = load_reports(graded["out"])
    assert sorted(reports) == sorted(EXPECTED), graded["diagnostics"]
    assert len(list(graded["out"].glob("*/*.json"))) == len(EXPECTED)


def test_class_csv_has_one_row_per_report(graded):
    reports = load_reports(graded["out"])
    with (graded["out"] / "grades.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    keys = [(row["student"], row["notebook"]) for row in rows]
    assert len(keys) == len(set(keys)) == len(reports)
    assert set(keys) == {(r["student"], r["notebook"]) for r in reports.values()}


def test_jobs_grade_in_the_full_sandbox_where_available(graded):
    """Inside a Slurm job the grader still gets bubblewrap (or says it is degraded)."""
    expected = "bwrap" if bwrap_works() else "degraded"
    ran = [r for r in load_reports(graded["out"]).values() if any(t["status"] != "missing" for t in r["tests"])]
    assert {r["sandbox"] for r in ran} == {expected}


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_sample_scores(graded, key):
    report, expected = load_reports(graded["out"]).get(key), EXPECTED[key]
    assert report is not None, f"no report for {key}"
    if expected.get("needs_bwrap") and report["sandbox"] != "bwrap":
        pytest.skip("this cheat is only stopped by the bubblewrap sandbox (file-system isolation)")
    assert (report["score"], report["max_score"]) == (expected["score"], expected["max_score"]), (
        f"{key}: " + "; ".join(f"{t['test']}={t['status']}" for t in report["tests"] if t["status"] != "passed"))
