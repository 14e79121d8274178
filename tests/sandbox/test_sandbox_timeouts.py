"""Hangs, crashes and restarts, in both sandbox kinds.

Each test leaves the shared worker dead or alive; the next one restarts it if needed.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import psutil
import pytest
import torch

from autograder.sandbox.errors import WorkerCrashed, WorkerTimeout

DEFINITIONS = "import torch\ndef triple(x):\n    return 3 * x\n"


@pytest.fixture
def fresh(worker):
    """The module's worker, running, with ``triple`` defined by a successful cell."""
    if not worker.alive:
        worker.restart()
    worker.exec_cell(DEFINITIONS, cell_id="definitions").raise_for_error()
    return worker


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_call_that_never_returns_times_out_and_the_worker_restarts(fresh):
    fresh.exec_cell("def spin():\n    while True:\n        pass\n").raise_for_error()
    pid = fresh.pid
    started = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"call spin\(\) did not finish within 1 s"):
        fresh.call("spin", timeout=1)
    assert time.monotonic() - started < 5
    assert not fresh.alive and gone(pid)
    with pytest.raises(WorkerCrashed, match="call restart"):
        fresh.call("triple", torch.ones(1))
    replayed = fresh.restart()
    assert all(result.ok for result in replayed)
    assert torch.equal(fresh.call("triple", torch.ones(2)), torch.full((2,), 3.0))


def test_a_cell_that_ignores_sigint_and_loops_is_still_killed(fresh):
    pid = fresh.pid
    hung = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"
    with pytest.raises(WorkerTimeout):
        fresh.exec_cell(hung, cell_id="hangs", timeout=1)
    assert not fresh.alive and gone(pid)
    replayed = fresh.restart()
    assert "hangs" not in [result.cell_id for result in replayed]  # the cell that hung is not re-run
    assert "definitions" in [result.cell_id for result in replayed]
    assert torch.equal(fresh.call("triple", torch.ones(1)), torch.full((1,), 3.0))


def test_os_exit_is_reported_as_a_crash_at_once_even_if_a_forked_child_holds_the_pipes(fresh):
    # The child inherits the worker's pipes, so the grader sees no end of file: it
    # must notice that the worker process itself has exited.
    fresh.exec_cell(
        "import os, time\n"
        "def fork_and_die():\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(60)\n"
        "        os._exit(0)\n"
        "    print('last words', flush=True)\n"
        "    os._exit(7)\n"
    ).raise_for_error()
    started = time.monotonic()
    with pytest.raises(WorkerCrashed, match="exit status 7") as caught:
        fresh.call("fork_and_die", timeout=20)
    assert time.monotonic() - started < 5  # not the 20 s timeout
    assert "last words" in str(caught.value)
    fresh.restart()
    assert fresh.ping()["pid"]


def test_restart_drops_a_replayed_cell_that_now_hangs(fresh, tmp_path_factory):
    # The cell hangs once a file exists. The grader creates it between the first run
    # and the replay, in the folder the worker was given read access to.
    from tests.sandbox.conftest import TRIGGERS

    trigger = Path(tempfile.mkdtemp(dir=TRIGGERS))
    trigger.chmod(0o755)  # the worker may be a stranger to the grader (a root grader's sandbox user)
    flag = trigger / "hang-now"
    flaky = f"import os\nwhile os.path.exists({str(flag)!r}):\n    pass\n"
    try:
        fresh.exec_cell(flaky, cell_id="flaky", timeout=1).raise_for_error()
        fresh.exec_cell("after_flaky = 1", cell_id="after").raise_for_error()
        flag.touch()
        results = {result.cell_id: result for result in fresh.restart()}
    finally:
        shutil.rmtree(trigger, ignore_errors=True)
    assert results["definitions"].ok and results["after"].ok
    assert not results["flaky"].ok and results["flaky"].error.type_name == "WorkerTimeout"
    assert fresh.alive and fresh.call("triple", 1) == 3
