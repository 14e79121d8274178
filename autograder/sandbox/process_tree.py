"""Killing a worker together with every process it started.

Killing the process group is not enough: student code can ``setsid()`` into a new
session, and a double fork leaves a grandchild whose parent has exited. Two things
keep such processes findable as *descendants* of the process we started:

* under bubblewrap, orphans are re-parented to the pid namespace's init, which is a
  child of the ``bwrap`` process; when that init dies the kernel kills the rest;
* in both modes the worker makes itself a *child subreaper*
  (``PR_SET_CHILD_SUBREAPER``), so orphans of student processes are re-parented to
  the worker instead of the host's init.

The tree is frozen with SIGSTOP before anything is killed: a stopped process can
neither fork nor exit, so no child escapes by being re-parented mid-kill.

Under a grader running as root the worker's processes belong to a host user of
their own (``isolation``); root may still signal them and read their
``/proc/<pid>/environ``, so nothing here depends on who they run as. Where the
worker has a cgroup, ``tree_limits`` also kills whatever is left in it.
"""
from __future__ import annotations

import contextlib
import os
import signal

import psutil

MAX_ROUNDS = 50


def kill_tree(root_pid: int) -> None:
    """SIGKILL ``root_pid`` and all its descendants; a no-op for a process that is gone."""
    kill_processes(freeze_tree(root_pid))
    _kill_group(root_pid)


def freeze_tree(root_pid: int) -> list[psutil.Process]:
    """SIGSTOP ``root_pid`` and its descendants, and return them.

    Stops from the root down until a pass finds nothing new: a process that forked
    between the listing and its SIGSTOP shows up as a child on the next pass. The
    handles stay valid (psutil checks pid reuse) even if the processes are re-parented
    afterwards, e.g. because the root exits while they are frozen.
    """
    try:
        root = psutil.Process(root_pid)
    except psutil.NoSuchProcess:
        return []
    frozen: dict[int, psutil.Process] = {}
    for _ in range(MAX_ROUNDS):
        new = [p for p in [root, *_children(root)] if p.pid not in frozen]
        if not new:
            break
        for process in new:
            _signal(process, signal.SIGSTOP)
            frozen[process.pid] = process
    return list(frozen.values())


def kill_processes(processes: list[psutil.Process]) -> None:
    for process in processes:
        _signal(process, signal.SIGKILL)


def kill_tagged(name: str, value: str) -> int:
    """SIGKILL every process whose environment holds ``name=value``; how many were found.

    ``Worker`` puts a fresh tag in each worker's environment. A process that left
    the tree (possible in degraded mode when the worker died before its children)
    still carries it, unless it replaced its environment with ``execve``.
    """
    marker = f"{name}={value}".encode()
    found = []
    for pid in psutil.pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as environ:
                if marker in environ.read().split(b"\0"):
                    found.append(psutil.Process(pid))
        except (OSError, psutil.Error):
            continue  # gone, or not ours to read
    for process in found:
        _signal(process, signal.SIGSTOP)
    kill_processes(found)
    return len(found)


def _children(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.Error:
        return []


def _signal(process: psutil.Process, signum: int) -> None:
    with contextlib.suppress(psutil.Error):  # already gone
        process.send_signal(signum)


def _kill_group(pgid: int) -> None:
    # The worker was started as a session and group leader: whatever stayed in its
    # group goes too, even if it was somehow no longer a descendant.
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGKILL)
