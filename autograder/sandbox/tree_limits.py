"""Limits on a worker's whole process tree: memory, processes, CPU time, scratch space.

Per-process rlimits (``limits.py``) do not bound a submission: every process the
student forks gets a fresh ``RLIMIT_DATA`` and ``RLIMIT_CPU``. ``TreeLimits`` bounds
them together, one budget per worker (``restart()`` starts a new one):

* a **cgroup** where the machine offers one: cgroup v1 ``memory`` and ``pids``
  hierarchies, or a cgroup v2 folder with both controllers delegated. One cgroup
  per worker, created below the grader's own cgroup (so that whatever limits the
  grader's service also limits its workers) before the worker starts, joined by the
  worker's first process (the trampoline, see ``isolation.trampoline_argv``) before
  it executes anything else, and removed once the worker is dead. Joining at the
  start, rather than moving the tree in after the start-up ``ping``, leaves nothing
  to race with (no process can fork between a listing and a move, there is nothing
  to list) and charges the trusted start-up (``import torch``) too, which the
  submission's processes do hold. The kernel enforces the memory limit
  (it OOM-kills inside the cgroup; tmpfs pages written under bubblewrap count too)
  and the process limit (``fork`` fails with ``EAGAIN``);
* a **watchdog** thread in every case, polling every ``POLL_SECONDS``: it reads the
  cgroup's event counters (an OOM kill, a refused fork) and the tree's CPU time,
  and, without a cgroup, also adds up the tree's memory and counts its processes
  and threads itself. In degraded mode it also measures the scratch folder (a
  bounded walk). At the first limit reached it records which, and kills the tree;
  ``Worker`` then reports the failed request as ``LimitExceeded``.

The watchdog alone is weaker than a cgroup: it sees a limit crossed only at its next
poll, by which time a fast allocation or fork loop can have gone further (bounded,
per process, by the rlimits). Where it runs without a cgroup and the worker has a
host user of its own, ``RLIMIT_NPROC`` (set by ``Worker``) makes the process
limit a hard one again.
"""
from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass

import psutil

from .errors import SandboxError
from .limits import GiB, MiB, ResourceLimits
from .process_tree import kill_tree

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # the watchdog's period; a poll of an idle worker takes 0.1 ms (cgroup), 2 ms (without)
SCRATCH_MAX_ENTRIES = 20_000  # the scratch walk stops here; more files is over the limit
CGROUP_PREFIX = "autograder-worker"
CGROUP_REMOVE_SECONDS = 5.0  # how long close() waits for a cgroup to empty before rmdir
# A leftover cgroup is swept only when at least this old: a fresh one stays empty for
# the few milliseconds until its worker joins, and its grader may live in another pid
# namespace, where its pid looks dead from here.
SWEEP_MIN_AGE_SECONDS = 60.0
CHARGE_BATCH_BYTES = 1 * MiB  # slack above the kernel's charge batch (64 pages) when comparing with a limit
BACKENDS = ("auto", "cgroup", "watchdog")


@dataclass(frozen=True)
class Breach:
    """Which limit was reached: ``limit`` ("memory", "processes", "cpu", "scratch"),
    its ``value``, and a sentence for the grader's report."""

    limit: str
    value: float
    message: str


def memory_breach(value: float) -> Breach:
    return Breach("memory", value, f"the submission's processes used more than {_size(value)} of memory together")


def machine_out_of_memory(value: float) -> Breach:
    # An OOM kill counted in the cgroup although the cgroup never reached its limit:
    # the whole machine ran short, and the kernel chose one of the worker's processes.
    return Breach("memory", value, "the machine ran out of memory and the kernel killed one of the "
                  f"submission's processes (its limit, {_size(value)}, was not reached)")


def processes_breach(value: float) -> Breach:
    return Breach("processes", value,
                  f"the submission's processes reached the limit of {value:g} processes and threads")


def cpu_breach(value: float) -> Breach:
    return Breach("cpu", value, f"the submission's processes used more than {value:g} s of CPU time together")


class TreeLimits:
    """The whole-tree limits of one worker: its cgroup (if any) and its watchdog.

    Lifecycle, driven by ``Worker``: construct (creates the cgroup), start the
    worker through ``join_files``, ``watch(pid)``, and ``close()`` after the tree
    was killed. ``breach`` tells why the worker was killed, if a limit was the reason.

    Args:
        backend: "auto" (a cgroup where one is writable, else the watchdog alone),
            "cgroup" (``SandboxError`` where none is) or "watchdog".
        scratch: a folder whose size counts against ``scratch_bytes`` (degraded mode).
    """

    def __init__(self, limits: ResourceLimits, *, backend: str = "auto", scratch: str | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, not {backend!r}")
        self.limits = limits
        self._scratch = scratch
        self._cgroup: _Cgroup | None = None
        if backend != "watchdog" and (limits.tree_memory_bytes is not None or limits.tree_processes is not None):
            self._cgroup = create_cgroup(limits)
            if self._cgroup is None and backend == "cgroup":
                raise SandboxError("no writable cgroup with the memory and pids controllers on this machine")
        self.backend = "cgroup" if self._cgroup is not None else "watchdog"
        self._breach: Breach | None = None
        self._root: int | None = None
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def join_files(self) -> list[str]:
        """The ``cgroup.procs`` files the worker's first process writes its pid to."""
        return self._cgroup.procs_files if self._cgroup is not None else []

    @property
    def breach(self) -> Breach | None:
        return self._breach

    def join(self, pid: int) -> None:
        """Put the running process ``pid`` into the cgroup (a worker forked by the zygote,
        before it runs any student code); processes started later inherit it."""
        for procs in self.join_files:
            with open(procs, "w") as file:
                file.write(str(pid))

    def watch(self, root_pid: int) -> None:
        """Start the watchdog on the tree below ``root_pid`` (bwrap, or the worker)."""
        self._root = root_pid
        self._thread = threading.Thread(target=self._run, name=f"sandbox-limits-{root_pid}", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop watching, kill whatever is left in the cgroup, remove it. Idempotent;
        call it after the tree was killed (a last look at the cgroup's counters tells
        whether an OOM kill was what ended the worker)."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        if self._cgroup is not None:
            if self._breach is None:
                self._breach = self._cgroup.breach(self.limits)
            self._cgroup.kill()
            self._cgroup.remove()
            self._cgroup = None

    # -------------------------------------------------------------- the watchdog

    def _run(self) -> None:
        while not self._stopping.wait(POLL_SECONDS):
            try:
                breach = self.check()
            except Exception:  # a bug here must not leave the worker unwatched silently
                log.exception("sandbox limits watchdog failed; the worker is no longer watched")
                return
            if breach is not None and not self._stopping.is_set():
                self._breach = breach
                log.info("sandbox worker %s: %s; killing it", self._root, breach.message)
                kill_tree(self._root)
                if self._cgroup is not None:
                    self._cgroup.kill()
                return

    def check(self) -> Breach | None:
        """One poll: the first limit reached, or None."""
        limits = self.limits
        if self._cgroup is not None:
            breach = self._cgroup.breach(limits)
            if breach is not None:
                return breach
        watch_memory = self._cgroup is None and limits.tree_memory_bytes is not None
        watch_tasks = self._cgroup is None and limits.tree_processes is not None
        if watch_memory or watch_tasks or limits.tree_cpu_seconds is not None:
            processes = self._processes()
            if watch_memory and _memory(processes) > limits.tree_memory_bytes:
                return memory_breach(limits.tree_memory_bytes)
            # Reaching the limit counts: where RLIMIT_NPROC holds the count there,
            # it never goes over.
            if watch_tasks and _tasks(processes) >= limits.tree_processes:
                return processes_breach(limits.tree_processes)
            if limits.tree_cpu_seconds is not None and _cpu_seconds(processes) > limits.tree_cpu_seconds:
                return cpu_breach(limits.tree_cpu_seconds)
        if self._scratch is not None and limits.scratch_bytes is not None:
            return _scratch_breach(self._scratch, limits.scratch_bytes)
        return None

    def _processes(self) -> list[psutil.Process]:
        if self._cgroup is not None:  # complete even for processes that left the tree
            return [p for p in map(_process, self._cgroup.pids()) if p is not None]
        root = _process(self._root)
        if root is None:
            return []
        with contextlib.suppress(psutil.Error):
            return [root, *root.children(recursive=True)]
        return [root]


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _memory(processes: list[psutil.Process]) -> int:
    """Sum of proportional set sizes: pages shared by forked children (all of torch)
    are split between them, where summing RSS would count them once per process."""
    total = 0
    for process in processes:
        try:
            with open(f"/proc/{process.pid}/smaps_rollup", "rb") as rollup:
                for line in rollup:
                    if line.startswith(b"Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            with contextlib.suppress(psutil.Error):
                total += process.memory_info().rss  # no smaps_rollup (kernel < 4.14)
    return total


def _tasks(processes: list[psutil.Process]) -> int:
    total = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            total += process.num_threads()
    return total


def _cpu_seconds(processes: list[psutil.Process]) -> float:
    """User and system time of every process, plus that of the children each has
    reaped (a reaped process's time moves to its parent's ``children_*`` fields, and
    up again when the parent is reaped, so each process counts exactly once)."""
    total = 0.0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def _scratch_breach(folder: str, limit: int) -> Breach | None:
    used, entries = 0, 0
    pending = [folder]
    while pending:
        with contextlib.suppress(OSError), os.scandir(pending.pop()) as listing:
            for entry in listing:
                entries += 1
                if entries > SCRATCH_MAX_ENTRIES:
                    return Breach("scratch", SCRATCH_MAX_ENTRIES, "the submission created more than "
                                  f"{SCRATCH_MAX_ENTRIES} files in its scratch folder")
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    used += info.st_blocks * 512  # what the disk holds: sparse files count as written
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
    if used > limit:
        return Breach("scratch", limit, f"the submission wrote more than {_size(limit)} to its scratch folder")
    return None


def _size(nbytes: float) -> str:
    return f"{nbytes / GiB:.1f} GiB" if nbytes >= GiB else f"{nbytes / MiB:.0f} MiB"


# ------------------------------------------------------------------ cgroups

class _Cgroup:
    """One worker's cgroup (v1: one folder per hierarchy; v2: one folder)."""

    procs_files: list[str]  # the first lists every process: each hierarchy holds the same ones
    pids_folder: str  # where pids.max and pids.events are

    def pids(self) -> list[int]:
        with contextlib.suppress(OSError, ValueError):
            return _read_ints(self.procs_files[0])
        return []

    def refused_fork(self, limits: ResourceLimits) -> Breach | None:
        """A refused fork (``pids.events``' max counter) means the process limit was reached."""
        if limits.tree_processes is not None:
            if _read_counters(os.path.join(self.pids_folder, "pids.events")).get("max", 0) > 0:
                return processes_breach(limits.tree_processes)
        return None

    def breach(self, limits: ResourceLimits) -> Breach | None:
        raise NotImplementedError

    def folders(self) -> list[str]:
        raise NotImplementedError

    def kill(self) -> None:
        """SIGKILL every process in the cgroup until it is empty (bounded rounds)."""
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def remove(self) -> None:
        # A killed process leaves its cgroup only once it has fully exited; wait a
        # little for that, then give up with a log line rather than hang close().
        deadline = time.monotonic() + CGROUP_REMOVE_SECONDS
        for folder in reversed(self.folders()):
            while True:
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if time.monotonic() > deadline:
                        log.error("could not remove the sandbox cgroup %s: %s", folder, exc)
                        break
                    time.sleep(0.02)


def _read_ints(path: str) -> list[int]:
    with open(path) as file:
        return [int(line) for line in file if line.strip()]


def _read_counters(path: str) -> dict[str, int]:
    """``key value`` lines (``memory.oom_control``, ``memory.events``, ``pids.events``)."""
    try:
        with open(path) as file:
            return {key: int(value) for key, value in (line.split() for line in file if line.strip())}
    except (OSError, ValueError):
        return {}


def _write(path: str, value: object) -> None:
    with open(path, "w") as file:
        file.write(str(value))


class _CgroupV1(_Cgroup):
    def __init__(self, memory: str, pids: str):
        self.memory, self.pids_folder = memory, pids
        self.procs_files = [os.path.join(memory, "cgroup.procs"), os.path.join(pids, "cgroup.procs")]

    def folders(self) -> list[str]:
        return [self.memory, self.pids_folder]

    def setup(self, limits: ResourceLimits) -> None:
        if limits.tree_memory_bytes is not None:
            _write(os.path.join(self.memory, "memory.limit_in_bytes"), limits.tree_memory_bytes)
            # With swap accounting on, memory plus swap too: swap is memory here.
            swap = os.path.join(self.memory, "memory.memsw.limit_in_bytes")
            if os.path.exists(swap):
                with contextlib.suppress(OSError):
                    _write(swap, limits.tree_memory_bytes)
        if limits.tree_processes is not None:
            _write(os.path.join(self.pids_folder, "pids.max"), limits.tree_processes)

    def breach(self, limits: ResourceLimits) -> Breach | None:
        if limits.tree_memory_bytes is not None:
            oom = _read_counters(os.path.join(self.memory, "memory.oom_control"))
            # oom_kill (Linux 4.13) counts kills by any OOM killer, the machine's too;
            # failcnt tells whether this cgroup ever reached its own limit.
            if oom.get("oom_kill", 0) > 0 or oom.get("under_oom", 0) > 0:
                if self._failures() > 0:
                    return memory_breach(limits.tree_memory_bytes)
                return machine_out_of_memory(limits.tree_memory_bytes)
        return self.refused_fork(limits)

    def _failures(self) -> int:
        """Whether (how often, where the kernel counts it) a charge hit the limit.

        ``failcnt`` alone is not enough: with swap accounting, whose limit we set
        equal, the memory-plus-swap counter is charged first, and recent kernels
        count no failures for it. Its high-water mark at the limit (less one charge
        batch, at most 64 pages) tells the same."""
        total = 0
        for prefix in ("memory.", "memory.memsw."):
            try:
                total += sum(_read_ints(os.path.join(self.memory, prefix + "failcnt")))
                (peak,) = _read_ints(os.path.join(self.memory, prefix + "max_usage_in_bytes"))
                (limit,) = _read_ints(os.path.join(self.memory, prefix + "limit_in_bytes"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError):
                return 1  # unknown: the limit is the likelier cause
            total += peak >= limit - CHARGE_BATCH_BYTES
        return total


class _CgroupV2(_Cgroup):
    def __init__(self, folder: str):
        self.folder = self.pids_folder = folder
        self.procs_files = [os.path.join(folder, "cgroup.procs")]

    def folders(self) -> list[str]:
        return [self.folder]

    def setup(self, limits: ResourceLimits) -> None:
        if limits.tree_memory_bytes is not None:
            _write(os.path.join(self.folder, "memory.max"), limits.tree_memory_bytes)
            for name, value in (("memory.swap.max", 0), ("memory.oom.group", 1)):
                # No swap beyond the limit; an OOM kill takes the whole cgroup (as
                # the watchdog would next), not one process the worker might survive.
                if os.path.exists(os.path.join(self.folder, name)):
                    with contextlib.suppress(OSError):
                        _write(os.path.join(self.folder, name), value)
        if limits.tree_processes is not None:
            _write(os.path.join(self.folder, "pids.max"), limits.tree_processes)

    def breach(self, limits: ResourceLimits) -> Breach | None:
        if limits.tree_memory_bytes is not None:
            events = _read_counters(os.path.join(self.folder, "memory.events"))
            if events.get("oom_kill", 0) > 0:
                # oom_kill counts kills by any OOM killer; oom and max, this cgroup's limit.
                if events.get("oom", 0) > 0 or events.get("max", 0) > 0:
                    return memory_breach(limits.tree_memory_bytes)
                return machine_out_of_memory(limits.tree_memory_bytes)
        return self.refused_fork(limits)

    def kill(self) -> None:
        kill_file = os.path.join(self.folder, "cgroup.kill")  # Linux 5.14: atomic, no race with fork
        if os.path.exists(kill_file):
            with contextlib.suppress(OSError):
                _write(kill_file, 1)
        super().kill()


_sequence = 0
_sequence_lock = threading.Lock()


def create_cgroup(limits: ResourceLimits) -> _Cgroup | None:
    """A fresh cgroup with ``limits``, or None where the machine offers none we may
    write (the reason is logged at debug level)."""
    global _sequence
    with _sequence_lock:
        _sequence += 1
        name = f"{CGROUP_PREFIX}-{os.getpid()}-{_sequence}"
    for create in (_create_v2, _create_v1):
        try:
            cgroup = create(name)
        except OSError as exc:
            log.debug("no sandbox cgroup (%s): %s", create.__name__, exc)
            continue
        if cgroup is None:
            continue
        try:
            cgroup.setup(limits)
        except OSError as exc:
            log.debug("sandbox cgroup %s refused its limits: %s", cgroup.folders(), exc)
            cgroup.remove()
            continue
        return cgroup
    return None


def _create_v1(name: str) -> _CgroupV1 | None:
    parents = {}
    for controller in ("memory", "pids"):
        parent = _v1_parent(controller)
        if parent is None or not os.access(parent, os.W_OK):
            return None
        parents[controller] = parent
    folders = []
    try:
        for controller in ("memory", "pids"):
            _sweep(parents[controller])
            folder = os.path.join(parents[controller], name)
            os.mkdir(folder)
            folders.append(folder)
    except OSError:
        for folder in folders:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise
    return _CgroupV1(*folders)


def _create_v2(name: str) -> _CgroupV2 | None:
    parent = _v2_parent()
    if parent is None:
        return None
    # Children get a controller only if the parent's subtree_control lists it. We do
    # not enable it ourselves: a cgroup with processes in it (the grader's own) may
    # not, and moving the grader out of its cgroup is its service manager's call.
    with open(os.path.join(parent, "cgroup.subtree_control")) as file:
        enabled = set(file.read().split())
    if not {"memory", "pids"} <= enabled or not os.access(parent, os.W_OK):
        return None
    _sweep(parent)
    folder = os.path.join(parent, name)
    os.mkdir(folder)
    return _CgroupV2(folder)


def _sweep(parent: str) -> None:
    """Remove empty cgroups left by graders that were killed before closing their
    workers (rmdir fails on a cgroup that still holds processes, so nothing live is
    lost)."""
    with contextlib.suppress(OSError):
        for entry in os.listdir(parent):
            parts = entry.split("-")
            if entry.startswith(CGROUP_PREFIX + "-") and len(parts) == 4 and parts[2].isdigit():
                folder = os.path.join(parent, entry)
                with contextlib.suppress(OSError):
                    if (not psutil.pid_exists(int(parts[2]))
                            and time.time() - os.stat(folder).st_mtime > SWEEP_MIN_AGE_SECONDS):
                        os.rmdir(folder)


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the file system, type, super options) of each mount."""
    found = []
    with open("/proc/self/mountinfo") as file:
        for line in file:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) >= 5 and len(tail) >= 3:
                found.append((_unescape(fields[4]), _unescape(fields[3]), tail[0], set(tail[2].split(","))))
    return found


def _own_cgroups() -> dict[str, str]:
    """This process's cgroup per v1 controller, and under "" its v2 cgroup."""
    own = {}
    with open("/proc/self/cgroup") as file:
        for line in file:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                own[controller] = path
    return own


def _v1_parent(controller: str) -> str | None:
    path = _own_cgroups().get(controller)
    if path is None:
        return None
    for point, root, kind, options in _mounts():
        if kind == "cgroup" and controller in options:
            return _below(point, root, path)
    return None


def _v2_parent() -> str | None:
    path = _own_cgroups().get("")
    if path is None:
        return None
    for point, root, kind, _ in _mounts():
        if kind == "cgroup2":
            folder = _below(point, root, path)
            if os.path.exists(os.path.join(folder, "cgroup.subtree_control")):
                return folder
    return None


def _below(point: str, root: str, path: str) -> str | None:
    # In a cgroup namespace or a bind mount of a subtree, the mount shows only part
    # of the hierarchy: the process's path is then relative to the mount's root.
    if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
        path = path[len(root):]
    folder = os.path.join(point, path.lstrip("/"))
    return folder if os.path.isdir(folder) else None


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as octal.
    return field.encode().decode("unicode_escape") if "\\" in field else field
