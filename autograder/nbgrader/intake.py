"""What ``nbgrader autograde`` takes in: the intake of ``python -m autograder grade``, in nbgrader.

Stock nbgrader believes what it is handed. It names a student after any folder
under ``submitted/``, reads every notebook whole (a 200 MB one, or 50,000 empty
cells that cost it 48 s of CPU) and stops the *whole class* at the first notebook
whose cell metadata has an old schema version, which is what its own
``DeduplicateIds`` leaves in the first of two cells that share a ``grade_id``
(copying a cell in JupyterLab is enough). Three pieces, configured in
``nbgrader_config.py``, make a bad submission cost only its author:

* :class:`IntakeExporter` (``c.Autograde.exporter_class``) refuses, before nbgrader
  records anyone in the gradebook, each student folder whose name is not a usable
  student id (``intake.STUDENT_ID_RULE``, the CLI's rule), and reads each
  submitted notebook with the CLI's reader (``notebook.read_notebook``: a regular
  file within the byte, cell, value and nesting limits of ``intake.py``). A notebook
  it cannot take in, or that nbgrader's sanitising steps still fail on, is replaced
  by a *stand-in*: the notebook as released, from the gradebook, under a notice that
  says why. Its scores still come from the sandboxed grader, which grades the
  submitted file as the CLI does (``nbgrader.plugin.SandboxedGrading``): 0 for a file
  over a limit, with the same message.
* :class:`ScreenCells` (first of ``c.Autograde.sanitize_preprocessors``, in place of
  ``DeduplicateIds``) removes the nbgrader metadata of each cell the grader ignores:
  metadata the CLI's schema refuses (``notebook.metadata_problem``), a role without a
  ``grade_id``, and every repeat of a ``grade_id`` after its first cell, the one the
  grader grades. Each is named in the log and, in the notebook, by a notice.
* ``nbgrader.cells.RestoreInstructorCells`` gives the remaining cells their
  instructor's metadata and puts back the graded cells that are missing.

What one notebook costs nbgrader is then bounded by the intake's limits (measured
figures: docs/threat-model.md, "The nbgrader class run").
"""
from __future__ import annotations

import copy
import datetime
import json
import os
import re
from pathlib import Path

from nbconvert.exporters import NotebookExporter
from nbformat import NotebookNode
from nbgrader.api import Gradebook
from nbgrader.converters import BaseConverter
from nbgrader.preprocessors import NbGraderPreprocessor
from sqlalchemy.exc import SQLAlchemyError

from ..intake import display, student_folder_refusal
from ..notebook import UnreadableNotebook, metadata_problem, raw_grade_id, read_notebook
from .cells import instructor_cell, notice_cell

CELL_TYPES = ("code", "markdown", "raw")
ROLES = ("grade", "solution", "locked", "task")


class IntakeExporter(NotebookExporter):
    """nbgrader's notebook exporter, reading submissions as ``python -m autograder grade`` does."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # nbgrader makes one exporter per run, after globbing the submissions and before
        # converting any: the only point where a student can be refused before nbgrader
        # records them in the gradebook (its converter class is not configurable).
        if isinstance(self.parent, BaseConverter) and self.parent.assignments:
            refuse_unusable_students(self.parent, self.log)

    def from_filename(self, filename, resources=None, **kw):
        resources = _file_resources(filename, resources)
        try:
            nb = read_notebook(Path(filename))
        except UnreadableNotebook as err:
            self.log.warning("%s: not graded: %s", _who(resources), err)
            return self.from_notebook_node(stand_in(resources, str(err)), resources, **kw)
        if not self._screening():
            return self.from_notebook_node(nb, resources, **kw)
        try:
            return self.from_notebook_node(nb, copy.deepcopy(resources), **kw)
        except SQLAlchemyError:
            raise  # the gradebook, not the notebook: nbgrader stops the run and says so
        except Exception as err:
            self.log.error("%s: nbgrader could not process the submitted notebook (%s: %s); it is shown as "
                           "released, and its scores come from the submitted file", _who(resources),
                           type(err).__name__, display(str(err).encode())[:300])
            why = (f"nbgrader could not process this notebook as submitted ({type(err).__name__}); the cells below "
                   "are the released ones, the autograded points come from the submitted file, and written "
                   "answers need the submitted file")
            return self.from_notebook_node(stand_in(resources, why), resources, **kw)

    def _screening(self) -> bool:
        """Whether the steps now registered are the ones that take in a *submitted* notebook
        (nbgrader's sanitising pass), not those that grade nbgrader's own copy of it."""
        return any(isinstance(step, ScreenCells) for step in self._preprocessors)


def _file_resources(filename, resources):
    """The resources nbconvert's ``from_filename`` derives from the file, from ``lstat``
    (a link is not followed; ``read_notebook`` refuses it)."""
    resources = resources if resources is not None else {}
    if not resources.get("metadata"):
        resources["metadata"] = {}
    path, basename = os.path.split(filename)
    resources["metadata"]["name"] = os.path.splitext(basename)[0]
    resources["metadata"]["path"] = path
    modified = datetime.datetime.fromtimestamp(os.lstat(filename).st_mtime, tz=datetime.timezone.utc)
    resources["metadata"]["modified_date"] = modified.strftime("%B %-d, %Y")
    return resources


def _who(resources) -> str:
    info = resources.get("nbgrader", {})
    return f"{info.get('student', '?')}/{info.get('notebook', resources['metadata']['name'])}"


def stand_in(resources, why: str) -> NotebookNode:
    """The notebook as released (every cell the gradebook holds), under a notice saying ``why``
    the submitted one is not shown. The formgrader and the feedback show that notice; each
    test cell shows the grader's points for the submitted file (0 for a file the intake
    refuses), and each written answer is "no response" (0)."""
    info = resources["nbgrader"]
    with Gradebook(info["db_url"]) as gradebook:
        notebook = gradebook.find_notebook(info["notebook"], info["assignment"])
        cells = [notice_cell(why)] + [instructor_cell(cell, notebook) for cell in notebook.source_cells]
        kernelspec = notebook.kernelspec
    nb = NotebookNode(nbformat=4, nbformat_minor=5, metadata=NotebookNode(), cells=cells)
    if kernelspec:
        nb.metadata["kernelspec"] = json.loads(kernelspec)
    return nb


def refuse_unusable_students(converter: BaseConverter, log) -> None:
    """Drop from ``converter``'s run each student folder whose name is not a usable student
    id, naming the rule and the fix in the log: the CLI's rule (``intake.STUDENT_ID_RULE``)."""
    coursedir = converter.coursedir
    pattern = re.compile(coursedir.format_path(coursedir.submitted_directory, "(?P<student_id>.*)",
                                               "(?P<assignment_id>.*)", escape=True))
    for folder in sorted(converter.assignments):
        match = pattern.fullmatch(folder)
        if match is None:
            continue  # nbgrader reports a folder it cannot parse itself
        name = os.fsencode(match["student_id"])
        if why := student_folder_refusal(name):
            del converter.assignments[folder]
            log.warning("submitted/%s: not graded: %s", display(name), why)


class ScreenCells(NbGraderPreprocessor):
    """Before nbgrader's sanitising steps: every cell the grader ignores loses its nbgrader
    metadata, so that nbgrader's own checks cannot fail on it, and is named.

    As ``plan.plan_grading`` (the CLI): a cell whose nbgrader metadata the CLI's schema
    refuses is ignored; of cells that share a ``grade_id``, the first is graded. nbgrader's
    ``DeduplicateIds`` kept the *last* copy and left the others with empty metadata, which
    nbgrader then takes for an old format and stops the class run for.
    """

    def preprocess(self, nb, resources):
        who = f"{resources['nbgrader']['student']}/{resources['nbgrader']['notebook']}"
        if not isinstance(nb.get("metadata"), dict):
            nb["metadata"] = NotebookNode()
        screened, first = [], {}
        for number, cell in enumerate(nb.cells, 1):
            if not isinstance(cell, dict) or cell.get("cell_type") not in CELL_TYPES:
                self.log.warning("%s: cell %d is not a notebook cell; it is left out", who, number)
                screened.append(notice_cell(f"cell {number} of the submission was not a notebook cell and is "
                                            "left out"))
                continue
            if not isinstance(cell.get("metadata"), dict):
                cell["metadata"] = NotebookNode()
            why = self.ignored(cell, number, first)
            if why is not None:
                del cell.metadata["nbgrader"]
            if why:
                self.log.warning("%s: %s", who, why)
                screened.append(notice_cell(why))
            screened.append(cell)
        nb.cells = screened
        return nb, resources

    @staticmethod
    def ignored(cell, number: int, first: dict[str, int]) -> str | None:
        """Why the grader ignores ``cell``'s nbgrader metadata (it is cell ``number``): a
        reason, "" when there is nothing to tell (metadata without a role), or None when it
        is kept; ``first`` maps each grade_id met so far to its first cell."""
        if "nbgrader" not in cell.metadata:
            return None
        grade_id = raw_grade_id(cell)
        named = f"cell {number}" + (f" (`{grade_id}`)" if grade_id else "")
        if why := metadata_problem(cell):
            return f"{named} is not graded: {why}"
        if not grade_id:
            claims = any(cell.metadata["nbgrader"].get(role) for role in ROLES)
            return f"{named} claims an nbgrader role without a usable grade_id and is not graded" if claims else ""
        if grade_id in first:
            return (f"cell {number} repeats the grade_id `{grade_id}` of cell {first[grade_id]}; only cell "
                    f"{first[grade_id]} is graded, as `python -m autograder grade` grades it")
        first[grade_id] = number
        return None
