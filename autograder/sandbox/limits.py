"""Resource limits: per process (applied by the worker to itself) and per submission
(applied by ``Worker`` to the worker's whole process tree, see ``tree_limits``).

The worker applies the per-process limits (rather than a ``preexec_fn`` in the
grader, which is unsafe in a threaded process) as its first action, so they already
bound ``import torch`` and are inherited by every process the student starts. Limits
are lowered, never raised, and the hard limit goes down with the soft one: inside
bubblewrap the worker holds no capability that could raise it again. (In degraded
mode a grader running as root leaves the student ``CAP_SYS_RESOURCE``, one of the
reasons that mode is degraded.)

Per-process limits alone do not bound a submission: each forked child gets its own
``RLIMIT_DATA`` and ``RLIMIT_CPU``. The ``tree_*`` limits bound all of the worker's
processes together; ``apply`` ignores them.
"""
from __future__ import annotations

import json
import resource
import signal
from dataclasses import asdict, dataclass

GiB = 2**30
MiB = 2**20


@dataclass(frozen=True)
class ResourceLimits:
    """Per-worker limits; ``None`` leaves a limit as inherited.

    memory_bytes: ``RLIMIT_DATA``, which since Linux 4.7 counts private writable
        mappings, i.e. what torch's allocator and the heap really commit. It is the
        default rather than ``RLIMIT_AS`` because torch, glibc arenas and above all
        CUDA reserve large ``PROT_NONE`` address ranges that ``RLIMIT_AS`` counts and
        that would make it fail long before memory runs short. Measured: ``import
        torch, transformers`` and a tiny Llama forward need about 0.45 GB of data, so
        even 1 GiB works; 6 GiB leaves room for the week's small models.
    address_space_bytes: optional ``RLIMIT_AS`` for CPU-only hosts that want it.
    cpu_seconds: ``RLIMIT_CPU`` over the worker's whole life (all cells and calls);
        SIGXCPU at the soft limit, SIGKILL five seconds of CPU later. Wall-clock
        limits per request are ``Worker``'s job; this one stops a worker that is
        busy for too long in total, including time spent in forgotten children.
    open_files: ``RLIMIT_NOFILE``; torch's import stays under 100 descriptors.
    file_size_bytes: ``RLIMIT_FSIZE``, the largest file the student may write. SIGXFSZ
        is ignored in the worker so an oversized write fails with ``OSError`` (EFBIG)
        inside the cell instead of killing the worker.
    processes: ``RLIMIT_NPROC``, counted by the kernel per *real* user (threads
        included). Off by default here, because ``Worker`` sets it where it means
        something: under bubblewrap with a grader running as root, every worker runs
        as a host user of its own (see ``isolation``), and ``Worker`` sets it to
        ``tree_processes``. Elsewhere that user is the grader's own (or root, which
        the kernel exempts), so any value would depend on what else runs there.

    Whole-tree limits (``Worker``'s, ``tree_limits``), for all the worker's
    processes together, over the worker's life; ``restart()`` starts a fresh budget:

    tree_memory_bytes: memory of all the processes together: the cgroup's
        ``memory.limit_in_bytes`` / ``memory.max`` (which also charges the page cache
        and the private ``/tmp`` and ``/dev/shm`` tmpfs pages written under
        bubblewrap), else the sum of their proportional set sizes, polled (tmpfs
        pages are then bounded by the tmpfs sizes only). Measured with the grading
        preloads: an idle worker holds 0.34 GB (PSS), its cgroup peaks at 0.38 GiB
        during start-up; loading and running the 135M SmolLM2 takes it to 0.40 GB
        PSS and a 0.77 GiB cgroup peak (page cache of the weights included). 6 GiB
        matches the per-process ``memory_bytes``.
    tree_processes: processes *and threads* alive at once (cgroup ``pids.max`` counts
        threads, as ``RLIMIT_NPROC`` does). Measured: an honest worker with one torch
        thread is 1 task at rest and 4 while a model generates (helper threads),
        plus 2 under bubblewrap (bwrap and its init); 256 leaves room for data-loader
        processes and thread pools and stops a fork bomb early.
    tree_cpu_seconds: CPU time of all processes together, reaped children included,
        polled; start-up (``import torch`` and the preloads) takes 1 to 3 s of it. 900 s is the
        grading job's whole wall-clock budget at one thread.
    scratch_bytes: what the worker may keep in its scratch folder in degraded mode
        (its home and temporary folder there), polled; under bubblewrap ``/tmp`` is a
        tmpfs of ``isolation.TMP_BYTES`` (also 512 MiB) and needs no watching.
    """

    memory_bytes: int | None = 6 * GiB
    address_space_bytes: int | None = None
    cpu_seconds: int | None = 600
    open_files: int | None = 256
    file_size_bytes: int | None = 256 * MiB
    processes: int | None = None
    tree_memory_bytes: int | None = 6 * GiB
    tree_processes: int | None = 256
    tree_cpu_seconds: float | None = 900
    scratch_bytes: int | None = 512 * MiB

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ResourceLimits:
        return cls(**json.loads(text))

    def apply(self) -> None:
        """Lower this process's limits (soft and hard); core dumps are always disabled.
        The ``tree_*`` limits are not the process's to apply."""
        _lower(resource.RLIMIT_CORE, 0)
        if self.memory_bytes is not None:
            _lower(resource.RLIMIT_DATA, self.memory_bytes)
        if self.address_space_bytes is not None:
            _lower(resource.RLIMIT_AS, self.address_space_bytes)
        if self.cpu_seconds is not None:
            _lower(resource.RLIMIT_CPU, self.cpu_seconds, hard=self.cpu_seconds + 5)
        if self.open_files is not None:
            _lower(resource.RLIMIT_NOFILE, self.open_files)
        if self.file_size_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            _lower(resource.RLIMIT_FSIZE, self.file_size_bytes)
        if self.processes is not None:
            _lower(resource.RLIMIT_NPROC, self.processes)


def _lower(which: int, soft: int, *, hard: int | None = None) -> None:
    _, current_hard = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
    resource.setrlimit(which, (min(soft, hard), hard))
