"""nbgrader's sanitising step without false tampering alarms.

Before it clears the hidden-test regions, ``nbgrader generate_assignment`` records
every locked cell of the *source* notebook in the gradebook, checksum included. A
released test cell (its ``### BEGIN HIDDEN TESTS`` region cleared) therefore never
has the recorded checksum, and stock ``OverwriteCells``, the step of ``nbgrader
autograde`` that puts the instructor's locked cells back, warns "Attribute
'checksum' for cell test_... has changed!" for every test cell of every
submission (39 for one student's eight notebooks), whether or not the student
touched it.

:class:`RestoreInstructorCells` compares a locked cell with what was *released*:
the recorded source with its hidden-test region cleared, as ``generate_assignment``
cleared it. An untouched cell gets the instructor's source back silently; a cell
the student changed (source, type, lock or points) is still reported by nbgrader's
own checks, naming the student and notebook, and replaced.

Either way a changed locked cell changes no score: the sandboxed grader
(``autograder/nbgrader_plugin.py``) takes the setup cells from the instructor
notebook and runs the hidden suites of ``autograder/hidden``, never the
notebook's test or setup cells. The warning is there for the TA, not for the grade.
"""
from __future__ import annotations

from nbformat.v4 import new_code_cell

from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells


class RestoreInstructorCells(OverwriteCells):
    """``OverwriteCells`` that warns only when a student really changed a locked cell."""

    def preprocess(self, nb, resources):
        self.student_id = resources["nbgrader"]["student"]
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None:
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                pass  # nbgrader's own check below reports it
            else:
                if source_cell.locked and cell.source == self.released_source(source_cell.source):
                    cell.source = source_cell.source  # as released: nothing to report
        return super().preprocess_cell(cell, resources, cell_index)

    def released_source(self, source: str) -> str:
        """``source`` with its hidden-test region cleared, by nbgrader's own ``ClearHiddenTests``
        (and its configured delimiters), as ``generate_assignment`` released it."""
        cell = new_code_cell(source, metadata={"nbgrader": {"grade": True}})
        cell, _ = ClearHiddenTests(parent=self).preprocess_cell(cell, {}, 0)
        return cell.source

    def report_change(self, name, attr, old, new) -> None:
        self.log.warning("%s/%s: the student changed the locked cell %s: attribute '%s' has changed! "
                         "(should be: %s, got: %s); the instructor's version is put back",
                         self.student_id, self.notebook_id, name, attr, old, new)
