"""The grading session of one submission: its sandboxed worker, and what went wrong in it.

A :class:`GradingSession` starts the worker (``autograder.sandbox.worker.Worker``)
as the run's :class:`~autograder.config.GradingConfig` says, executes the plan's
cells in it (a cell that raises or hangs is remembered; the others still run),
and then serves the hidden tests' calls and probes: it refuses an item whose cell
is missing, failed or uses a forbidden shortcut, applies the call timeouts, wires
the run-time watch on forbidden shortcuts (``sandbox.watch``), and restarts a worker that hung or crashed.

What the worker sees of the grader: the generic sandbox package, the course's
drivers (``autograder.drivers``), the student helpers, the model cache and the
shipped data sets; never the references, the hidden suites, the instructor
notebooks or the sample submissions.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from typing import Any

from . import drivers, forbidden
from .config import GradingConfig
from .paths import REPO
from .plan import GradingPlan

log = logging.getLogger("autograder")

def sandbox_view(config: GradingConfig) -> dict[str, Any]:
    """What a worker (or a zygote) of this run sees and preloads: ``Worker``'s arguments."""
    from week6_helpers.assets import cache_dir

    return dict(
        hidden_paths=config.hidden_paths,
        # The sandbox sees only system folders and what is exposed here: the drivers,
        # the student helpers (inside the hidden repository), the model cache and the
        # shipped data sets (not data/sample_submissions, which holds a full solution).
        exposed_paths=[str(drivers.PACKAGE_DIR), str(REPO / "week6_helpers"), str(cache_dir()),
                       *(str(p) for p in sorted((REPO / "data").iterdir())
                         if p.is_dir() and p.name != "sample_submissions")],
        env={"WEEK6_CACHE": str(cache_dir()), "WEEK6_DATA": str(REPO / "data")},
        preload=list(drivers.WORKER_MODULES),
        threads=1,
        # The GPU's device nodes only when grading runs on CUDA: --device cpu on a GPU
        # machine must not hand student code the GPU.
        gpu=config.device == "cuda",
    )


@contextlib.contextmanager
def zygote_pool(config: GradingConfig, size: int, *, prestart: int = 0) -> Iterator[GradingConfig]:
    """``config`` with the address of a pool of up to ``size`` zygotes, for the length of
    the block; ``config`` unchanged where zygotes are off or bubblewrap is unusable.
    ``prestart`` of them start at once, the rest when a job first needs them.

    The zygotes preload, besides a worker's modules, every module the fixtures
    declare (``drivers.fixture_modules``): a forked worker never imports them again."""
    from .sandbox.isolation import bwrap_support
    from .sandbox.zygote import ZygotePool

    if not config.zygote or not bwrap_support().usable:
        yield config
        return
    view = sandbox_view(config)
    view["preload"] = [*view["preload"], "autograder.drivers.fixture_modules"]
    view["start_timeout"] = config.timeout_worker_start
    with ZygotePool(size, prestart=prestart, **view) as pool:
        yield dataclasses.replace(config, zygote_address=pool.address)


class SubmissionSandbox:
    """The sandboxed worker of one submission, shared by its notebooks.

    The first notebook starts the worker (forked from a zygote of the run's pool
    when there is one); each later notebook gets a fresh namespace in the same
    process (``Worker.reset``), which saves starting and stopping a sandbox per
    notebook. A worker that hung or crashed, or whose reset fails, is replaced by a
    new one before the next notebook. Another submission never shares it."""

    def __init__(self, config: GradingConfig):
        self.config = config
        self.worker = None
        self.lease = None  # the hold on a zygote of the run's pool, if there is one
        self._reusable = False

    def worker_for_notebook(self):
        from .sandbox.errors import SandboxError, StudentError

        if self.worker is not None and self._reusable:
            self._reusable = False
            try:
                self.worker.reset(timeout=self.config.timeout_worker_start)
                return self.worker
            except (SandboxError, StudentError) as exc:  # the last notebook broke the worker
                log.info("starting a new worker: the reset failed: %s", exc)
        self._stop_worker()
        self.worker = self._start_worker()
        return self.worker

    def notebook_done(self, *, reusable: bool) -> None:
        self._reusable = reusable

    def _start_worker(self):
        from .sandbox.worker import Worker
        from .sandbox.zygote import ZygoteLease, ZygoteUnavailable

        config = self.config
        if config.zygote_address is not None and self.lease is None:
            try:
                self.lease = ZygoteLease(config.zygote_address, timeout=config.timeout_worker_start)
            except ZygoteUnavailable as exc:
                log.warning("starting a cold worker: %s", exc)
        return Worker(
            **sandbox_view(config),
            limits=config.resource_limits(),
            timeout=config.timeout_call,
            start_timeout=config.timeout_worker_start,
            zygote=self.lease,
        )

    def _stop_worker(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def close(self) -> None:
        self._stop_worker()
        if self.lease is not None:
            self.lease.close()
            self.lease = None

    def __enter__(self) -> SubmissionSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class GradingSession:
    """The sandboxed worker of one notebook, and what went wrong in it."""

    def __init__(self, plan: GradingPlan | None, config: GradingConfig, *, fatal: str | None = None,
                 submission: SubmissionSandbox | None = None):
        self.plan = plan
        self.config = config
        self.fatal = fatal  # set when the notebook cannot be graded at all
        self.cell_errors: dict[str, str] = {}
        self.worker = None
        # The worker comes from the submission's sandbox, shared with its other notebooks;
        # a session given none has a sandbox of its own, closed with the session.
        self._owns_submission = submission is None
        self.submission = submission or SubmissionSandbox(config)
        self.sandbox = "none"  # bwrap or degraded once a worker ran
        self.restarts = 0
        self.hung: set[str] = set()  # items whose calls have timed out before
        self.warmed: set[str] = set()  # fixtures whose modules this worker has imported

    # -- lifetime
    def start(self) -> None:
        if self.fatal or self.plan is None:
            return
        self.worker = self.submission.worker_for_notebook()
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
        self.warmed.clear()

    def close(self) -> None:
        if self.worker is not None:
            # A worker that hung or crashed in this notebook is not trusted with the next.
            self.submission.notebook_done(reusable=self.restarts == 0 and not self.hung and not self.fatal)
            self.worker = None
        if self._owns_submission:
            self.submission.close()

    # -- what tests call (through autograder.suite.Student)
    def _check(self, solution: str) -> None:
        from .suite import CellFailed, Forbidden, Missing  # torch: not imported until grading starts

        if self.fatal:
            raise Missing(self.fatal)
        if solution in self.plan.missing:
            raise Missing(self.plan.missing[solution])
        if solution in self.cell_errors:
            raise CellFailed(f"the cell '{solution}' failed when it was run: {self.cell_errors[solution]}")
        if solution in self.plan.forbidden:
            raise Forbidden(forbidden.message(solution, self.plan.forbidden[solution]))

    def _warm(self, payload: Any) -> None:
        """Import the modules of the fixtures in ``payload`` that this worker has not built yet.

        Building the first model imports a second of ``transformers``; done here, it
        counts against the start-up timeout rather than the call's, and a notebook
        whose suite builds no model never pays for it."""
        from .sandbox.fixtures import fixture_imports, fixture_names

        if self.worker.forked:
            return  # forked from a zygote, which preloaded every fixture's modules
        names = fixture_names(payload) - self.warmed
        if names and fixture_imports(names):
            self.worker.probe("import_fixture_modules", {"fixtures": sorted(names)},
                              timeout=self.config.timeout_worker_start)
        self.warmed |= names

    def _timeout(self, solution: str, requested: float | None) -> float:
        """A call's timeout: the test's own or the config's; an item that has hung before gets less."""
        timeout = requested or self.config.timeout_call
        return min(timeout, self.config.timeout_hung_call) if solution in self.hung else timeout

    def _guarded(self, solution: str, payload: Any, action):
        from .sandbox.errors import ProtocolError, WorkerCrashed, WorkerTimeout

        self._check(solution)
        try:
            self._warm(payload)
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
        if rule and rule.watched:
            return self.probe(solution, "guarded_call",
                              {"name": name, "args": list(args), "kwargs": dict(kwargs), **rule.watch_params()},
                              timeout=timeout)
        return self._guarded(
            solution, (args, kwargs),
            lambda: self.worker.call(name, *args, timeout=self._timeout(solution, timeout), **kwargs),
        )

    def probe(self, solution: str, probe: str, params: dict, *, timeout: float | None) -> Any:
        rule = forbidden.RULES.get(solution)
        if rule and rule.watched and probe != "guarded_call":
            params = {"probe": probe, "params": params, **rule.watch_params()}
            probe = "guarded_probe"
        result = self._guarded(
            solution, params, lambda: self.worker.probe(probe, params, timeout=self._timeout(solution, timeout))
        )
        if probe in ("guarded_call", "guarded_probe"):
            from .suite import Forbidden

            if result.get("tampered"):
                raise Forbidden(forbidden.tamper_message(solution, list(result["tampered"])))
            if result["tripped"]:
                raise Forbidden(forbidden.message(solution, sorted(result["tripped"])))
            return result["value"]
        return result
