"""Resource limits hold inside the worker and cost the grader nothing.

Per-process limits: one tightly limited worker per sandbox kind; the CPU test runs
last because it ends the worker. Whole-tree limits: one worker per test, per sandbox
kind and per backend (cgroup, watchdog).
"""
from __future__ import annotations

import dataclasses
import errno
import time

import psutil
import pytest

from autograder.sandbox.errors import LimitExceeded, StudentError, WorkerCrashed
from autograder.sandbox.worker import Worker
from autograder.sandbox.limits import GiB, MiB, ResourceLimits
from autograder.sandbox.tree_limits import create_cgroup

LIMITS = ResourceLimits(memory_bytes=1 * GiB, cpu_seconds=5, open_files=64, file_size_bytes=1 * MiB)

GREEDY = """
import os, time, torch

def tensor_of(nbytes):
    return int(torch.empty(nbytes, dtype=torch.uint8).numel())

def bytes_of(nbytes):
    return len(bytearray(nbytes))

def write_file(nbytes):
    try:
        with open("/tmp/big.bin", "wb") as f:
            f.write(b"x" * nbytes)
        return 0
    except OSError as e:
        return e.errno

def open_many(count):
    handles = []
    try:
        for _ in range(count):
            handles.append(open(os.devnull))
        return 0
    except OSError as e:
        return e.errno
    finally:
        for h in handles:
            h.close()

def spin():
    while True:
        pass
"""


@pytest.fixture(scope="module")
def limited(sandbox):
    with Worker(isolation=sandbox, limits=LIMITS, timeout=30) as worker:
        worker.exec_cell(GREEDY).raise_for_error()
        yield worker


def test_allocating_beyond_the_memory_limit_fails_inside_the_worker(limited):
    # 2 GiB is well within what the kernel would lazily grant without the limit.
    assert limited.call("tensor_of", 256 * MiB) == 256 * MiB
    with pytest.raises(StudentError, match="can't allocate memory"):
        limited.call("tensor_of", 2 * GiB)
    with pytest.raises(StudentError, match="MemoryError"):
        limited.call("bytes_of", 2 * GiB)
    assert limited.ping()["pid"]  # the worker, and of course the grader, live on


def test_oversized_files_fail_with_efbig_instead_of_killing_the_worker(limited):
    assert limited.call("write_file", 512 * 1024) == 0
    assert limited.call("write_file", 2 * MiB) == errno.EFBIG
    assert limited.ping()["pid"]


def test_open_files_are_limited(limited):
    assert limited.call("open_many", 10) == 0
    assert limited.call("open_many", 100) == errno.EMFILE


def test_cpu_time_is_limited_over_the_workers_life(limited):
    # SIGXCPU at 5 CPU seconds (start-up included); the wall-clock timeout is far away.
    with pytest.raises(WorkerCrashed):
        limited.call("spin", timeout=60)


# ------------------------------------------------------------ whole-tree limits
# Each test starts its own worker with small tree limits, through each backend: the
# cgroup where this machine offers one, and the watchdog alone everywhere.

def _cgroup_unavailable() -> str:
    cgroup = create_cgroup(ResourceLimits())
    if cgroup is None:
        return "no writable cgroup with the memory and pids controllers here"
    cgroup.remove()
    return ""


CGROUP_MISSING = _cgroup_unavailable()
needs_cgroup = pytest.mark.skipif(bool(CGROUP_MISSING), reason=CGROUP_MISSING)


@pytest.fixture(params=[pytest.param("cgroup", marks=needs_cgroup), "watchdog"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def grader_unharmed():
    """The grader's memory does not grow and no process of the test's worker is left."""
    grader = psutil.Process()
    before_rss = grader.memory_info().rss
    before_children = {p.pid for p in grader.children(recursive=True)}
    yield
    assert _eventually(lambda: {p.pid for p in grader.children(recursive=True)} <= before_children), \
        "processes of the worker outlived it"
    assert grader.memory_info().rss - before_rss < 64 * MiB


def _eventually(condition, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


TREE_LIMITS = ResourceLimits(memory_bytes=1 * GiB, cpu_seconds=60, tree_memory_bytes=512 * MiB,
                             tree_processes=64, tree_cpu_seconds=30, scratch_bytes=16 * MiB,
                             file_size_bytes=8 * MiB)

CHILDREN = """
import os, time

def _in_children(count, work):
    pids = []
    for _ in range(count):
        pid = os.fork()
        if pid == 0:
            work()
            os._exit(0)
        pids.append(pid)
    for pid in pids:
        os.waitpid(pid, 0)
    return "the children finished"

def hold_memory_in_children(count, nbytes):
    def work():
        block = b"x" * nbytes  # written, so resident
        time.sleep(60)
    return _in_children(count, work)

def spin_in_children(count, seconds):
    def work():
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
    return _in_children(count, work)

def fork_bomb():
    while True:
        try:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
        except OSError:  # refused by the kernel: try again
            pass

def fill_scratch(count, nbytes):
    for index in range(count):
        with open(os.path.join(os.environ["HOME"], f"block-{index}"), "wb") as f:
            f.write(b"x" * nbytes)
    time.sleep(60)

def small():
    return 1
"""


def _tree_worker(sandbox: str, backend: str, limits: ResourceLimits = TREE_LIMITS) -> Worker:
    worker = Worker(isolation=sandbox, limits=limits, timeout=60, tree_limits_backend=backend)
    assert worker._tree_limits.backend == backend
    worker.exec_cell(CHILDREN).raise_for_error()
    return worker


def test_children_together_over_the_tree_memory_limit_fail_the_call(sandbox, backend, grader_unharmed):
    # Four children of 300 MB each, every one far under its own 1 GiB RLIMIT_DATA.
    with _tree_worker(sandbox, backend) as worker:
        with pytest.raises(LimitExceeded, match=r"more than 512 MiB of memory together") as caught:
            worker.call("hold_memory_in_children", 4, 300 * MiB)
        assert caught.value.limit == "memory" and caught.value.value == 512 * MiB
        assert not worker.alive
        worker.restart()  # a fresh worker with a fresh budget
        assert worker.call("small") == 1


def test_a_fork_bomb_is_stopped_by_the_process_limit(sandbox, backend, grader_unharmed):
    with _tree_worker(sandbox, backend) as worker:
        started = time.monotonic()
        with pytest.raises(LimitExceeded, match="reached the limit of 64 processes and threads") as caught:
            worker.call("fork_bomb")
        assert caught.value.limit == "processes"
        assert time.monotonic() - started < 30  # stopped by the limit, not the 60 s timeout
        worker.restart()
        assert worker.call("small") == 1


def test_cpu_time_spread_over_children_is_limited_for_the_tree(sandbox, backend, grader_unharmed):
    # Two children spinning for 20 s each stay under their own 60 s RLIMIT_CPU; 6 s
    # for the whole tree (start-up takes about 1 s of it) ends them after about 3 s.
    limits = dataclasses.replace(TREE_LIMITS, tree_cpu_seconds=6)
    with _tree_worker(sandbox, backend, limits) as worker:
        started = time.monotonic()
        with pytest.raises(LimitExceeded, match="more than 6 s of CPU time together") as caught:
            worker.call("spin_in_children", 2, 20)
        assert caught.value.limit == "cpu"
        assert time.monotonic() - started < 15


@pytest.mark.parametrize("sandbox", ["degraded"])
def test_the_scratch_folder_is_bounded_in_degraded_mode(sandbox, backend, grader_unharmed):
    # Under bubblewrap /tmp is a tmpfs of fixed size; a plain process writes to the
    # scratch folder on disk, and the watchdog measures it.
    with _tree_worker(sandbox, backend) as worker:
        with pytest.raises(LimitExceeded, match="more than 16 MiB to its scratch folder") as caught:
            worker.call("fill_scratch", 4, 6 * MiB)  # each file under the 8 MiB RLIMIT_FSIZE
        assert caught.value.limit == "scratch"
