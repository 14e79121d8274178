"""Run one grading job in its own process, and never let it take the class down.

Each submission is graded in a process of its own (which in turn starts the
sandboxed worker). Whatever happens there, a crash of the grading process, a hang
past the job's deadline, a report that does not parse, the caller gets a report
back, with the reason in ``warnings``.

The processes are forked from a *fork server* (``multiprocessing``'s
``forkserver``) that has imported torch, transformers, pytest and the grader
once. Starting Python and importing those costs seconds of CPU; paid once per
run instead of once per submission, that saves close to half of the time per
submission (README, "Grading speed"). Each job is still a fresh process, forked from the server's
pristine state (never from a process that graded someone else), in a session of
its own so that the whole job can be killed; the server itself never runs a
tensor operation or touches CUDA, so forking it is safe.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from .config import GradingConfig
from .intake import IntakeError
from .notebook import REPO
from .report import Report, read_report

# Imported once by the fork server: torch, pytest, the grader, the transformers
# modules of the suites' fixtures and every reference module (see preload.py).
PRELOAD = ["autograder.preload"]

_context_lock = threading.Lock()
_context = None
# Process.start() tidies multiprocessing's global list of children; the CLI starts
# jobs from several threads, so starts are taken one at a time.
_start_lock = threading.Lock()


def _fork_context():
    """The forkserver context, with the grader's modules preloaded (started on first use)."""
    global _context
    with _context_lock:
        if _context is None:
            import multiprocessing

            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(PRELOAD)
            _context = context
        return _context


def start_fork_server() -> None:
    """Start the fork server now, so that its imports overlap with the caller's other
    start-up work (the zygotes' imports) instead of delaying the first job."""
    import multiprocessing.forkserver

    _fork_context()
    multiprocessing.forkserver.ensure_running()


def _job_main(target: Callable, args: Sequence, log_path: str) -> None:
    """First code of a forked job: own session, output to the log, then the job."""
    os.setsid()  # a group of its own: a timeout kills the job and everything it started
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.chdir(REPO)
    target(*args)
    sys.stdout.flush()
    sys.stderr.flush()


def run_forked(target: Callable, args: Sequence, *, timeout: float, log_path: Path) -> int | None:
    """Run ``target(*args)`` in a process forked from the fork server.

    ``target`` must be a module-level function (it is sent to the server by name).
    Its stdout and stderr go to ``log_path``. Returns the process's exit status
    (negative: killed by that signal), or None when it ran past ``timeout`` seconds
    and was killed with every process it had started.
    """
    from .sandbox.process_tree import kill_tree

    context = _fork_context()
    process = context.Process(target=_job_main, args=(target, tuple(args), str(log_path)), daemon=False)
    with _start_lock:
        process.start()
    process.join(timeout)
    timed_out = process.is_alive()
    if timed_out:
        # The job, its sandboxed worker and whatever they started; the worker is in a
        # session of its own, so the job's process group alone would miss it.
        kill_tree(process.pid)
    process.join()
    status = process.exitcode
    process.close()
    return None if timed_out else status


def _grade_job(notebook: str, student: str, config: GradingConfig, out: str) -> None:
    import resource

    import torch

    from .grading import grade_notebook

    # One grading process per job and core: more threads only contend.
    torch.set_num_threads(1)
    report = grade_notebook(Path(notebook), student=student, config=config)
    # What grading this notebook cost the trusted process (the sandboxed worker and
    # its children excluded): the threat model bounds it, and the tests check it.
    report.grader_peak_rss_mib = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    Path(out).write_text(json.dumps(report.to_json(), indent=2) + "\n")


def grade_in_subprocess(notebook: Path, *, student: str, config: GradingConfig) -> Report:
    """Grade ``notebook`` in a process of its own, within ``config.timeout_notebook``, and return its report."""
    timeout, device = config.timeout_notebook, config.device
    with tempfile.TemporaryDirectory(prefix="autograder-job-") as scratch:
        out, log = Path(scratch) / "report.json", Path(scratch) / "log.txt"
        status = run_forked(_grade_job, (str(Path(notebook).resolve()), student, config, str(out)),
                            timeout=timeout, log_path=log)
        name = Path(notebook).name
        if status is None:
            return Report.problem(student, name, f"grading did not finish within {timeout:.0f} s and was stopped",
                                  device=device, outcome="failed")
        if status != 0 or not out.is_file():
            tail = log.read_bytes()[-4096:].decode(errors="replace").strip().splitlines()[-5:] if log.is_file() else []
            return Report.problem(student, name, f"the grader process failed (exit {status}): " + " | ".join(tail),
                                  device=device, outcome="failed")
        try:
            return read_report(out)
        except (IntakeError, ValueError) as err:
            return Report.problem(student, name, f"unreadable grading report: {err}", device=device,
                                  outcome="failed")
