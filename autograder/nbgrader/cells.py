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
(``autograder/nbgrader/plugin.py``) takes the setup cells from the instructor
notebook and runs the hidden suites of ``autograder/hidden``, never the
notebook's test or setup cells. The warning is there for the TA, not for the grade.

Three more changes keep one student's cells from failing that student's notebook, or
the class run, in nbgrader's later steps:

* a cell whose ``grade_id`` this notebook does not have (a cell pasted from another
  notebook) loses its nbgrader metadata; stock ``OverwriteCells`` removed only the id,
  leaving a graded cell without one, which ``CheckCellMetadata`` refuses;
* a cell of this notebook gets its role back from the gradebook (grade, solution, locked,
  task, points, schema version 3, nothing nbgrader's schema does not know), so that metadata
  nbgrader would refuse (an old schema version stops ``nbgrader autograde`` for the whole
  class) or a role the student changed cannot make the checksums disagree;
* every graded cell the submission lacks (deleted, or dropped by
  ``nbgrader.intake.ScreenCells``) is put back from the gradebook after the cell that
  precedes it in the instructor's notebook, under a notice naming it: a test cell so that
  it shows and records the grader's points, a written answer as released, which scores 0.

Each change is named in the log ("<student>/<notebook>: ...") and, for a cell put back,
in the notebook the formgrader and the feedback show.
"""
from __future__ import annotations

import html

from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell
from nbgrader.api import MissingEntry
from nbgrader.nbgraderformat import MetadataValidator, SchemaTooNewError, SchemaTooOldError, ValidationError
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells
from traitlets import Bool

from ..intake import display

# What a notice cell starts with; the tests and a TA's search find it by this.
NOTICE = "**Not graded as submitted.**"
SCHEMA_VERSION = MetadataValidator.schema_version


def notice_cell(text: str):
    """A markdown cell, without nbgrader metadata, that says what was not graded and why.

    ``text`` is escaped: it may quote a file or limit, never a student's markup."""
    return new_markdown_cell(f"{NOTICE} {html.escape(text, quote=False)}")


def instructor_role(name: str, notebook) -> dict:
    """The nbgrader role of the cell ``name`` of the gradebook's ``notebook``, as
    ``generate_assignment`` released it: its flags, and its points if it is graded."""
    graded = {cell.name: cell for cell in (*notebook.grade_cells, *notebook.task_cells)}
    source = next(cell for cell in notebook.source_cells if cell.name == name)
    role = {"grade": any(cell.name == name for cell in notebook.grade_cells),
            "solution": any(cell.name == name for cell in notebook.solution_cells),
            "locked": bool(source.locked),
            "task": any(cell.name == name for cell in notebook.task_cells)}
    if name in graded:
        role["points"] = float(graded[name].max_score)
    return role


def instructor_cell(source_cell, notebook):
    """The cell ``source_cell`` of the gradebook's ``notebook`` as released: its source
    (a stub for a solution), role and checksum, so that a written answer put back this
    way is "no response" (0 points) to nbgrader."""
    metadata = {"grade_id": source_cell.name, "schema_version": SCHEMA_VERSION, "cell_type": source_cell.cell_type,
                "checksum": source_cell.checksum, **instructor_role(source_cell.name, notebook)}
    make = new_code_cell if source_cell.cell_type == "code" else new_markdown_cell
    return make(source_cell.source, metadata={"nbgrader": metadata})


def nbgrader_refusal(cell, validator: MetadataValidator) -> str | None:
    """Why nbgrader's own checks refuse ``cell``'s nbgrader metadata, in words of our own
    (nbgrader's messages quote the cell's source), or None."""
    try:
        validator.validate_cell(cell)
    except SchemaTooOldError as err:
        return f"an old nbgrader metadata format (schema version {err.actual_version!r})"
    except SchemaTooNewError as err:
        return f"an unknown nbgrader metadata format (schema version {err.actual_version!r})"
    except ValidationError as err:  # its message may quote the student's keys: escaped and clipped
        return f"nbgrader metadata that nbgrader refuses ({display(str(err.message).encode())[:160]})"
    except Exception as err:  # the validator assumes well-typed values
        return f"nbgrader metadata that nbgrader cannot read ({type(err).__name__})"
    return None


class RestoreInstructorCells(OverwriteCells):
    """``OverwriteCells`` that warns only when a student really changed a locked cell, gives
    every cell of the notebook its instructor's role, drops the ids of other notebooks and
    puts back the graded cells a submission lacks."""

    add_missing_cells = Bool(True, help="put back, from the gradebook, the graded cells a submission lacks"
                             ).tag(config=True)

    def preprocess(self, nb, resources):
        self.student_id = resources["nbgrader"]["student"]
        self.validator = MetadataValidator()
        self._notebook = None  # the gradebook's notebook, read once the gradebook is open
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id is not None:
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                del cell.metadata["nbgrader"]
                self.log.warning("%s/%s: cell %d carries the grade_id %s, which this notebook does not have "
                                 "(a cell of another notebook?); it is not graded", self.student_id,
                                 self.notebook_id, cell_index + 1, grade_id)
                return cell, resources
            self.restore_role(cell, source_cell)
            if source_cell.locked and cell.source == self.released_source(source_cell.source):
                cell.source = source_cell.source  # as released: nothing to report
        return super().preprocess_cell(cell, resources, cell_index)

    def restore_role(self, cell, source_cell) -> None:
        """Give ``cell`` the nbgrader metadata of its instructor's cell, naming what differed."""
        metadata = cell.metadata["nbgrader"]
        if why := nbgrader_refusal(cell, self.validator):
            self.log.warning("%s/%s: the cell %s has %s; the instructor's metadata is put back",
                             self.student_id, self.notebook_id, source_cell.name, why)
        role = instructor_role(source_cell.name, self._gradebook_notebook())
        changed = {key: metadata.get(key) for key in {*role, "points"}
                   if metadata.get(key, False) != role.get(key, False)}
        if changed:
            self.log.warning("%s/%s: the student changed the role of the cell %s (%s); the instructor's (%s) is put "
                             "back", self.student_id, self.notebook_id, source_cell.name,
                             ", ".join(f"{key}={value!r}" for key, value in sorted(changed.items())),
                             ", ".join(f"{key}={role.get(key)!r}" for key in sorted(changed)))
        kept = {key: metadata[key] for key in ("checksum",) if key in metadata}
        cell.metadata["nbgrader"] = NotebookNode({**kept, "grade_id": source_cell.name,
                                                  "schema_version": SCHEMA_VERSION,
                                                  "cell_type": source_cell.cell_type, **role})

    def _gradebook_notebook(self):
        if self._notebook is None:
            self._notebook = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        return self._notebook

    def add_missing_grade_cells(self, nb, resources):
        """Put back each graded cell (test, written answer, task) of the gradebook that ``nb``
        lacks, after the cell that precedes it in the instructor's notebook (or first), under
        a notice that names it."""
        notebook = self._gradebook_notebook()
        graded = {cell.name for cell in (*notebook.grade_cells, *notebook.task_cells)}
        order = [cell.name for cell in notebook.source_cells]
        for source_cell in notebook.source_cells:
            where = {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb.cells)}
            if source_cell.name not in graded or source_cell.name in where:
                continue
            before = order[:order.index(source_cell.name)]
            at = next((where[name] + 1 for name in reversed(before) if name in where), 0)
            nb.cells[at:at] = [notice_cell(f"the cell `{source_cell.name}` was missing from this submission "
                                           "(deleted, copied with the same grade_id, or with metadata the grader "
                                           "could not use); the instructor's cell is put back below, as released"),
                               instructor_cell(source_cell, notebook)]
            self.log.warning("%s/%s: the graded cell %s was missing; the released cell is put back (a test cell "
                             "shows the grader's points, a written answer scores 0)", self.student_id,
                             self.notebook_id, source_cell.name)
        return nb, resources

    def add_missing_task_cells(self, nb, resources):
        return nb, resources  # put back with the graded cells, in place (nbgrader appends them at the end)

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
