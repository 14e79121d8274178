"""``nbgrader export`` with a score per notebook, not only the assignment's total.

:class:`NotebookScoresExport` (``c.ExportApp.plugin_class`` in ``nbgrader_config.py``)
writes the columns of nbgrader's ``CsvExportPlugin``, with the same values, then
``<notebook>_score`` and ``<notebook>_max_score`` for each notebook, in the
course's order (Part A, Part B, then the exercises: the order of the course model,
``autograder/course.py``, which the handout's grading map follows too). A notebook's score is its raw score in the
gradebook (automatic and manual points, before any late penalty, which nbgrader
charges to the whole assignment); a student who did not submit gets 0, as in
nbgrader's own columns.

Unlike nbgrader's plugin, it writes through the ``csv`` module (a name with a comma
stays in its column) and neutralises cells that a spreadsheet would run as a
formula, like the grader's own ``grades.csv``.
"""
from __future__ import annotations

import csv

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins.export import CsvExportPlugin

from ..course import load_course
from ..report import spreadsheet_cell

# nbgrader's CsvExportPlugin columns, in its order; the free-text ones are neutralised.
COLUMNS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
           "raw_score", "late_submission_penalty", "score", "max_score"]
TEXT_COLUMNS = {"assignment", "student_id", "last_name", "first_name", "email"}


def notebook_columns(names) -> list[str]:
    """The notebooks ``names`` in the course's order (autograder/course.py), unknown ones last by name."""
    known = [name for name in load_course().stems if name in names]
    return known + sorted(set(names) - set(known))


def _text(value) -> str:
    return "" if value is None else str(value)


class NotebookScoresExport(CsvExportPlugin):
    """nbgrader's CSV export plus one score and one maximum column per notebook."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        students = [str(s) for s in self.student]
        wanted = [str(a) for a in self.assignment]
        assignments = [a for a in gradebook.assignments if not wanted or a.name in wanted]
        unknown = sorted(set(wanted) - {a.name for a in assignments})
        if unknown:
            raise ValueError(f"no assignment called {', '.join(unknown)} in the gradebook "
                             f"(known: {', '.join(sorted(a.name for a in gradebook.assignments))})")
        notebooks = notebook_columns({nb.name for a in assignments for nb in a.notebooks})
        unlisted = [name for name in notebooks if name not in load_course().stems]
        if unlisted:
            self.log.warning("notebooks not in the course's order (autograder/course.py), "
                             "exported last: %s", ", ".join(unlisted))
        self.log.info("Exporting grades to %s (%d notebooks)", dest, len(notebooks))

        with open(dest, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS + [f"{name}_{what}" for name in notebooks for what in ("score", "max_score")])
            for assignment in assignments:
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    writer.writerow(self._row(gradebook, assignment, student, notebooks))

    def _row(self, gradebook: Gradebook, assignment, student, notebooks: list[str]) -> list[str]:
        row = {"assignment": assignment.name, "duedate": assignment.duedate, "student_id": student.id,
               "last_name": student.last_name, "first_name": student.first_name, "email": student.email,
               "max_score": assignment.max_score}
        scores = {}
        try:
            submission = gradebook.find_submission(assignment.name, student.id)
        except MissingEntry:  # nothing submitted: zero, as nbgrader's own plugin says
            row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
        else:
            penalty = submission.late_submission_penalty
            row.update(timestamp=submission.timestamp, raw_score=submission.score, late_submission_penalty=penalty,
                       score=max(0.0, submission.score - penalty))
            scores = {nb.notebook.name: nb.score for nb in submission.notebooks}
        maxima = {nb.name: nb.max_score for nb in assignment.notebooks}
        cells = [spreadsheet_cell(_text(row[key])) if key in TEXT_COLUMNS else _text(row[key]) for key in COLUMNS]
        for name in notebooks:
            if name in maxima:
                cells += [_text(scores.get(name, 0.0)), _text(maxima[name])]
            else:  # a notebook of another exported assignment
                cells += ["", ""]
        return cells
