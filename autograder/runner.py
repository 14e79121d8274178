"""Run one grading job in its own process, and never let it take the class down.

Each submission is graded by ``python -m autograder.grading`` in a fresh process
(which in turn starts the sandboxed worker). Whatever happens there, a crash of
the grader process, a hang past the job's deadline, a report that does not
parse, the caller gets a report back, with the reason in ``warnings``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from .notebook import REPO

# The sandbox hides the whole repository (solutions, hidden suites, reference
# implementations, git history, sample submissions, outputs) and exposes back
# only what student code may import.
DEFAULT_HIDDEN = [str(REPO)]
JOB_TIMEOUT = 900.0


def failed_report(notebook: Path, student: str, device: str, reason: str) -> dict:
    return {
        "student": student, "assignment": "week6", "notebook": Path(notebook).name,
        "score": 0.0, "max_score": 0.0, "sandbox": "none", "device": device,
        "duration_s": 0.0, "tests": [], "warnings": [reason],
    }


def grade_in_subprocess(notebook: Path, *, student: str, device: str = "auto",
                        hidden: list[str] | None = None, timeout: float = JOB_TIMEOUT) -> dict:
    """Grade ``notebook`` in a child process and return its report."""
    with tempfile.TemporaryDirectory(prefix="autograder-job-") as scratch:
        out = Path(scratch) / "report.json"
        command = [sys.executable, "-m", "autograder.grading", str(notebook),
                   "--student", student, "--out", str(out), "--device", device]
        for path in hidden if hidden is not None else DEFAULT_HIDDEN:
            command += ["--hide", str(path)]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   start_new_session=True, cwd=str(REPO), env=dict(os.environ))
        try:
            log, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            return failed_report(notebook, student, device,
                                 f"grading did not finish within {timeout:.0f} s and was stopped")
        if process.returncode != 0 or not out.is_file():
            tail = log.decode(errors="replace").strip().splitlines()[-5:]
            return failed_report(notebook, student, device,
                                 f"the grader process failed (exit {process.returncode}): " + " | ".join(tail))
        try:
            return json.loads(out.read_text())
        except json.JSONDecodeError as err:
            return failed_report(notebook, student, device, f"unreadable grading report: {err}")
