"""Grade one submitted notebook: the steps in order, and nothing else.

1. Read the file and plan what to run (``plan.py``): setup cells from the course's
   instructor notebook, solution cells from the student, the static checks.
2. Start a :class:`~autograder.session.GradingSession`: a sandboxed worker that
   executes those cells (``session.py``).
3. Run the notebook's hidden suite under pytest against that session
   (``pytest_plugin.py``).
4. Return a :class:`~autograder.report.Report` (``report.py``).

The CLI and nbgrader grade each submission in a process of its own
(``autograder.runner``, forked from a server that has imported all this once), so
that a submission that breaks the grading process itself costs only that
submission. The timeouts, limits, device and hidden paths come from the run's
:class:`~autograder.config.GradingConfig`.
"""
from __future__ import annotations

import time
from pathlib import Path

from .config import GradingConfig
from .course import load_course
from .draws import Draws
from .notebook import UnreadableNotebook, read_notebook
from .plan import plan_grading
from .printed import Printed, printed_values
from .pytest_plugin import run_hidden_suite
from .report import Report
from .session import GradingSession, SubmissionSandbox


def recorded_for_answers(submitted, notebook, student: str) -> Printed | None:
    """:func:`~autograder.printed.printed_values`, which informs the TA and never costs a grade: a
    notebook it cannot read says so in the staff's note instead of failing the grading."""
    try:
        return printed_values(submitted, notebook, student)
    except Exception as err:  # noqa: BLE001  (whatever the file holds, the tests still run)
        return Printed(seed_note=f"what the notebook recorded could not be read ({type(err).__name__}): "
                                 "look at the submission itself")


def grade_notebook(path: Path, *, student: str, config: GradingConfig,
                   submission: SubmissionSandbox | None = None) -> Report:
    """Grade one notebook as ``config`` says and return its report (see README for the schema).

    ``submission``: the sandbox of the submission this notebook belongs to, whose
    worker its other notebooks share (fresh namespace each); by default, one of its own."""
    started = time.perf_counter()
    device = config.device
    stem = Path(path).stem
    course = load_course()
    warnings: list[str] = []
    plan, fatal, printed = None, None, None
    try:
        submitted = read_notebook(path)
        plan = plan_grading(submitted, stem, course)
        warnings = plan.warnings
        printed = recorded_for_answers(submitted, course.notebook(stem), student)
    except UnreadableNotebook as err:
        fatal = str(err)

    session = GradingSession(plan, config, fatal=fatal, submission=submission)
    results = []
    try:
        try:
            session.start()
        except Exception as err:  # the sandbox itself failed: report, do not crash the class
            session.fatal = f"the sandbox could not start: {err}"
        if stem in course.stems:  # an unreadable notebook still gets its items, each "missing"
            results = run_hidden_suite(stem, session, device=device, draws=Draws.of(config.secret, student))
    finally:
        session.close()

    return Report(
        student=student,
        notebook=Path(path).name,
        score=round(sum(r.points for r in results), 4),
        max_score=course.notebook(stem).auto_points if stem in course.stems else 0.0,
        sandbox=session.sandbox,
        device=device,
        duration_s=round(time.perf_counter() - started, 2),
        tests=results,
        warnings=warnings + ([fatal] if fatal else []),
        printed=printed,
    ).bounded()
