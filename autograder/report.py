"""The report of one graded notebook: its shape, its size limits, and how it is written.

A report is a dict (JSON on disk)::

    student, assignment, notebook, outcome, score, max_score, sandbox, device, duration_s,
    tests: [{grade_id, test, status, points, max_points, message}], warnings: [str]

``outcome`` says what happened to the notebook: ``graded`` (whatever the score),
``rejected`` (it could not be taken in: a link, a misplaced or unusable file; the
student's to fix), or ``failed`` (the grader or the machine did not finish it:
grading it again may succeed). The CLI adds what it was graded by
(``autograder.version``) and the notebook's sha256.

Everything in a report that student code can influence (test messages quote
exception texts and returned values; warnings quote file and cell names) is
clipped here, in one place, so that a report has a bounded size whatever the
submission returns: a 10 MB string comes back as a few kilobytes.
"""
from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .notebook import ASSIGNMENT

STATUSES = ("passed", "failed", "error", "timeout", "forbidden", "missing")
OUTCOMES = ("graded", "rejected", "failed")
# A test message: the failure, the student's exception and a few traceback lines.
MAX_MESSAGE_CHARS = 2_000
MAX_WARNING_CHARS = 2_000
MAX_WARNINGS = 20
# The whole JSON report. A notebook has at most a few dozen hidden tests, so clipped
# messages keep an honest report far below this; the cap is the last line.
MAX_REPORT_BYTES = 256 * 1024
# When a report is still too large, its messages are cut to this many characters.
SHRUNK_MESSAGE_CHARS = 200
TABLE_NAME = "grades.csv"  # beside the students' report folders in the output folder


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` if short enough, else its start and end around a marker saying how much went."""
    text = str(text)
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    marker = f"\n[... {cut} characters cut ...]\n"
    keep = max(0, limit - len(marker))
    return text[: keep // 2 + keep % 2] + marker + text[len(text) - keep // 2:]


def problem_report(student: str, notebook: str, reason: str, *, device: str = "cpu",
                   outcome: str = "rejected") -> dict:
    """The report of a notebook that was not graded (score 0, the reason as a warning)."""
    assert outcome in OUTCOMES[1:], outcome
    return bounded({
        "student": student, "assignment": ASSIGNMENT, "notebook": notebook, "outcome": outcome,
        "score": 0.0, "max_score": 0.0, "sandbox": "none", "device": device,
        "duration_s": 0.0, "tests": [], "warnings": [reason],
    })


def bounded(report: dict) -> dict:
    """``report`` with every message and warning clipped and its JSON under ``MAX_REPORT_BYTES``."""
    for test in report.get("tests", []):
        test["message"] = clip(test.get("message", ""), MAX_MESSAGE_CHARS)
    warnings = [clip(w, MAX_WARNING_CHARS) for w in report.get("warnings", [])]
    if len(warnings) > MAX_WARNINGS:
        warnings = warnings[:MAX_WARNINGS] + [f"... and {len(warnings) - MAX_WARNINGS} more warnings"]
    report["warnings"] = warnings
    if len(json.dumps(report)) > MAX_REPORT_BYTES:
        for test in report.get("tests", []):
            test["message"] = clip(test["message"], SHRUNK_MESSAGE_CHARS)
        report["warnings"] = [clip(w, SHRUNK_MESSAGE_CHARS) for w in report["warnings"]]
    return report


def read_report(path: Path) -> dict:
    """A report written earlier, read as untrusted input: a regular file of bounded
    size holding a JSON object, clipped like a new one. Raises ``ValueError`` (bad
    JSON, not an object) or ``intake.IntakeError`` (no such regular file)."""
    from .intake import read_regular_file  # intake imports this module

    report = json.loads(read_regular_file(path, limit=2 * MAX_REPORT_BYTES))
    if type(report) is not dict:
        raise ValueError(f"{Path(path).name} holds no report (a JSON object)")
    return bounded(report)


def write_report(out: Path, student: str, key: str, report: dict) -> Path:
    """Write ``out/<student>/<key>.json`` atomically: a crash leaves the old file or the new one."""
    folder = out / student
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{key}.json"
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{key}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(report, indent=2) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)  # as an ordinary file: mkstemp's are private
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def to_gradescope(report: dict) -> dict:
    """The report as Gradescope's autograder ``results.json``: one test per hidden test."""
    return {
        "score": report["score"],
        "output": "\n".join(report.get("warnings", [])),
        "tests": [{"name": f"{t['grade_id']}: {t['test']}", "score": t["points"], "max_score": t["max_points"],
                   "status": "passed" if t["status"] == "passed" else "failed",
                   "output": f"{t['status']}: {t['message']}" if t["message"] else t["status"]}
                  for t in report["tests"]],
    }


def write_gradescope(out: Path, student: str, key: str, report: dict) -> Path:
    """``out/<student>/gradescope/<key>.json`` (a folder below the student's: never read as a report)."""
    return write_report(out / student, "gradescope", key, to_gradescope(report))


def spreadsheet_cell(value) -> str:
    """A CSV cell that a spreadsheet will not run as a formula (OWASP's CSV injection rule)."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def write_table(reports: Iterable[dict], out: Path) -> Path:
    """``out/grades.csv``: one row per student and notebook, with the count of each status."""
    table = out / TABLE_NAME
    rows = sorted(reports, key=lambda r: (r["student"], r["notebook"]))
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "notebook", "outcome", "score", "max_score", "sandbox", "device",
                         "duration_s", *STATUSES])
        for r in rows:
            counts = [sum(1 for t in r["tests"] if t["status"] == s) for s in STATUSES]
            writer.writerow([spreadsheet_cell(r["student"]), spreadsheet_cell(r["notebook"]),
                             r.get("outcome", "graded"), r["score"], r["max_score"], r["sandbox"], r["device"],
                             r["duration_s"], *counts])
    return table


def print_table(reports: Iterable[dict]) -> None:
    rows = [(r["student"], r["notebook"], f'{r["score"]:g}/{r["max_score"]:g}', r["sandbox"],
             f'{r["duration_s"]:.1f}s', "; ".join(r.get("warnings", []))[:70].replace("\n", " "))
            for r in sorted(reports, key=lambda r: (r["student"], r["notebook"]))]
    header = ("student", "notebook", "score", "sandbox", "time", "notes")
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
