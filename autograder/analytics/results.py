"""A class's results, as the class report and the LMS export read them.

:class:`ClassResults` holds one :class:`~autograder.report.Report` per (student,
notebook) whatever graded it: :func:`load_grades` reads the reports that ``grade``
wrote (``<grades>/<student>/<key>.json``, the files ``merge`` reads), and
``nbgrader_results.load_gradebook`` builds the same from nbgrader's gradebook, so every
figure is computed once, by one code path, for both.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..course import Course, load_course
from ..errors import ConfigurationError, IntakeError
from ..report import Report, read_report


@dataclass
class ClassResults:
    """The reports of a class, and what the report should say about where they came from."""

    source: str                    # "grader" (a grades folder) or "nbgrader" (a gradebook)
    where: str                     # the folder or database read, as the page shows it
    reports: list[Report]
    course: Course
    timing: bool = True            # nbgrader's gradebook records no grading time
    keys: dict[int, str] = field(default_factory=dict)  # id(report) -> its report file's name, when read from one
    # Written answers' points per (student, notebook stem) and how many still await a TA (nbgrader only).
    written: dict[tuple[str, str], float] = field(default_factory=dict)
    ungraded_written: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def students(self) -> list[str]:
        return sorted({r.student for r in self.reports})

    def stem(self, report: Report) -> str:
        """The course notebook a report is about; '' for a file that is not one (misplaced, unusable)."""
        stem = report.notebook.removesuffix(".ipynb")  # a misplaced file's name holds its folder: no stem
        return stem if report.notebook.endswith(".ipynb") and stem in self.course.stems else ""

    def notebook_reports(self) -> list[Report]:
        """Reports of the course's notebooks (one per student and notebook)."""
        return [r for r in self.reports if self.stem(r)]

    def scores(self) -> dict[str, dict[str, float]]:
        """student -> notebook stem -> auto-graded score. A notebook a student did not hand in is absent."""
        table: dict[str, dict[str, float]] = {student: {} for student in self.students}
        for report in self.notebook_reports():
            table[report.student][self.stem(report)] = report.score
        return table


def load_grades(grades: Path, course: Course | None = None) -> ClassResults:
    """The reports in ``grades`` (a ``grade`` output folder, or a folder ``merge`` reads)."""
    grades = Path(grades)
    if not grades.is_dir():
        raise ConfigurationError(f"{grades} is not a folder of reports (the --out folder of "
                                 "`python -m autograder grade`)")
    results = ClassResults("grader", str(grades), [], course or load_course())
    for path in sorted(grades.glob("*/*.json")):
        try:
            report = read_report(path)
        except (IntakeError, ValueError) as err:
            results.warnings.append(f"skipped {path.relative_to(grades).as_posix()}: {err}")
            continue
        if report.student != path.parent.name:
            results.warnings.append(f"skipped {path.relative_to(grades).as_posix()}: it is the report of "
                                    f"'{report.student}', in another student's folder")
            continue
        results.reports.append(report)
        results.keys[id(report)] = path.stem
    if not results.reports:
        raise ConfigurationError(f"{grades} holds no reports; grade first: "
                                 f"python -m autograder grade submitted/ --out {grades}")
    return results
