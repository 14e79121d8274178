"""Resource limits the worker puts on itself before it runs any student code.

The worker applies them (rather than a ``preexec_fn`` in the grader, which is unsafe
in a threaded process) as its first action, so they already bound ``import torch``
and are inherited by every process the student starts. Limits are lowered, never
raised, and the hard limit goes down with the soft one: inside bubblewrap the worker
holds no capability that could raise it again. (In degraded mode a grader running as
root leaves the student ``CAP_SYS_RESOURCE``, one of the reasons that mode is
degraded.)
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
        limits per request are the launcher's job; this one stops a worker that is
        busy for too long in total, including time spent in forgotten children.
    open_files: ``RLIMIT_NOFILE``; torch's import stays under 100 descriptors.
    file_size_bytes: ``RLIMIT_FSIZE``, the largest file the student may write. SIGXFSZ
        is ignored in the worker so an oversized write fails with ``OSError`` (EFBIG)
        inside the cell instead of killing the worker.
    processes: ``RLIMIT_NPROC``, off by default: the kernel counts it per *real* user
        across the whole machine, and inside the sandbox that user is the grader's own
        user (or root), so any fixed value would depend on what else runs there.
    """

    memory_bytes: int | None = 6 * GiB
    address_space_bytes: int | None = None
    cpu_seconds: int | None = 600
    open_files: int | None = 256
    file_size_bytes: int | None = 256 * MiB
    processes: int | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ResourceLimits:
        return cls(**json.loads(text))

    def apply(self) -> None:
        """Lower this process's limits (soft and hard); core dumps are always disabled."""
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
