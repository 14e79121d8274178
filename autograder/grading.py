"""Grade one submitted notebook: sandboxed worker + hidden suite in this process.

The flow for one notebook:

1. ``plan_grading`` matches the submission with the instructor notebook: setup
   cells from the instructor copy, solution cells from the student.
2. A :class:`GradingSession` starts a sandboxed worker and executes those cells
   in it. A cell that raises or hangs is remembered; the others still run.
3. The notebook's hidden suite (``autograder/hidden/test_<stem>.py``) runs here
   under pytest. Every test reaches the student only through
   ``autograder.suite.Student``, which goes through this session.
4. A pytest plugin turns each test's outcome into a status, points and a
   message, never showing hidden-test code.

The CLI and nbgrader grade each submission in a process of its own
(``autograder.runner``, forked from a server that has imported all this once), so
that a submission that breaks the grading process itself costs only that
submission. The timeouts, limits, device and hidden paths come from the run's
:class:`~autograder.config.GradingConfig`.
"""
from __future__ import annotations

import importlib
import logging
import re
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest

from . import forbidden
from .config import GradingConfig
from .notebook import REPO, GradingPlan, UnreadableNotebook, plan_grading, read_notebook, test_cell_points
from .report import bounded, clip
from .suite import CellFailed, Forbidden, GradingFailure, Missing, active_session

HIDDEN_DIR = Path(__file__).resolve().parent / "hidden"
log = logging.getLogger("autograder")

# Trusted code the worker imports before any student cell: the item probes and
# fixtures of the hidden suites, and the forbidden-shortcut tripwires.
PROBE_MODULES = [
    "autograder.sandbox.item_probes",
    "autograder.sandbox.exercise_probes",
    "autograder.sandbox.tripwires",
]
# The transformers modules behind each fixture of the hidden suites. Importing one
# takes seconds, and both sides need it: the worker builds the student's copy of a
# model, this process the reference's. A suite's modules are therefore imported by
# the worker at start-up and, at the same time, by a thread here, instead of one
# after the other inside the first test that needs them.
FIXTURE_MODULES = {
    "decoder_lm": ["transformers.models.llama.modeling_llama"],
    "bert_classifier": ["transformers.models.bert.modeling_bert"],
    "bert_mlm": ["transformers.models.bert.modeling_bert"],
    "bert_bare": ["transformers.models.bert.modeling_bert"],
    "prompt_tokenizer": ["transformers.tokenization_utils_fast"],
}


@dataclass
class TestResult:
    grade_id: str
    test: str
    status: str
    points: float
    max_points: float
    message: str


def warm_modules(stem: str) -> list[str]:
    """The slow-to-import modules that the hidden suite of ``stem`` will need."""
    suite = HIDDEN_DIR / f"test_{stem}.py"
    if not suite.is_file():
        return []
    used = set(re.findall(r"""fixture\(\s*["'](\w+)["']""", suite.read_text(encoding="utf-8")))
    return sorted({module for name in used for module in FIXTURE_MODULES.get(name, [])})


def _import_in_background(modules: list[str]) -> None:
    """Import ``modules`` in a daemon thread (a no-op for those the fork server preloaded)."""

    def run() -> None:
        for module in modules:
            try:
                importlib.import_module(module)
            except ImportError:  # the test that needs it will report the problem
                pass

    threading.Thread(target=run, name="warm-imports", daemon=True).start()


# --------------------------------------------------------------------------- session
class GradingSession:
    """The sandboxed worker of one submission, and what went wrong in it."""

    def __init__(self, plan: GradingPlan | None, config: GradingConfig, *, fatal: str | None = None,
                 warm: list[str] | None = None):
        self.plan = plan
        self.config = config
        self.warm = list(warm or [])
        self.fatal = fatal  # set when the notebook cannot be graded at all
        self.cell_errors: dict[str, str] = {}
        self.worker = None
        self.sandbox = "none"
        self.restarts = 0
        self.hung: set[str] = set()  # items whose calls have timed out before

    # -- lifetime
    def start(self) -> None:
        if self.fatal or self.plan is None:
            return
        from week6_helpers.assets import cache_dir

        from .sandbox.launcher import Worker

        config = self.config
        self.worker = Worker(
            hidden_paths=config.hidden_paths,
            # The sandbox sees only system folders and what is exposed here: the student
            # helpers (inside the hidden repository), the model cache and the shipped
            # data sets (not data/sample_submissions, which holds a full solution).
            exposed_paths=[str(REPO / "week6_helpers"), str(cache_dir()),
                           *(str(p) for p in sorted((REPO / "data").iterdir())
                             if p.is_dir() and p.name != "sample_submissions")],
            env={"WEEK6_CACHE": str(cache_dir()), "WEEK6_DATA": str(REPO / "data")},
            preload=PROBE_MODULES + self.warm,
            threads=1,
            limits=config.resource_limits(),
            timeout=config.timeout_call,
            start_timeout=config.timeout_worker_start,
            # The GPU's device nodes only when grading runs on CUDA: --device cpu on a GPU
            # machine must not hand student code the GPU.
            gpu=config.device == "cuda",
        )
        self.sandbox = self.worker.sandbox
        for cell in self.plan.cells:
            self._exec(cell)

    def _exec(self, cell) -> None:
        from .sandbox.errors import SandboxError

        try:
            result = self.worker.exec_cell(cell.source, cell_id=cell.grade_id,
                                           timeout=self.config.timeout_cell)
            if not result.ok:
                self.cell_errors[cell.grade_id] = f"{result.error.type_name}: {result.error.message}"
        except SandboxError as err:
            self.cell_errors[cell.grade_id] = (
                f"running the cell did not finish ({type(err).__name__}: {err}); "
                "solution cells must only define functions, not run experiments"
            )
            self._restart()

    def _restart(self) -> None:
        self.restarts += 1
        if self.restarts > self.config.max_restarts:
            self.fatal = "grading stopped: the submission crashed or hung the sandbox too many times"
            return
        self.worker.restart()

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    # -- what tests call (through autograder.suite.Student)
    def _check(self, solution: str) -> None:
        if self.fatal:
            raise Missing(self.fatal)
        if solution in self.plan.missing:
            raise Missing(self.plan.missing[solution])
        if solution in self.cell_errors:
            raise CellFailed(f"the cell '{solution}' failed when it was run: {self.cell_errors[solution]}")
        used = forbidden.static_violations(solution, self.plan.solution_source(solution) or "")
        if used:
            raise Forbidden(forbidden.message(solution, used))

    def _timeout(self, solution: str, requested: float | None) -> float:
        """A call's timeout: the test's own or the config's; an item that has hung before gets less."""
        timeout = requested or self.config.timeout_call
        return min(timeout, self.config.timeout_hung_call) if solution in self.hung else timeout

    def _guarded(self, solution: str, action):
        from .sandbox.errors import ProtocolError, WorkerCrashed, WorkerTimeout

        self._check(solution)
        try:
            return action()
        except WorkerTimeout:
            self.hung.add(solution)
            self._restart()
            raise
        except (WorkerCrashed, ProtocolError):
            self._restart()
            raise

    def call(self, solution: str, name: str, args, kwargs, *, timeout: float | None) -> Any:
        rule = forbidden.RULES.get(solution)
        if rule and rule.tripwires:
            return self.probe(solution, "guarded_call",
                              {"name": name, "args": list(args), "kwargs": dict(kwargs),
                               "tripwires": list(rule.tripwires)}, timeout=timeout)
        return self._guarded(
            solution, lambda: self.worker.call(name, *args, timeout=self._timeout(solution, timeout), **kwargs)
        )

    def probe(self, solution: str, probe: str, params: dict, *, timeout: float | None) -> Any:
        rule = forbidden.RULES.get(solution)
        if rule and rule.tripwires and probe != "guarded_call":
            params = {"probe": probe, "params": params, "tripwires": list(rule.tripwires)}
            probe = "guarded_probe"
        result = self._guarded(
            solution, lambda: self.worker.probe(probe, params, timeout=self._timeout(solution, timeout))
        )
        if probe in ("guarded_call", "guarded_probe"):
            if result["tripped"]:
                raise Forbidden(forbidden.message(solution, sorted(result["tripped"])))
            return result["value"]
        return result


# --------------------------------------------------------------------------- pytest plugin
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
                                  points=float(marker.kwargs["points"]), status="skipped", message=""))
            return
        if report.when != "call" and not report.failed:
            return
        if report.when == "call" and report.passed:
            status, message = "passed", ""
        elif call.excinfo is not None:
            status, message = classify(call.excinfo)
        else:
            return
        # Clipped here, before anything keeps it: a message may quote a returned value.
        self.rows.append(dict(cell=marker.kwargs["cell"], function=function, test=item.name,
                              points=float(marker.kwargs["points"]), status=status, message=clip(message)))

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
                row["status"], row["message"] = "forbidden", forbidden[row["cell"]]
        results = []
        for row in ran:
            share = row["points"] / variants[(row["cell"], row["function"])]
            earned = share if row["status"] == "passed" else 0.0
            results.append(TestResult(row["cell"], row["test"], row["status"], round(earned, 4),
                                      round(share, 4), row["message"]))
        return results


def run_hidden_suite(stem: str, session: GradingSession, *, device: str) -> list[TestResult]:
    suite = HIDDEN_DIR / f"test_{stem}.py"
    if not suite.is_file():
        return []
    collector = ResultCollector()
    args = [
        # --assert=plain and --tb=no: messages come from GradingFailure alone, and no
        # time goes into formatting tracebacks (with tensor dumps) nobody will see.
        str(suite), "-q", "-p", "no:cacheprovider", "--assert=plain", "--tb=no", "--no-header",
        "-c", str(HIDDEN_DIR / "pytest.ini"), "--rootdir", str(HIDDEN_DIR), "-o", "console_output_style=classic",
    ]
    if device == "cpu":
        args += ["-m", "not cuda"]
    with active_session(session):
        pytest.main(args, plugins=[collector])
    return collector.results()


# --------------------------------------------------------------------------- one notebook
def grade_notebook(path: Path, *, student: str, config: GradingConfig) -> dict:
    """Grade one notebook as ``config`` says and return its report (see README for the schema)."""
    started = time.perf_counter()
    device = config.device
    stem = Path(path).stem
    warnings: list[str] = []
    plan, fatal = None, None
    try:
        plan = plan_grading(read_notebook(path), stem)
        warnings = plan.warnings
    except UnreadableNotebook as err:
        fatal = str(err)

    warm = warm_modules(stem) if plan is not None else []
    _import_in_background(warm)
    session = GradingSession(plan, config, fatal=fatal, warm=warm)
    try:
        try:
            session.start()
        except Exception as err:  # the sandbox itself failed: report, do not crash the class
            session.fatal = f"the sandbox could not start: {err}"
        known = (REPO / "solutions" / "week6" / f"{stem}.ipynb").is_file()
        results = run_hidden_suite(stem, session, device=device) if known else []
    finally:
        session.close()

    max_score = sum(test_cell_points(stem).values()) if known else 0.0
    score = round(sum(r.points for r in results), 4)
    return bounded({
        "student": student,
        "assignment": "week6",
        "outcome": "graded",
        "notebook": Path(path).name,
        "score": score,
        "max_score": max_score,
        "sandbox": session.sandbox,
        "device": device,
        "duration_s": round(time.perf_counter() - started, 2),
        "tests": [asdict(r) for r in results],
        "warnings": warnings + ([fatal] if fatal else []),
    })
