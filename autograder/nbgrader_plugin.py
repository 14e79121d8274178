"""nbgrader integration: ``nbgrader autograde`` grades in the sandbox, not in the kernel.

``nbgrader_config.py`` puts :class:`SandboxedGrading` where nbgrader's
``Execute`` preprocessor would be. The student's notebook is therefore never run
in a Jupyter kernel during autograding. Instead the whole notebook goes to the
repository's grader (sandboxed worker + hidden suites), and each visible-test cell
receives two outputs that nbgrader's own machinery understands:

* an ``execute_result`` holding the points earned: nbgrader's partial credit,
  which ``SaveAutoGrades`` writes into ``gradebook.db``;
* a ``stdout`` stream listing each hidden test's name, status and message, which
  ``generate_feedback`` shows to the student (never the hidden test code).

Written answers are left alone for the formgrader.

With ``--SandboxedGrading.reports=DIR`` (what ``python -m autograder merge --nbgrader``
runs), a notebook already graded by ``python -m autograder grade`` (a Slurm job
array, say) is not graded again: its report in ``DIR/<student>/<stem>.json`` is
used, provided it was made from the very bytes of ``submitted/<student>/week6/
<stem>.ipynb`` by this grader (same ``submission_sha256`` and ``suite_hash``).
Otherwise the notebook is graded as usual.
"""
from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from traitlets import Float, Unicode

from nbgrader.preprocessors import NbGraderPreprocessor

from .intake import IntakeError, read_regular_file
from .notebook import ASSIGNMENT, cell_points, is_test_cell
from .runner import DEFAULT_HIDDEN, JOB_TIMEOUT, grade_in_subprocess
from .version import up_to_date_report


def feedback_lines(tests: list[dict]) -> list[str]:
    lines = []
    for test in tests:
        line = f"{test['status'].upper():9} {test['points']:g}/{test['max_points']:g}  {test['test']}"
        if test["message"]:
            line += "\n          " + test["message"].replace("\n", "\n          ")
        lines.append(line)
    return lines


class SandboxedGrading(NbGraderPreprocessor):
    """Grade the notebook with the sandboxed autograder and record per-cell scores."""

    device = Unicode("auto", help="'auto', 'cpu' or 'cuda'").tag(config=True)
    timeout = Float(JOB_TIMEOUT, help="seconds allowed for one notebook").tag(config=True)
    reports = Unicode("", help="folder of reports of `python -m autograder grade`, used instead of "
                               "grading a notebook again where they are up to date").tag(config=True)

    def preprocess(self, nb, resources):
        stem = resources.get("unique_key") or resources["metadata"]["name"]
        student = resources.get("nbgrader", {}).get("student", "unknown")
        # nbgrader converts autograded/<student>/<assignment>/<nb>.ipynb: three levels
        # up is the course root (gradebook, submissions), which the sandbox hides.
        folder = Path(resources.get("metadata", {}).get("path") or Path.cwd()).resolve()
        course_root = str(folder.parents[2]) if len(folder.parents) > 2 else str(folder)
        report = self._saved_report(Path(course_root), student, stem) if self.reports else None
        if report is None:
            with tempfile.TemporaryDirectory(prefix="autograde-") as scratch:
                path = Path(scratch) / f"{stem}.ipynb"
                nbformat.write(nb, path)
                report = grade_in_subprocess(path, student=student, device=self.device,
                                             hidden=DEFAULT_HIDDEN + [course_root, scratch], timeout=self.timeout)
        for warning in report.get("warnings", []):
            self.log.warning("%s/%s: %s", student, stem, warning)
        by_cell: dict[str, list[dict]] = {}
        for test in report["tests"]:
            by_cell.setdefault(test["grade_id"], []).append(test)

        for cell in nb.cells:
            if not is_test_cell(cell):
                continue
            grade_id, max_points = cell_points(cell)
            tests = by_cell.get(grade_id, [])
            earned = min(max_points, round(sum(t["points"] for t in tests), 4))
            if not tests:
                earned = 0.0
                note = report.get("warnings") or ["this cell was not graded"]
                lines = ["NOT GRADED  " + "; ".join(note)]
            else:
                lines = feedback_lines(tests)
            cell.outputs = [
                new_output("execute_result", data={"text/plain": f"{earned:g}"}, execution_count=None),
                new_output("stream", name="stdout", text="\n".join(lines) + "\n"),
            ]
        resources.setdefault("week6", {})[stem] = report
        return nb, resources

    def _saved_report(self, course_root: Path, student: str, stem: str) -> dict | None:
        """The report of this submission in ``self.reports`` if it is up to date, else None."""
        try:
            submitted = read_regular_file(course_root / "submitted" / student / ASSIGNMENT / f"{stem}.ipynb")
        except IntakeError as err:
            self.log.info("%s/%s: grading it (the submitted file: %s)", student, stem, err)
            return None
        report = up_to_date_report(Path(self.reports) / student / f"{stem}.json",
                                   hashlib.sha256(submitted).hexdigest())
        if report is None:
            self.log.info("%s/%s: grading it (no report of this submission by this grader in %s)",
                          student, stem, self.reports)
        else:
            self.log.info("%s/%s: scores from the report in %s", student, stem, self.reports)
        return report
