"""The report of one graded notebook: one type, its size limits, and every rendering of it.

:class:`Report` is what grading one notebook produces, whatever happened: the JSON
file on disk (:meth:`Report.to_json`, :func:`write_report`, :func:`read_report`),
the class table (:func:`write_table`), the terminal table (:func:`print_table`),
Gradescope's ``results.json`` (:func:`to_gradescope`) and nbgrader's gradebook (the
plugin) all render it, and the path of a job that failed builds one too
(:meth:`Report.problem`). On disk::

    student, assignment, outcome, notebook, score, max_score, sandbox, device, duration_s,
    tests: [{grade_id, test, status, points, max_points, message[, detail]}], warnings: [str],
    [printed: what the notebook recorded for the written answers that quote numbers],
    and what graded it: schema_version, grader_version, suite_hash, submission_sha256,
    grader_peak_rss_mib

``printed`` (``autograder/printed.py``) is the course staff's: the formgrader shows it
beside those answers and the class report lists what in it disagrees; it is absent for a
notebook without such answers, and from reports of schema 2 and before.

``outcome`` says what happened to the notebook: ``graded`` (whatever the score),
``rejected`` (it could not be taken in: a link, a misplaced or unusable file; the
student's to fix), or ``failed`` (the grader or the machine did not finish it:
grading it again may succeed).

A test's ``message`` is what the student may read: for a hidden or drawn case it never
quotes the expected value (``autograder.suite``). ``detail``, written only where it says
more, is the course staff's view of the same failure, with the values the check compared:
the report on disk and the formgrader show it; Gradescope's ``results.json``, which the
student sees, and nbgrader's feedback (``autograder.nbgrader.feedback_detail``) do not. A report
of schema 1, from before ``detail``, reads as one whose tests have none.

Everything in a report that student code can influence (test messages quote
exception texts and returned values; warnings quote file and cell names) is
clipped here, in one place, so that a report has a bounded size whatever the
submission returns: a 10 MB string comes back as a few kilobytes. A report read
back from disk is untrusted input: its fields are type-checked.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .files import read_regular_file, write_json_atomically
from .paths import ASSIGNMENT
from .printed import Printed

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


@dataclass
class TestResult:
    """One hidden test (or one device variant of it): its status and its share of the cell's points."""

    __test__ = False  # not a pytest test class

    grade_id: str
    test: str
    status: str
    points: float
    max_points: float
    message: str  # what the student may read
    detail: str = ""  # the course staff's view, when it says more than the message (never the student's)


@dataclass
class Report:
    """The report of one notebook (see the module docstring for the fields)."""

    student: str
    notebook: str
    outcome: str = "graded"
    score: float = 0.0
    max_score: float = 0.0
    sandbox: str = "none"
    device: str = "cpu"
    duration_s: float = 0.0
    tests: list[TestResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    assignment: str = ASSIGNMENT
    printed: Printed | None = None  # what the notebook recorded for the answers that quote numbers
    # What graded it (set by the job and the CLI; None until then).
    schema_version: int | None = None
    grader_version: str | None = None
    suite_hash: str | None = None
    submission_sha256: str | None = None
    grader_peak_rss_mib: float | None = None

    @classmethod
    def problem(cls, student: str, notebook: str, reason: str, *, device: str = "cpu",
                outcome: str = "rejected") -> Report:
        """The report of a notebook that was not graded (score 0, the reason as a warning)."""
        assert outcome in OUTCOMES[1:], outcome
        return cls(student, notebook, outcome=outcome, device=device, warnings=[reason]).bounded()

    def status_counts(self) -> list[int]:
        """How many tests ended in each of :data:`STATUSES`."""
        return [sum(1 for t in self.tests if t.status == status) for status in STATUSES]

    def bounded(self) -> Report:
        """Clip every message and warning, so the JSON stays under ``MAX_REPORT_BYTES``; returns self."""
        for test in self.tests:
            test.message, test.detail = clip(test.message, MAX_MESSAGE_CHARS), clip(test.detail, MAX_MESSAGE_CHARS)
        warnings = [clip(w, MAX_WARNING_CHARS) for w in self.warnings]
        if len(warnings) > MAX_WARNINGS:
            warnings = warnings[:MAX_WARNINGS] + [f"... and {len(warnings) - MAX_WARNINGS} more warnings"]
        self.warnings = warnings
        if len(json.dumps(self._fields())) > MAX_REPORT_BYTES:
            for test in self.tests:
                test.message, test.detail = clip(test.message, SHRUNK_MESSAGE_CHARS), clip(test.detail,
                                                                                          SHRUNK_MESSAGE_CHARS)
            self.warnings = [clip(w, SHRUNK_MESSAGE_CHARS) for w in self.warnings]
        return self

    def _fields(self) -> dict:
        data = {"student": self.student, "assignment": self.assignment, "outcome": self.outcome,
                "notebook": self.notebook, "score": self.score, "max_score": self.max_score,
                "sandbox": self.sandbox, "device": self.device, "duration_s": self.duration_s,
                "tests": [_test_fields(t) for t in self.tests], "warnings": list(self.warnings)}
        if self.printed is not None:
            data["printed"] = self.printed.to_json()
        for name in ("schema_version", "grader_version", "suite_hash", "submission_sha256", "grader_peak_rss_mib"):
            if getattr(self, name) is not None:
                data[name] = getattr(self, name)
        return data

    def to_json(self) -> dict:
        """The report as the JSON object written to disk (clipped first)."""
        return self.bounded()._fields()

    @classmethod
    def from_json(cls, data) -> Report:
        """A report from JSON that may have been tampered with; ``ValueError`` names the bad field."""
        if type(data) is not dict:
            raise ValueError("it holds no report (a JSON object)")
        values = {}
        for spec in dataclasses.fields(cls):
            if spec.name not in data:
                if spec.name in ("student", "notebook"):
                    raise ValueError(f"the report has no '{spec.name}'")
                continue
            values[spec.name] = _checked(spec.name, data[spec.name])
        return cls(**values).bounded()


_STRINGS = {"student", "notebook", "outcome", "sandbox", "device", "assignment", "grader_version",
            "suite_hash", "submission_sha256"}
_NUMBERS = {"score", "max_score", "duration_s", "grader_peak_rss_mib"}
_TEST_FIELDS = {"grade_id": str, "test": str, "status": str, "message": str, "points": float, "max_points": float}
# Fields a test may leave out (reports of schema 1 have none of them).
_OPTIONAL_TEST_FIELDS = {"detail": str}


def _test_fields(test: TestResult) -> dict:
    """A test as JSON: ``detail`` only where there is one."""
    return {name: value for name, value in dataclasses.asdict(test).items()
            if name not in _OPTIONAL_TEST_FIELDS or value}


def _number(value) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _checked(name: str, value):
    """``value`` of report field ``name`` if it has the field's type, else ``ValueError``."""
    if value is None and name in ("schema_version", "grader_version", "suite_hash", "submission_sha256",
                                  "grader_peak_rss_mib", "printed"):
        return None
    if name == "printed":
        return Printed.from_json(value)
    if name in _STRINGS and type(value) is str:
        return value
    if name in _NUMBERS and _number(value):
        return float(value)
    if name == "schema_version" and type(value) is int:
        return value
    if name == "warnings" and type(value) is list and all(type(w) is str for w in value):
        return list(value)
    if name == "tests" and type(value) is list:
        tests = []
        for entry in value:
            if type(entry) is not dict or not set(_TEST_FIELDS) <= set(entry) <= {*_TEST_FIELDS,
                                                                                  *_OPTIONAL_TEST_FIELDS}:
                raise ValueError(f"a test of the report does not have exactly the fields {sorted(_TEST_FIELDS)} "
                                 f"(and optionally {sorted(_OPTIONAL_TEST_FIELDS)})")
            for key, kind in {**_TEST_FIELDS, **_OPTIONAL_TEST_FIELDS}.items():
                if key in entry and not (_number(entry[key]) if kind is float else type(entry[key]) is str):
                    raise ValueError(f"a test's '{key}' is not a {'number' if kind is float else 'string'}")
            tests.append(TestResult(**{k: float(v) if _TEST_FIELDS.get(k) is float else v for k, v in entry.items()}))
        return tests
    raise ValueError(f"the report's '{name}' has the wrong type ({type(value).__name__})")


def clip(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` if short enough, else its start and end around a marker saying how much went."""
    text = str(text)
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    marker = f"\n[... {cut} characters cut ...]\n"
    keep = max(0, limit - len(marker))
    return text[: keep // 2 + keep % 2] + marker + text[len(text) - keep // 2:]


def read_report(path: Path) -> Report:
    """A report written earlier, read as untrusted input: a regular file of bounded
    size holding a well-typed report, clipped like a new one. Raises ``ValueError``
    (bad JSON, a missing or mistyped field) or ``errors.IntakeError`` (no such
    regular file)."""
    try:
        return Report.from_json(json.loads(read_regular_file(path, limit=2 * MAX_REPORT_BYTES)))
    except ValueError as err:
        raise ValueError(f"{Path(path).name}: {err}") from None


def to_gradescope(report: Report) -> dict:
    """The report as Gradescope's autograder ``results.json``: one test per hidden test, with the
    message a student may read (never the staff's ``detail``: students see this file)."""
    return {
        "score": report.score,
        "output": "\n".join(report.warnings),
        "tests": [{"name": f"{t.grade_id}: {t.test}", "score": t.points, "max_score": t.max_points,
                   "status": "passed" if t.status == "passed" else "failed",
                   "output": f"{t.status}: {t.message}" if t.message else t.status}
                  for t in report.tests],
    }


def write_gradescope(out: Path, student: str, key: str, report: Report) -> Path:
    """``out/<student>/gradescope/<key>.json`` (a folder below the student's: never read as a report)."""
    return write_json_atomically(out / student / "gradescope", key, to_gradescope(report))


def spreadsheet_cell(value) -> str:
    """A CSV cell that a spreadsheet will not run as a formula (OWASP's CSV injection rule)."""
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def write_table(reports: Iterable[Report], out: Path) -> Path:
    """``out/grades.csv``: one row per student and notebook, with the count of each status."""
    table = out / TABLE_NAME
    rows = sorted(reports, key=lambda r: (r.student, r.notebook))
    with table.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "notebook", "outcome", "score", "max_score", "sandbox", "device",
                         "duration_s", *STATUSES])
        for r in rows:
            writer.writerow([spreadsheet_cell(r.student), spreadsheet_cell(r.notebook), r.outcome, r.score,
                             r.max_score, r.sandbox, r.device, r.duration_s, *r.status_counts()])
    return table


def print_table(reports: Iterable[Report]) -> None:
    rows = [(r.student, r.notebook, f"{r.score:g}/{r.max_score:g}", r.sandbox,
             f"{r.duration_s:.1f}s", "; ".join(r.warnings)[:70].replace("\n", " "))
            for r in sorted(reports, key=lambda r: (r.student, r.notebook))]
    header = ("student", "notebook", "score", "sandbox", "time", "notes")
    widths = [max(len(str(x)) for x in column) for column in zip(header, *rows)]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())
