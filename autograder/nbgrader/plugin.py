"""nbgrader integration: ``nbgrader autograde`` grades in the sandbox, not in the kernel.

``nbgrader_config.py`` puts :class:`SandboxedGrading` where nbgrader's
``Execute`` preprocessor would be. The student's notebook is therefore never run
in a Jupyter kernel during autograding. Instead the whole notebook goes to the
repository's grader (sandboxed worker + hidden suites). Each visible-test cell's
outputs are replaced by one output that says what the cell scored and why, as the
formgrader and ``generate_feedback`` show it (test names and messages, never the
hidden test code):

* all points: a ``stdout`` stream, "3 of 3 points: all 3 hidden tests passed";
* points lost: an ``error`` output, as stock nbgrader shows a failing test cell,
  with the points in its one-line summary and, for each failing hidden test, its
  name, status and message, then the names of those that passed. A failed check's
  ``detail`` (the values it compared: the reference's, for the course staff) follows
  its test as an entry of its own, marked ``feedback_detail.STAFF_ONLY``, which the
  formgrader shows and ``generate_feedback`` removes (``feedback_detail.RemoveStaffDetail``).

The points themselves do not travel through the outputs: nbgrader's own rule
(``utils.determine_grade``) reads partial credit from an ``execute_result``, which
the formgrader shows as a stray ``Out[ ]: 1.5`` box, and gives 0 to any cell with
an error output. :class:`SandboxedGrading` puts each cell's points into the
resources instead, and :class:`SaveSandboxedGrades` (in place of
``SaveAutoGrades``) writes them into ``gradebook.db``. Written answers are left
alone for the formgrader, except that an answer that quotes numbers gets, in its cell
metadata (``printed.CELL_KEY``), what the student's notebook recorded for it (the report's
``printed``, ``autograder/printed.py``), which the formgrader's template shows beside the
answer. nbgrader's sanitising step has cleared the notebook's outputs by then, so the
TA sees the student's measured values only there. The key is the grader's: a submitted
cell carrying it loses it.

With ``--SandboxedGrading.reports=DIR`` (what ``python -m autograder merge --nbgrader``
runs), a notebook already graded by ``python -m autograder grade`` (a Slurm job
array, say) is not graded again: its report in ``DIR/<student>/<stem>.json`` is
used, provided it was made from the very bytes of ``submitted/<student>/week6/
<stem>.ipynb`` by this grader (same ``submission_sha256`` and ``suite_hash``).
Otherwise the notebook is graded as usual.

The device and the timeouts are traitlets of :class:`SandboxedGrading`
(``c.SandboxedGrading.timeout_call = 30`` in ``nbgrader_config.py``, or
``--SandboxedGrading.timeout_call=30``), made into one ``GradingConfig`` the first
time a notebook is graded; docs/threat-model.md's limits table lists them.

While it grades, ``nbgrader autograde`` shows the progress the CLI shows
(``autograder/progress.py``): a tqdm bar on a terminal with the notebooks done, the
failures so far and the ETA, one plain line per notebook elsewhere. nbgrader makes
a new preprocessor for every notebook, so the run's count lives in
:class:`AutogradeProgress`, one per nbgrader converter (one per run).
"""
from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import tempfile
import textwrap
import weakref
from pathlib import Path

import nbformat
from nbformat.v4 import new_output
from nbgrader import utils
from nbgrader.converters import BaseConverter
from nbgrader.preprocessors import NbGraderPreprocessor, SaveAutoGrades
from traitlets import Bool, Float, Unicode

from ..config import SETTINGS, TIMEOUTS, ZYGOTE, GradingConfig
from ..draws import describe
from ..errors import ConfigurationError, IntakeError
from ..files import read_regular_file
from ..intake import Submission
from ..notebook import cell_points, is_test_cell, raw_grade_id
from ..paths import ASSIGNMENT
from ..printed import CELL_KEY
from ..progress import Progress
from ..report import Report, TestResult
from ..runner import grade_in_subprocess
from ..session import zygote_pool
from ..version import up_to_date_report
from .feedback_detail import STAFF_ONLY

# Where SandboxedGrading leaves {grade_id: points} for SaveSandboxedGrades.
POINTS = "week6_points"
# Test names and messages quote student code (exception texts, returned values):
# terminal escapes and other control characters in them could forge a coloured
# "PASSED" line in the rendered output, so they are dropped.
CONTROL = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|[\x00-\x08\x0b-\x1f\x7f]")
WRAP, INDENT = 100, " " * 10
RED, GREEN, BOLD_RED, PLAIN = "\x1b[0;31m", "\x1b[0;32m", "\x1b[1;31m", "\x1b[0m"


def _clean(text: str) -> str:
    return CONTROL.sub("", str(text))


def _points(earned: float, max_points: float) -> str:
    return f"{earned:g} of {max_points:g} point" + ("" if max_points == 1 else "s")


def _indented(text: str) -> str:
    """``text`` cleaned, each paragraph indented and wrapped (the formgrader and the feedback
    show outputs in a fixed-width box), each on a line of its own after a newline."""
    return "".join("\n" + textwrap.fill(paragraph, WRAP, initial_indent=INDENT, subsequent_indent=INDENT,
                                        break_long_words=False, break_on_hyphens=False)
                   for paragraph in _clean(text).splitlines())


def feedback_lines(tests: list[TestResult]) -> list[str]:
    """One entry per hidden test: status, points and name, then its message, indented and wrapped."""
    return [f"{test.status.upper():9} {test.points:g}/{test.max_points:g}  {_clean(test.test)}"
            + _indented(test.message) for test in tests]


def staff_entry(test: TestResult) -> str:
    """The course staff's detail of a failed test, as a traceback entry the feedback leaves out."""
    return f"{STAFF_ONLY}{_indented(test.detail)}"


def cell_outputs(tests: list[TestResult], earned: float, max_points: float, not_graded: list[str]) -> list:
    """The outputs of one test cell in the autograded notebook: its points and why points were lost.

    ``not_graded`` is the reason to show when no hidden test graded the cell.
    """
    if not tests:
        reason = _clean("; ".join(not_graded))
        summary = f"{_points(0, max_points)}: this cell was not graded ({reason})"
        return [new_output("error", ename="NotGraded", evalue=summary,
                           traceback=[f"{RED}NotGraded{PLAIN}: {summary}"])]
    failed = [t for t in tests if t.status != "passed"]
    passed = [t for t in tests if t.status == "passed"]
    if not failed and earned >= max_points:
        text = f"{_points(earned, max_points)}: all {len(tests)} hidden test{'s' * (len(tests) != 1)} passed\n"
        text += "".join(f"  passed  {_clean(t.test)}\n" for t in tests)
        return [new_output("stream", name="stdout", text=text)]
    summary = f"{_points(earned, max_points)}: {len(failed)} of {len(tests)} hidden tests did not pass"
    traceback = [f"{RED}HiddenTestsFailed{PLAIN}: {summary}"]
    for test, line in zip(failed, feedback_lines(failed)):
        traceback.append(f"{BOLD_RED}{line[:9]}{PLAIN}{line[9:]}")
        if test.detail:
            traceback.append(staff_entry(test))
    for line in feedback_lines(passed):
        traceback.append(f"{GREEN}{line[:9]}{PLAIN}{line[9:]}")
    return [new_output("error", ename="HiddenTestsFailed", evalue=summary, traceback=traceback)]


def _setting_traits() -> dict:
    """One traitlet per ``config.SETTINGS`` entry, with its field's default: the run's
    settings as ``c.SandboxedGrading.<trait>`` (``timeout`` sets ``timeout_notebook``)."""
    traits = {setting.trait: Float(getattr(GradingConfig, setting.field), help=f"seconds allowed for {setting.help}")
              for setting in TIMEOUTS}
    traits[ZYGOTE.trait] = Bool(GradingConfig.zygote, help=f"{ZYGOTE.help}; False: start each cold")
    return {name: trait.tag(config=True) for name, trait in traits.items()}


# The settings' traitlets live on a base class made from the table, so that none is typed
# here again; nbgrader reads c.SandboxedGrading.<trait> for them as for the class's own.
_SandboxedGradingSettings = type("SandboxedGradingSettings", (NbGraderPreprocessor,), {
    "__doc__": "The run's settings of SandboxedGrading (autograder.config.SETTINGS).", **_setting_traits()})


class SandboxedGrading(_SandboxedGradingSettings):
    """Grade the notebook with the sandboxed autograder and record per-cell scores."""

    device = Unicode("auto", help="'auto', 'cpu' or 'cuda'").tag(config=True)
    reports = Unicode("", help="folder of reports of `python -m autograder grade`, used instead of "
                               "grading a notebook again where they are up to date").tag(config=True)

    _config: GradingConfig | None = None

    def grading_config(self) -> GradingConfig:
        """The run's config from the traitlets, built (and the device resolved) once."""
        if self._config is None:
            try:
                self._config = GradingConfig.build(
                    device=self.device, **{setting.field: getattr(self, setting.trait) for setting in SETTINGS})
            except ConfigurationError as err:
                raise ConfigurationError(f"SandboxedGrading (nbgrader_config.py or --SandboxedGrading.*): {err}"
                                         ) from None
            self.log.info("%s", describe(self._config.secret))
        return self._config

    def preprocess(self, nb, resources):
        stem = resources.get("unique_key") or resources["metadata"]["name"]
        student = resources.get("nbgrader", {}).get("student", "unknown")
        # nbgrader converts autograded/<student>/<assignment>/<nb>.ipynb: three levels
        # up is the course root (gradebook, submissions), which the sandbox hides.
        folder = Path(resources.get("metadata", {}).get("path") or Path.cwd()).resolve()
        course_root = str(folder.parents[2]) if len(folder.parents) > 2 else str(folder)
        progress = AutogradeProgress.starting(self)
        submission = Submission(student, folder / f"{stem}.ipynb", f"{stem}.ipynb", stem)
        try:
            report = self._report(nb, stem, student, course_root, self._submitted_file(resources))
        except Exception as err:
            if progress is not None:
                progress.done(submission, Report.problem(student, submission.name, f"not graded: {err!r}",
                                                         outcome="failed"))
            raise
        if progress is not None:
            progress.done(submission, report)
        for warning in report.warnings:
            self.log.warning("%s/%s: %s", student, stem, warning)
        if report.sandbox == "degraded":
            # Said in nbgrader's own log too: the job's log, where the grader says it
            # first, is gone once autograde ends.
            self.log.warning("%s/%s: graded WITHOUT the full sandbox (bubblewrap unusable here: "
                             "install bubblewrap, or allow unprivileged user namespaces)", student, stem)
        by_cell: dict[str, list[TestResult]] = {}
        for test in report.tests:
            by_cell.setdefault(test.grade_id, []).append(test)

        points = resources.setdefault(POINTS, {})
        for cell in nb.cells:
            if isinstance(cell.get("metadata"), dict):
                cell.metadata.pop(CELL_KEY, None)
                beside = report.printed.beside(raw_grade_id(cell) or "") if report.printed is not None else None
                if cell.get("cell_type") == "markdown" and beside is not None:
                    cell.metadata[CELL_KEY] = beside
            if not is_test_cell(cell):
                continue
            grade_id, max_points = cell_points(cell)
            tests = by_cell.get(grade_id, [])
            earned = min(max_points, round(sum(t.points for t in tests), 4)) if tests else 0.0
            points[grade_id] = earned
            cell.outputs = cell_outputs(tests, earned, max_points,
                                        report.warnings or ["no hidden test graded it"])
            cell.execution_count = None
        resources.setdefault("week6", {})[stem] = report
        return nb, resources

    def _report(self, nb, stem: str, student: str, course_root: str, submitted: Path | None) -> Report:
        """The report of this notebook: from ``self.reports`` when up to date there, else graded now.

        What is graded is the ``submitted`` file, read as ``python -m autograder grade`` reads
        it (the same limits, the same choice among cells that share a grade_id), so that both
        give a notebook the same score whatever nbgrader's sanitising steps changed in ``nb``
        (``nbgrader/intake.py``); ``nb`` itself only outside an nbgrader run."""
        report = self._saved_report(Path(course_root), student, stem) if self.reports else None
        if report is None and submitted is not None:
            report = grade_in_subprocess(submitted, student=student, config=self._run_config(course_root))
        elif report is None:
            with tempfile.TemporaryDirectory(prefix="autograde-") as scratch:
                path = Path(scratch) / f"{stem}.ipynb"
                nbformat.write(nb, path)
                report = grade_in_subprocess(path, student=student,
                                             config=self._run_config(course_root).hiding(scratch))
        return report

    def _submitted_file(self, resources) -> Path | None:
        """The file nbgrader took this notebook from (``submitted/<student>/<assignment>/``), or
        None outside an nbgrader converter."""
        converter = getattr(self.parent, "parent", None)
        info = resources.get("nbgrader", {})
        if not isinstance(converter, BaseConverter) or converter.coursedir is None or "notebook" not in info:
            return None
        coursedir = converter.coursedir
        folder = coursedir.format_path(coursedir.submitted_directory, info["student"], info["assignment"])
        return Path(folder) / f"{info['notebook']}.ipynb"

    def _run_config(self, course_root: str) -> GradingConfig:
        """The config of this run for a course root, with the zygote pool that serves it.

        nbgrader makes a preprocessor per notebook, so the pool is kept per process
        (one at a time: a new course root closes the last one's) and closed when the
        process exits. Its sandboxes hide the course root and the folder of the
        per-notebook scratch copies."""
        config = self.grading_config().hiding(course_root, tempfile.gettempdir())
        if _ZYGOTES.config != config:
            _ZYGOTES.stack.close()
            _ZYGOTES.stack = contextlib.ExitStack()
            _ZYGOTES.config = config
            _ZYGOTES.pooled = _ZYGOTES.stack.enter_context(zygote_pool(config, 1, prestart=1))
        return _ZYGOTES.pooled

    def _saved_report(self, course_root: Path, student: str, stem: str) -> Report | None:
        """The report of this submission in ``self.reports`` if it is up to date, else None."""
        try:
            submitted = read_regular_file(course_root / "submitted" / student / ASSIGNMENT / f"{stem}.ipynb")
        except IntakeError as err:
            self.log.info("%s/%s: grading it (the submitted file: %s)", student, stem, err)
            return None
        report = up_to_date_report(Path(self.reports) / student / f"{stem}.json",
                                   hashlib.sha256(submitted).hexdigest(), secret=self.grading_config().secret)
        if report is None:
            self.log.info("%s/%s: grading it (no report of this submission by this grader in %s)",
                          student, stem, self.reports)
        else:
            self.log.info("%s/%s: scores from the report in %s", student, stem, self.reports)
        return report


class _ZygotePoolOfProcess:
    """The zygote pool of this nbgrader process: its config, the config with the pool's address."""

    def __init__(self) -> None:
        self.config: GradingConfig | None = None
        self.pooled: GradingConfig | None = None
        self.stack = contextlib.ExitStack()
        atexit.register(lambda: self.stack.close())


_ZYGOTES = _ZygotePoolOfProcess()


class AutogradeProgress:
    """The progress of one ``nbgrader autograde`` run, shared by the preprocessors nbgrader makes for it.

    The total is what nbgrader itself found to grade: its converter's ``assignments``,
    the submitted folders (``submitted/<student>/<assignment>/``) and notebooks that
    ``init_notebooks`` matched for the run's students, assignment and notebooks,
    taken from the converter rather than globbed again so that both cannot disagree.
    nbgrader decides later, per student, to skip one (already autograded without
    ``--force``, or excluded) and to drop notebooks the gradebook does not know; the
    total follows when the run gets there: a student's notebooks are counted as
    nbgrader kept them (``converter.notebooks``) from their first notebook on, and a
    student that nbgrader went past (it goes through them in sorted order) counts
    for the notebooks done. A student skipped after the last one graded stays in the
    total.
    """

    _runs: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def __init__(self, converter: BaseConverter, log):
        self.order = sorted(converter.assignments)
        self.planned = {folder: len(converter.assignments[folder]) for folder in self.order}
        self.reached: set[str] = set()
        self.done_in: dict[str, int] = {}
        self.current: str | None = None
        self.progress = Progress(sum(self.planned.values()), loggers=[log])
        weakref.finalize(converter, self.progress.close)

    @classmethod
    def starting(cls, preprocessor: NbGraderPreprocessor) -> AutogradeProgress | None:
        """The progress of the run that ``preprocessor`` starts a notebook of (None outside an
        nbgrader converter), with the total brought up to the student it belongs to."""
        converter = getattr(preprocessor.parent, "parent", None)
        if not isinstance(converter, BaseConverter) or not converter.assignments:
            return None
        if converter not in cls._runs:
            cls._runs[converter] = cls(converter, preprocessor.log)
        run = cls._runs[converter]
        run._reach(converter.notebooks)
        return run

    def _reach(self, notebooks: list[str]) -> None:
        """Note the student whose ``notebooks`` (as nbgrader kept them) are being converted."""
        # A key of ``assignments``: nbgrader globbed the notebooks inside it.
        self.current = os.path.dirname(notebooks[0]) if notebooks else None
        if self.current not in self.planned or self.current in self.reached:
            return
        for earlier in self.order[:self.order.index(self.current)]:
            self.planned[earlier] = self.done_in.get(earlier, 0)
        self.planned[self.current] = len(notebooks)
        self.reached.add(self.current)
        self.progress.set_total(sum(self.planned.values()))

    def done(self, submission: Submission, report: Report) -> None:
        """One notebook of the current student is done."""
        self.done_in[self.current] = self.done_in.get(self.current, 0) + 1
        self.progress.done(submission, report)
        if self.progress.count >= self.progress.total:
            self.progress.close()


class SaveSandboxedGrades(SaveAutoGrades):
    """nbgrader's ``SaveAutoGrades``, with the test cells' points from :class:`SandboxedGrading`.

    Written answers and other graded cells keep nbgrader's own rule. A test cell
    that the sandboxed grader did not score (its metadata did not pass the checks
    of ``autograder.notebook``) gets 0, never nbgrader's "no error output: full
    points".
    """

    def preprocess(self, nb, resources):
        if POINTS not in resources:
            raise RuntimeError("SaveSandboxedGrades needs SandboxedGrading before it in "
                               "Autograde.autograde_preprocessors (nbgrader_config.py)")
        return super().preprocess(nb, resources)

    def _add_score(self, cell, resources) -> None:
        if cell.cell_type != "code" or utils.is_solution(cell):
            return super()._add_score(cell, resources)
        grade_id = cell.metadata["nbgrader"]["grade_id"]
        if grade_id not in resources[POINTS]:
            self.log.warning("%s/%s: test cell %s was not graded by the sandboxed grader; it scores 0",
                             self.student_id, self.notebook_id, grade_id)
        grade = self.gradebook.find_grade(grade_id, self.notebook_id, self.assignment_id, self.student_id)
        grade.auto_score = resources[POINTS].get(grade_id, 0.0)
        # As nbgrader does: a score a grader already overrode by hand is flagged for review.
        grade.needs_manual_grade = grade.manual_score is not None
        self.gradebook.db.commit()
