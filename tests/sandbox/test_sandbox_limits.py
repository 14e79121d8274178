"""Resource limits hold inside the worker and cost the grader nothing.

One tightly limited worker per sandbox kind; the CPU test runs last because it
ends the worker.
"""
from __future__ import annotations

import errno

import pytest

from autograder.sandbox.errors import StudentError, WorkerCrashed
from autograder.sandbox.launcher import Worker
from autograder.sandbox.limits import GiB, MiB, ResourceLimits

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
