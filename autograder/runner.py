"""Run one grading job in its own process, and never let it take the class down.

Each submission (one student's notebooks) is graded in a process of its own,
which starts one sandboxed worker for them all. Whatever happens there, a crash of
the grading process, a hang past a notebook's deadline, a report that does not
parse, every notebook gets a report, with the reason in ``warnings``, and the
notebooks after a failed one are graded in a new process.

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
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .config import GradingConfig
from .paths import REPO
from .report import Report

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


def run_forked(target: Callable, args: Sequence, *, timeout: float, log_path: Path,
               on_event: Callable[[Any], None] | None = None) -> int | None:
    """Run ``target(*args)`` in a process forked from the fork server.

    ``target`` must be a module-level function (it is sent to the server by name).
    Its stdout and stderr go to ``log_path``. Returns the process's exit status
    (negative: killed by that signal), or None when it ran past ``timeout`` seconds
    and was killed with every process it had started.

    With ``on_event``, ``target`` gets one more argument, a connection: each
    ``send(event)`` there reaches ``on_event(event)`` here, in order, and starts the
    deadline again, so a job of several steps is stopped only when one step runs
    past ``timeout``.
    """
    from .sandbox.process_tree import kill_tree

    context = _fork_context()
    receiver = sender = None
    if on_event is not None:
        receiver, sender = context.Pipe(duplex=False)
        args = (*args, sender)
    process = context.Process(target=_job_main, args=(target, tuple(args), str(log_path)), daemon=False)
    timed_out = False
    try:
        with _start_lock:
            process.start()
        if sender is not None:
            sender.close()  # the job holds the only writer: the end of the job is the end of the stream
        deadline = time.monotonic() + timeout
        while receiver is not None:
            if not receiver.poll(max(0.0, deadline - time.monotonic())):
                break  # past the deadline
            try:
                event = receiver.recv()
            except EOFError:
                break  # the job ended (or closed its end)
            deadline = time.monotonic() + timeout
            on_event(event)
        process.join(max(0.0, deadline - time.monotonic()))
        timed_out = process.is_alive()
    finally:
        if receiver is not None:
            receiver.close()
        if process.pid is not None and process.is_alive():
            # The job, its sandboxed worker and whatever they started; the worker is in a
            # session of its own, so the job's process group alone would miss it.
            kill_tree(process.pid)
        if process.pid is not None:
            process.join()
    status = process.exitcode
    process.close()
    return None if timed_out else status


def _grade_job(notebooks: list[str], student: str, config: GradingConfig, events) -> None:
    """Grade one submission's notebooks in order, in one worker (fresh namespace each);
    tell the caller when each starts and send each report as soon as it is done."""
    import resource

    import torch

    from .grading import grade_notebook
    from .session import SubmissionSandbox

    # One grading process per job and core: more threads only contend.
    torch.set_num_threads(1)
    with SubmissionSandbox(config) as submission:
        for index, notebook in enumerate(notebooks):
            events.send(("started", index))
            report = grade_notebook(Path(notebook), student=student, config=config, submission=submission)
            # What grading has cost the trusted process so far (the sandboxed worker and
            # its children excluded): the threat model bounds it, and the tests check it.
            report.grader_peak_rss_mib = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
            events.send(("graded", index, json.dumps(report.to_json())))


def grade_submission(notebooks: Sequence[Path], *, student: str, config: GradingConfig,
                     on_report: Callable[[int, Report], None], job: Callable = _grade_job) -> None:
    """Grade one student's ``notebooks`` and call ``on_report(i, report)`` for each, as
    soon as it is graded (in order).

    They are graded in one process of their own, in one sandboxed worker, each
    within ``config.timeout_notebook``. A notebook whose grading crashed the process
    or ran past the deadline gets a report saying so, and the notebooks after it are
    graded in a new process: every notebook gets exactly one report. ``job`` is the
    module-level function the process runs (``_grade_job``; the tests' stand-ins
    hang or crash on purpose).
    """
    # Absolute (the job runs from the repository) but not resolved: a notebook that is a
    # symbolic link stays one, and the reader refuses it instead of reading its target.
    paths = [os.path.abspath(notebook) for notebook in notebooks]
    timeout, device = config.timeout_notebook, config.device
    first = 0
    while first < len(paths):
        graded = first

        def receive(event, first=first) -> None:
            nonlocal graded
            if event[0] != "graded":
                return
            index = first + event[1]
            try:
                report = Report.from_json(json.loads(event[2]))
            except ValueError as err:
                report = Report.problem(student, Path(paths[index]).name, f"unreadable grading report: {err}",
                                        device=device, outcome="failed")
            graded = index + 1
            on_report(index, report)

        with tempfile.TemporaryDirectory(prefix="autograder-job-") as scratch:
            log = Path(scratch) / "log.txt"
            status = run_forked(job, (paths[first:], student, config), timeout=timeout, log_path=log,
                                on_event=receive)
            if graded < len(paths):  # the notebook being graded when the process ended or was stopped
                name = Path(paths[graded]).name
                if status is None:
                    reason = f"grading did not finish within {timeout:.0f} s and was stopped"
                else:
                    tail = (log.read_bytes()[-4096:].decode(errors="replace").strip().splitlines()[-5:]
                            if log.is_file() else [])
                    reason = f"the grader process failed (exit {status}): " + " | ".join(tail)
                on_report(graded, Report.problem(student, name, reason, device=device, outcome="failed"))
                graded += 1
        first = graded


def grade_in_subprocess(notebook: Path, *, student: str, config: GradingConfig) -> Report:
    """Grade ``notebook`` in a process of its own, within ``config.timeout_notebook``, and return its report."""
    reports: list[Report] = []
    grade_submission([notebook], student=student, config=config, on_report=lambda _, report: reports.append(report))
    return reports[0]
