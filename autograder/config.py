"""The configuration of one grading run: device, timeouts, limits and paths, in one object.

A :class:`GradingConfig` is built once per run, by the CLI (``grade``) from its
options and by nbgrader's :class:`~autograder.nbgrader.plugin.SandboxedGrading`
from its traitlets, and passed down as it is: runner (the notebook's deadline) →
grading session (cell and call timeouts, restarts) → sandboxed ``Worker`` (tree
limits, GPU device nodes). The device is resolved when the config is built
(``auto`` becomes ``cpu`` or ``cuda``), so every job of a run grades on the same
one and each report records it.

The defaults are the values the grader was measured and tested with; the limits
table of ``docs/threat-model.md`` states them, with the CLI option and nbgrader
setting of each one that may be changed, and ``tests/test_threat_model.py``
checks it against this file.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from .device import DeviceUnavailable, resolve_device
from .draws import course_secret
from .errors import ConfigurationError
from .paths import REPO
from .sandbox.limits import GiB, MiB, ResourceLimits

RESOLVED_DEVICES = ("cpu", "cuda")


@dataclass(frozen=True)
class Setting:
    """A :class:`GradingConfig` field a TA may set for a run: the ``option`` of
    ``python -m autograder grade`` and the ``trait`` of nbgrader's ``SandboxedGrading``
    (``c.SandboxedGrading.<trait>`` in ``nbgrader_config.py``). Its type and default are
    the field's; ``help`` says what it governs."""

    field: str
    option: str
    trait: str
    help: str


# What a run lets a TA change, and the only place it is spelled: the CLI's options and
# nbgrader's traitlets are made from these, and tests/test_threat_model.py checks the
# limits table of docs/threat-model.md against them.
TIMEOUTS = (
    Setting("timeout_notebook", "--timeout-notebook", "timeout", "one notebook's whole grading process"),
    Setting("timeout_cell", "--timeout-cell", "timeout_cell", "running one solution cell"),
    Setting("timeout_call", "--timeout-call", "timeout_call", "one call of a student function"),
    Setting("timeout_hung_call", "--timeout-hung-call", "timeout_hung_call",
            "each later call of an item that timed out once"),
    Setting("timeout_worker_start", "--timeout-worker-start", "timeout_worker_start", "starting a sandboxed worker"),
)
ZYGOTE = Setting("zygote", "--no-zygote", "zygote",
                 "fork sandboxed workers from a preloaded zygote where bubblewrap runs")
SETTINGS = (*TIMEOUTS, ZYGOTE)


@dataclass(frozen=True)
class GradingConfig:
    """Everything a grading run decides once; see the module's docstring."""

    # "cpu" or "cuda", already resolved; cpu by default: student code then gets no GPU device node.
    device: str = "cpu"
    # One notebook's grading process: 2-10 s honest, 75 s for the hanging samples; 15 min stops what nothing else did.
    timeout_notebook: float = 900.0
    # Defining one solution cell: cells only define functions (well under 1 s); 30 s ends an experiment left in one.
    timeout_cell: float = 30.0
    # One call of a student function or probe: the hidden tests' calls take well under 1 s; room for a busy CPU.
    timeout_call: float = 20.0
    # Later calls of an item that has timed out once: one infinite loop costs a submission seconds, not minutes.
    timeout_hung_call: float = 5.0
    # A worker's start-up (Python, import torch, the preloads: 1-3 s of CPU), with room for a busy machine.
    timeout_worker_start: float = 60.0
    # Fresh workers per notebook after a crash or hang: enough for several broken items, not for a wrecking loop.
    max_restarts: int = 6
    # Memory of a submission's whole tree: an honest worker peaks at 0.77 GiB; equal to the per-process RLIMIT_DATA.
    tree_memory_bytes: int | None = 6 * GiB
    # Processes and threads at once: an honest worker has 1-6; room for data loaders, and a fork bomb stops early.
    tree_processes: int | None = 256
    # CPU time of the whole tree: the notebook's wall-clock budget (timeout_notebook) at one thread.
    tree_cpu_seconds: float | None = 900.0
    # The scratch folder in degraded mode: the size of bubblewrap's private /tmp (isolation.TMP_BYTES).
    scratch_bytes: int | None = 512 * MiB
    # Hidden from the sandbox: the repository (solutions, hidden suites, references, samples); callers add submissions.
    hidden_paths: tuple[str, ...] = (str(REPO),)
    # Where the CLI writes reports and grades.csv; None under nbgrader, whose gradebook records the scores.
    out: Path | None = None
    # Fork workers from preloaded zygotes (bubblewrap only) instead of starting each cold.
    zygote: bool = True
    # The run's zygote pool (its Unix socket), set while one runs (session.zygote_pool); not an option.
    zygote_address: str | None = None
    # The course secret that gives each student hidden inputs of their own (draws.py); None: the public seeds.
    # Read by build() from $WEEK6_GRADING_SECRET or .grading-secret; never printed, never sent to a worker.
    secret: str | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def build(cls, *, device: str = "auto", **fields) -> GradingConfig:
        """A config with ``device`` ("auto", "cpu" or "cuda") resolved on this machine, and
        the course secret read (``draws.course_secret``) unless ``secret`` is given.

        Raises ``ConfigurationError`` for an unknown device, a bad value or a short
        secret, and ``DeviceUnavailable`` for "cuda" where torch sees no GPU."""
        fields.setdefault("secret", course_secret())
        try:
            resolved = resolve_device(device)
        except DeviceUnavailable:
            raise
        except ValueError as err:
            raise ConfigurationError(str(err)) from None
        return cls(device=resolved, **fields)

    def __post_init__(self) -> None:
        if self.device not in RESOLVED_DEVICES:
            raise ConfigurationError(f"device must be one of {', '.join(RESOLVED_DEVICES)} once resolved, "
                                     f"not {self.device!r} (GradingConfig.build resolves 'auto')")
        for field in ("timeout_notebook", "timeout_cell", "timeout_call", "timeout_hung_call",
                      "timeout_worker_start", "tree_cpu_seconds"):
            value = getattr(self, field)
            if value is None and field.startswith("tree_"):
                continue
            if not _number(value) or not math.isfinite(value) or value <= 0:
                raise ConfigurationError(f"{field} must be a positive number of seconds, not {value!r}")
        for field in ("tree_memory_bytes", "tree_processes", "scratch_bytes"):
            value = getattr(self, field)
            if value is not None and (not _integer(value) or value <= 0):
                raise ConfigurationError(f"{field} must be a positive whole number (or None: no limit), "
                                         f"not {value!r}")
        if self.secret is not None and (type(self.secret) is not str or not self.secret):
            raise ConfigurationError("secret must be a non-empty string, or None for the public seeds")
        if type(self.zygote) is not bool:
            raise ConfigurationError(f"zygote must be True or False, not {self.zygote!r}")
        if not _integer(self.max_restarts) or self.max_restarts < 0:
            raise ConfigurationError(f"max_restarts must be a whole number from 0 up, not {self.max_restarts!r}")
        if isinstance(self.hidden_paths, (str, bytes)):
            raise ConfigurationError("hidden_paths must be a sequence of paths, not one string")
        object.__setattr__(self, "hidden_paths", tuple(dict.fromkeys(str(p) for p in self.hidden_paths)))
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))

    def hiding(self, *paths: str | Path) -> GradingConfig:
        """This config with ``paths`` hidden from the sandbox too (submissions, outputs)."""
        return dataclasses.replace(self, hidden_paths=(*self.hidden_paths, *(str(p) for p in paths)))

    def resource_limits(self) -> ResourceLimits:
        """The worker's limits: the per-process ones as ``ResourceLimits`` sets them, the
        whole-tree ones from this config."""
        return dataclasses.replace(ResourceLimits(), tree_memory_bytes=self.tree_memory_bytes,
                                   tree_processes=self.tree_processes, tree_cpu_seconds=self.tree_cpu_seconds,
                                   scratch_bytes=self.scratch_bytes)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _integer(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
