"""The hidden suites under pytest: collection, outcomes, and each test's share of the points.

``run_hidden_suite`` runs ``autograder/hidden/<stem>/`` in this (trusted)
process with the grading session active: every test reaches the student only
through ``autograder.suite.Student``. :class:`ResultCollector` turns each test's
outcome into a status, points and a message (:func:`classify`), never showing
hidden-test code: a message comes from a failed check, a student's exception or
the sandbox, clipped before anything keeps it. A failed check's ``detail`` (what it
compared against, for the course staff) travels beside the message, never in it.
"""
from __future__ import annotations

import ast
import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from .draws import PUBLIC, Draws
from .report import TestResult, clip
from .suite import CellFailed, Forbidden, GradingFailure, Missing, PartialCredit, active_session

HIDDEN_DIR = Path(__file__).resolve().parent / "hidden"
log = logging.getLogger("autograder")


UNUSED_PLUGINS = ("unraisableexception", "threadexception", "faulthandler", "warnings", "doctest",
                  "junitxml", "pastebin", "legacypath", "stepwise", "lfplugin", "nfplugin", "logging",
                  "tmpdir", "monkeypatch", "recwarn", "setuponly", "setupplan", "subtests")


def suite_dir(stem: str) -> Path:
    """The folder of notebook ``stem``'s hidden suite (it may not exist: a notebook with nothing
    auto-graded): a package of test modules, one per section, and the helpers they share."""
    return HIDDEN_DIR / stem


def suite_files(stem: str) -> list[Path]:
    """The test modules of notebook ``stem``'s hidden suite, in the order they run: the order of
    their names, numbered after the notebook's sections (a report lists the tests in that order)."""
    folder = suite_dir(stem)
    return sorted(folder.glob("test_*.py")) if folder.is_dir() else []


def suite_modules(stem: str) -> list[Path]:
    """Every module of notebook ``stem``'s hidden suite: its test modules and the helpers they share."""
    folder = suite_dir(stem)
    return sorted(folder.glob("*.py")) if folder.is_dir() else []


def _node_ids(stem: str, tests: Sequence[str]) -> list[str]:
    """pytest's ids of the test functions ``tests`` of ``stem``'s suite, wherever a section defines them."""
    if not tests:
        return []
    where = {node.name: path for path in suite_files(stem) for node in ast.parse(path.read_text()).body
             if isinstance(node, ast.FunctionDef)}
    return [f"{where[name]}::{name}" for name in tests]


def classify(excinfo) -> tuple[str, str]:
    """(status, message) for a test that raised; messages never quote test code."""
    from .sandbox.errors import LimitExceeded, StudentError, ValueRejected, WorkerCrashed, WorkerTimeout

    err = excinfo.value
    if isinstance(err, Forbidden):
        return "forbidden", str(err)
    if isinstance(err, Missing):
        return "missing", str(err)
    if isinstance(err, CellFailed):
        return "error", str(err)
    if isinstance(err, WorkerTimeout):
        return "timeout", "your code did not finish within the time limit (an infinite loop?)"
    if isinstance(err, LimitExceeded):
        return "error", f"your code went over a limit of the sandbox ({err})"
    if isinstance(err, WorkerCrashed):
        return "error", f"your code ended the sandboxed process ({err})"
    if isinstance(err, ValueRejected):
        return "failed", f"the returned value cannot be graded: {err.message}"
    if isinstance(err, StudentError):
        if err.type_name == "NotImplementedError":
            return "error", "not implemented: the function still raises NotImplementedError"
        detail = f"{err.type_name}: {err.message}"[:400]
        tail = "\n".join(err.traceback.strip().splitlines()[-4:]) if err.traceback else ""
        return "error", f"your code raised {detail}" + (f"\n{tail}" if tail else "")
    if isinstance(err, (GradingFailure, AssertionError)):
        return "failed", clip(str(err)) or "the result is not what the reference computes"
    log.error("grader error in a hidden test: %r", err)
    return "error", f"the grader could not run this test ({type(err).__name__}); please tell the course staff"


class ResultCollector:
    """Collects one :class:`TestResult` per hidden test (and device variant)."""

    def __init__(self):
        self.rows: list[dict] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        marker = item.get_closest_marker("graded")
        if marker is None:
            return
        function = item.originalname if hasattr(item, "originalname") else item.name
        if report.when == "setup" and report.skipped:
            self.rows.append(dict(cell=marker.kwargs["cell"], function=function, test=item.name,
                                  points=float(marker.kwargs["points"]), status="skipped", message="", detail=""))
            return
        if report.when != "call" and not report.failed:
            return
        if report.when == "call" and report.passed:
            status, message, detail, fraction = "passed", "", "", 1.0
        elif call.excinfo is not None:
            status, message = classify(call.excinfo)
            # The staff's view of a failed check, when it says more than the student's message.
            detail = getattr(call.excinfo.value, "detail", message) if status == "failed" else message
            detail = "" if detail == message else detail
            # A check that gives partial credit (some of several answers right) keeps that share.
            partial = status == "failed" and isinstance(call.excinfo.value, PartialCredit)
            fraction = call.excinfo.value.fraction if partial else 0.0
        else:
            return
        # Clipped here, before anything keeps it: a message may quote a returned value.
        self.rows.append(dict(cell=marker.kwargs["cell"], function=function, test=item.name,
                              points=float(marker.kwargs["points"]), status=status, message=clip(message),
                              detail=clip(str(detail)), fraction=fraction))

    def results(self) -> list[TestResult]:
        """Share each test's points among its variants that ran (CPU, CUDA)."""
        ran = [row for row in self.rows if row["status"] != "skipped"]
        variants: dict[tuple[str, str], int] = {}
        for row in ran:
            key = (row["cell"], row["function"])
            variants[key] = variants.get(key, 0) + 1
        # An item caught using a shortcut scores nothing, whichever of its tests caught it.
        forbidden = {row["cell"]: row["message"] for row in ran if row["status"] == "forbidden"}
        for row in ran:
            if row["cell"] in forbidden:
                row["status"], row["message"], row["detail"] = "forbidden", forbidden[row["cell"]], ""
        results = []
        for row in ran:
            share = row["points"] / variants[(row["cell"], row["function"])]
            earned = share * row["fraction"] if row["status"] in ("passed", "failed") else 0.0
            results.append(TestResult(row["cell"], row["test"], row["status"], round(earned, 4),
                                      round(share, 4), row["message"], row["detail"]))
        return results


def run_hidden_suite(stem: str, session, *, device: str, draws: Draws = PUBLIC,
                     plugins: Sequence[object] = (), tests: Sequence[str] = ()) -> list[TestResult]:
    """The results of ``stem``'s hidden suite against ``session`` (a ``GradingSession``
    or the tests' in-process stand-in), its inputs drawn with ``draws`` (the student's
    seeds); CUDA variants only when ``device`` is cuda. ``plugins``: more pytest plugins
    for the run (the repository's tests watch the suites with them); ``tests``: only
    these test functions, each with its device variants (the repository's tests of one
    item), every test when empty."""
    suite = suite_files(stem)
    if not suite:
        return []
    collector = ResultCollector()
    args = [
        # --assert=plain and --tb=no: messages come from GradingFailure alone, and no
        # time goes into formatting tracebacks (with tensor dumps) nobody will see.
        *(_node_ids(stem, tests) or map(str, suite)), "-q", "-p", "no:cacheprovider", "--assert=plain", "--tb=no", "--no-header",
        "-c", str(HIDDEN_DIR / "pytest.ini"), "--rootdir", str(HIDDEN_DIR), "-o", "console_output_style=classic",
        # The plugins of installed packages (anyio's, platformdirs') have no business in a
        # hidden suite; finding them reads every package's metadata, each session.
        "--disable-plugin-autoload",
        # pytest's own plugins a hidden suite has no use for. unraisableexception and
        # threadexception end the session with full garbage collections, 0.2 s each over
        # torch's and transformers' heap; logging wraps every phase of every test in
        # handlers; the rest register fixtures no hidden test asks for.
        *[arg for plugin in UNUSED_PLUGINS for arg in ("-p", f"no:{plugin}")],
    ]
    if device == "cpu":
        args += ["-m", "not cuda"]
    with active_session(session, draws):
        pytest.main(args, plugins=[collector, *plugins])
    return collector.results()
