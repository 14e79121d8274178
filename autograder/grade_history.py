"""Grade history: a re-grade that changes a score keeps the report it replaces, and says why.

:func:`keep_previous` runs in :func:`write_report` just before a report is replaced.
When the new report gives other points than the one on disk (its total, or any graded
item's), the old report is kept as ``<out>/<student>/history/<key>/<UTC time>.json``::

    {"changed_at", "cause", "causes", "student", "notebook", "old_score", "new_score",
     "max_score", "previous_graded_at", "previous": <the old report, as it was on disk>}

The cause is read off the two reports, most telling first:

* ``submission``: the notebook's bytes changed (a resubmission, or a file that can no
  longer be read);
* ``suite``: what grades changed: the grader, a hidden suite, a reference, an
  instructor notebook or the course secret (``suite_hash``, ``grader_version``);
* ``device``: graded on another device (cpu, cuda);
* ``retry``: the old report was not a grade (``outcome`` ``failed`` or ``rejected``)
  and nothing else changed;
* ``forced``: nothing changed: ``grade --force`` graded the same bytes again with the
  same grader, and the score still moved (a flaky test, or a statistical one).

``causes`` lists every one that applies. A report that does not change a score is
replaced without a trace, as before. History lives one folder below the student's, so
``merge``, the nbgrader import and the sandbox's view of the grades never take it for
a report; the class report (``class_report.py``) lists every change.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path

from .errors import IntakeError
from .files import read_regular_file, write_json_atomically
from .report import MAX_REPORT_BYTES, Report, read_report

HISTORY = "history"  # the folder below a student's report folder
CAUSES = ("submission", "suite", "device", "retry", "forced")
# Kept reports per notebook; a TA forcing re-grades in a loop does not fill the disk.
MAX_KEPT = 50
# A history entry is a report and a few fields.
MAX_ENTRY_BYTES = 2 * MAX_REPORT_BYTES + 4096


@dataclass(frozen=True)
class Change:
    """One re-grade that changed a score."""

    student: str
    notebook: str
    cause: str
    causes: tuple[str, ...]
    old_score: float
    new_score: float
    max_score: float
    changed_at: str          # ISO 8601, UTC
    previous_graded_at: str  # when the replaced report was written (its file's time), ISO 8601, UTC


def item_points(report: Report) -> dict[str, float]:
    """grade_id -> points of a report, rounded as the grader rounds a test's points."""
    points: dict[str, float] = {}
    for test in report.tests:
        points[test.grade_id] = points.get(test.grade_id, 0.0) + test.points
    return {grade_id: round(value, 4) for grade_id, value in points.items()}


def score_changed(old: Report, new: Report) -> bool:
    return round(old.score, 4) != round(new.score, 4) or item_points(old) != item_points(new)


def causes_of(old: Report, new: Report) -> tuple[str, ...]:
    """Why ``new`` replaced ``old`` (a subset of :data:`CAUSES`, in its order; never empty)."""
    found = []
    if old.submission_sha256 != new.submission_sha256:
        found.append("submission")
    if old.suite_hash != new.suite_hash or old.grader_version != new.grader_version:
        found.append("suite")
    if old.device != new.device:
        found.append("device")
    if old.outcome != "graded" and not found:
        found.append("retry")
    return tuple(found) or ("forced",)


def _utc(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.timezone.utc).isoformat(timespec="seconds")


def keep_previous(out: Path, student: str, key: str, new: Report) -> Path | None:
    """Keep ``out/<student>/<key>.json`` in the history if ``new`` changes its score; the path kept, or None."""
    path = Path(out) / student / f"{key}.json"
    try:
        graded_at = path.stat().st_mtime
        old = read_report(path)
    except (OSError, IntakeError, ValueError):  # no report, or a damaged one: no score to keep
        return None
    if not score_changed(old, new):
        return None
    now = dt.datetime.now(dt.timezone.utc)
    causes = causes_of(old, new)
    entry = {"changed_at": now.isoformat(timespec="seconds"), "cause": causes[0], "causes": list(causes),
             "student": student, "notebook": new.notebook, "old_score": old.score, "new_score": new.score,
             "max_score": new.max_score or old.max_score, "previous_graded_at": _utc(graded_at),
             "previous": old.to_json()}
    kept = write_json_atomically(Path(out) / student / HISTORY / key, now.strftime("%Y%m%dT%H%M%S.%fZ"), entry)
    _prune(kept.parent)
    return kept


def _prune(folder: Path) -> None:
    """Keep the newest :data:`MAX_KEPT` entries of one notebook (names sort by time)."""
    entries = sorted(folder.glob("*.json"))
    for stale in entries[:-MAX_KEPT]:
        stale.unlink(missing_ok=True)


def read_changes(grades: Path) -> tuple[list[Change], list[str]]:
    """Every kept change under ``grades`` (oldest first), and a warning per entry that could not be read."""
    changes, warnings = [], []
    for path in sorted(Path(grades).glob(f"*/{HISTORY}/*/*.json")):
        shown = path.relative_to(grades).as_posix()
        try:
            changes.append(_change(json.loads(read_regular_file(path, limit=MAX_ENTRY_BYTES))))
        except (IntakeError, ValueError) as err:
            warnings.append(f"{shown}: {err}")
    changes.sort(key=lambda c: (c.changed_at, c.student, c.notebook))
    return changes, warnings


def _change(data) -> Change:
    """A history entry read as untrusted input (it sits in a folder student code never reaches, but
    a damaged file must not stop the report)."""
    if type(data) is not dict:
        raise ValueError("not a history entry (a JSON object)")
    text = {"student", "notebook", "cause", "changed_at", "previous_graded_at"}
    numbers = {"old_score", "new_score", "max_score"}
    for name in text:
        if type(data.get(name)) is not str:
            raise ValueError(f"'{name}' is missing or not text")
    for name in numbers:
        if type(data.get(name)) not in (int, float):
            raise ValueError(f"'{name}' is missing or not a number")
    causes = data.get("causes", [data["cause"]])
    if type(causes) is not list or not all(c in CAUSES for c in causes) or data["cause"] not in CAUSES:
        raise ValueError(f"its cause is not one of {', '.join(CAUSES)}")
    return Change(data["student"], data["notebook"], data["cause"], tuple(causes), float(data["old_score"]),
                  float(data["new_score"]), float(data["max_score"]), data["changed_at"], data["previous_graded_at"])


def write_report(out: Path, student: str, key: str, report: Report) -> Path:
    """Write ``out/<student>/<key>.json`` atomically: a crash leaves the old file or the new one.

    A report that changes the score of the one it replaces keeps that one first, with the
    cause, in ``out/<student>/history/`` (:func:`keep_previous`)."""
    keep_previous(out, student, key, report)
    return write_json_atomically(Path(out) / student, key, report.to_json())
