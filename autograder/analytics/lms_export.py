"""``python -m autograder export``: the class's grades as a Canvas or Moodle gradebook import.

**The mapping** from submission folders to LMS users is a CSV file the TA keeps (its
first row names the columns; one row per student)::

    student,name,section,canvas_id,sis_user_id,sis_login_id,username,email,idnumber

``student`` (required) is the folder name under ``submitted/``, as in the reports.
The rest name the student in the LMS; give the ones you have:

* Canvas matches a row by ``canvas_id`` (the numeric user ID of Canvas's own gradebook
  export), else ``sis_user_id``, else ``sis_login_id``: each row needs one of them.
  ``name`` and ``section`` are shown in Canvas's import preview.
* Moodle's import maps one column to its users: ``idnumber`` ("ID number"),
  ``username`` or ``email`` ("Email address"). Every column of these the mapping has is
  written; each row needs the first of them (in that order), which is the one to
  choose as "Map from" in Moodle's import.

**Canvas** (``--format canvas``, Canvas's gradebook import, *Grades > Import*): the
header ``Student, ID, SIS User ID, SIS Login ID, Section`` and one column per
notebook and one for the total (``week6 <notebook>``, ``week6 total``), then a
``Points Possible`` row, which Canvas reads as the points of new assignments. A column
whose title matches an assignment of the course updates it; any other creates one.
``--columns notebooks`` or ``--columns total`` writes only those.

**Moodle** (``--format moodle``, *Grades > Import > CSV file*): the identity columns,
then the same grade columns; map each to a grade item (or "new grade item") in the
import form.

Scores are the auto-graded points of the grader's reports (``--nbgrader``: nbgrader's
gradebook, written answers included), rounded to 2 decimals as Canvas shows them; a
notebook a student did not hand in counts 0; a student of the mapping with no report at
all gets empty cells (both LMS leave such a grade as it was). The export refuses, with
the fix, a student who has reports but no mapping row, and a notebook the grader could
not finish (its score is not known). Every text cell goes through
``report.spreadsheet_cell``; an LMS id that a spreadsheet would read as a formula is
refused, since a quoted copy of it would no longer match.
"""
from __future__ import annotations

import csv
import io
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigurationError, IntakeError
from ..files import read_regular_file
from ..paths import ASSIGNMENT
from ..report import spreadsheet_cell
from .results import ClassResults

FORMATS = ("canvas", "moodle")
COLUMN_CHOICES = ("both", "notebooks", "total")
CANVAS_IDS = ("canvas_id", "sis_user_id", "sis_login_id")
MOODLE_IDS = ("idnumber", "username", "email")
MOODLE_LABELS = {"idnumber": "ID number", "username": "Username", "email": "Email address"}
MAPPING_COLUMNS = ("student", "name", "section", *CANVAS_IDS, *MOODLE_IDS)
MAX_MAPPING_BYTES = 8 * 1024 * 1024
MAX_VALUE_CHARS = 256
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
EXAMPLES_SHOWN = 10


@dataclass(frozen=True)
class Person:
    """One row of the mapping: a submission folder and who that is in the LMS."""

    student: str
    fields: dict[str, str]

    def get(self, name: str) -> str:
        return self.fields.get(name, "")


def read_mapping(path: Path, format: str) -> tuple[list[Person], list[str]]:
    """The mapping file's rows, checked for ``format``; ``ConfigurationError`` names each problem and the fix."""
    try:
        text = read_regular_file(path, limit=MAX_MAPPING_BYTES).decode("utf-8-sig")  # a BOM from Excel is fine
    except (IntakeError, UnicodeDecodeError) as err:
        raise ConfigurationError(f"the mapping file {path}: {err}; save it as UTF-8 CSV") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [name.strip().lower() for name in reader.fieldnames or []]
    unknown = [name for name in header if name not in MAPPING_COLUMNS]
    if "student" not in header or unknown:
        raise ConfigurationError(
            f"the mapping file {path} must have a first row naming its columns: 'student' (the folder name under "
            f"submitted/) and the LMS's ids, from {', '.join(MAPPING_COLUMNS[1:])}"
            + ("; 'student' is missing" if "student" not in header else "")
            + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    ids = CANVAS_IDS if format == "canvas" else tuple(name for name in MOODLE_IDS if name in header)
    if not ids or not set(ids) & set(header):
        wanted = CANVAS_IDS if format == "canvas" else MOODLE_IDS
        raise ConfigurationError(f"the mapping file {path} has no column that {format.capitalize()} matches students "
                                 f"by: add one of {', '.join(wanted)}")
    people, problems, seen, taken = [], [], {}, {}
    for line, row in enumerate(reader, start=2):
        values = {name.strip().lower(): (value or "").strip() for name, value in row.items() if name is not None}
        if None in row or not any(values.values()):
            if None in row:
                problems.append(f"line {line}: more cells than columns")
            continue
        for name, value in values.items():
            if len(value) > MAX_VALUE_CHARS or any(unicodedata.category(ch).startswith("C") for ch in value):
                problems.append(f"line {line}: '{name}' is longer than {MAX_VALUE_CHARS} characters or holds "
                                "control characters")
        person = Person(values.get("student", ""), {k: v for k, v in values.items() if k != "student" and v})
        key = [name for name in ids if person.get(name)]
        if not person.student:
            problems.append(f"line {line}: no student (the folder name under submitted/)")
        elif person.student in seen:
            problems.append(f"line {line}: '{person.student}' is also on line {seen[person.student]}")
        if format == "canvas" and not key:
            problems.append(f"line {line}: '{person.student}' has none of {', '.join(CANVAS_IDS)}")
        if format == "moodle" and not person.get(ids[0]):
            problems.append(f"line {line}: '{person.student}' has no {ids[0]}, the column Moodle maps users by")
        if format == "canvas" and person.get("canvas_id") and not person.get("canvas_id").isdigit():
            problems.append(f"line {line}: canvas_id '{person.get('canvas_id')}' is not Canvas's numeric user ID")
        for name in (*CANVAS_IDS, *MOODLE_IDS):
            value = person.get(name)
            if value.startswith(FORMULA_START):
                problems.append(f"line {line}: {name} '{value}' starts like a spreadsheet formula")
            if value and (name, value) in taken:
                problems.append(f"line {line}: {name} '{value}' is also on line {taken[(name, value)]}")
            elif value:
                taken[(name, value)] = line
        seen.setdefault(person.student, line)
        people.append(person)
    if problems:
        shown = problems[:EXAMPLES_SHOWN] + ([f"... and {len(problems) - EXAMPLES_SHOWN} more"]
                                             if len(problems) > EXAMPLES_SHOWN else [])
        raise ConfigurationError(f"the mapping file {path} has problems; fix them and export again:\n  "
                                 + "\n  ".join(shown))
    return people, list(ids)


def class_scores(results: ClassResults) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """(student -> notebook stem -> points, notebook stem -> points possible), as exported.

    From nbgrader, a notebook's points include its written answers'."""
    failed = [f"{r.student}/{r.notebook}" for r in results.notebook_reports() if r.outcome == "failed"]
    if failed:
        shown = ", ".join(failed[:EXAMPLES_SHOWN]) + (" ..." if len(failed) > EXAMPLES_SHOWN else "")
        raise ConfigurationError(f"{len(failed)} notebook(s) have no grade because grading did not finish ({shown}); "
                                 "run the same grade command again, then export")
    nbgrader = results.source == "nbgrader"
    possible = {nb.stem: nb.points if nbgrader else nb.auto_points for nb in results.course.notebooks}
    scores: dict[str, dict[str, float]] = {student: {} for student in results.students}
    for report in results.notebook_reports():
        stem = results.stem(report)
        scores[report.student][stem] = report.score + results.written.get((report.student, stem), 0.0)
    return scores, possible


def _points(value: float) -> str:
    text = f"{round(value, 2):.2f}"
    return text.rstrip("0").rstrip(".")


def export(results: ClassResults, mapping: Path, format: str, out: Path,
           columns: str = "both") -> tuple[Path, list[str]]:
    """Write the import file for ``format``; (its path, notes for the TA)."""
    if format not in FORMATS:
        raise ConfigurationError(f"unknown format '{format}' (one of {', '.join(FORMATS)})")
    people, ids = read_mapping(mapping, format)
    scores, possible = class_scores(results)
    mapped = {p.student for p in people}
    unmapped = sorted(set(scores) - mapped)
    if unmapped:
        shown = ", ".join(unmapped[:EXAMPLES_SHOWN]) + (" ..." if len(unmapped) > EXAMPLES_SHOWN else "")
        raise ConfigurationError(f"{len(unmapped)} student(s) with reports are not in {mapping} ({shown}): add a row "
                                 "for each (their folder name under submitted/ and their LMS id), then export again")
    stems = [nb.stem for nb in results.course.notebooks]
    grade_columns = ([f"{ASSIGNMENT} {stem}" for stem in stems] if columns in ("both", "notebooks") else []) + (
        [f"{ASSIGNMENT} total"] if columns in ("both", "total") else [])

    def grades(person: Person) -> list[str]:
        if person.student not in scores:
            return [""] * len(grade_columns)
        by_notebook = scores[person.student]
        values = [by_notebook.get(stem, 0.0) for stem in stems] if columns in ("both", "notebooks") else []
        return [_points(v) for v in values] + ([_points(sum(by_notebook.values()))] if columns != "notebooks" else [])

    maxima = ([_points(possible[stem]) for stem in stems] if columns in ("both", "notebooks") else []) + (
        [_points(sum(possible.values()))] if columns != "notebooks" else [])
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        if format == "canvas":
            writer.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *grade_columns])
            writer.writerow(["Points Possible", "", "", "", "", *maxima])
            for person in people:
                writer.writerow([spreadsheet_cell(person.get(name)) for name in
                                 ("name", "canvas_id", "sis_user_id", "sis_login_id", "section")] + grades(person))
        else:
            writer.writerow([MOODLE_LABELS[name] for name in ids] + grade_columns)
            for person in people:
                writer.writerow([spreadsheet_cell(person.get(name)) for name in ids] + grades(person))
    absent = sorted(mapped - set(scores))
    notes = [f"{len(people)} student(s) written to {out}"]
    if absent:
        notes.append(f"{len(absent)} student(s) of the mapping have no report; their cells are empty: "
                     + ", ".join(absent[:EXAMPLES_SHOWN]) + (" ..." if len(absent) > EXAMPLES_SHOWN else ""))
    if format == "moodle":
        notes.append(f"in Moodle's import, map from '{MOODLE_LABELS[ids[0]]}' to the user field of the same name")
    if results.source == "nbgrader" and results.ungraded_written:
        notes.append(f"{results.ungraded_written} written answer(s) are not graded yet and count 0; grade them in "
                     "the formgrader and export again")
    return out, notes
