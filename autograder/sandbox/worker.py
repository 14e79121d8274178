"""The grader's handle on a sandboxed worker process.

    with Worker(hidden_paths=[".../autograder/hidden", ".../gradebook.db"]) as worker:
        for cell in solution_cells:
            result = worker.exec_cell(cell.source, cell_id=cell.grade_id)
        logits = expect_tensor(worker.call("next_token_logits", fixture("decoder_lm", seed=0), ids),
                               dtype=torch.float32, shape=(1, 96))

Every request has a wall-clock timeout. When it runs out, or the worker dies or
breaks the protocol, the worker's whole process tree is killed and the request
raises ``WorkerTimeout`` or ``WorkerCrashed``; ``restart()`` then starts a fresh
worker and re-runs the cells that had succeeded. A submission whose processes
together go over a whole-tree limit (memory, processes, CPU time; see
``tree_limits``) is killed the same way, and the request raises ``LimitExceeded``
(a ``WorkerCrashed``) naming the limit. Student exceptions are not
failures of the worker: ``exec_cell`` returns them in a ``CellResult``, and ``call``
and ``probe`` raise them as ``StudentError`` (``ValueRejected`` for a return value
that may not leave the sandbox), with the worker still running.

A ``Worker`` is meant for one grading thread at a time.
"""
from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import protocol
from .channel import ChannelClosed, FrameChannel
from .errors import (
    LimitExceeded,
    ProtocolError,
    RequestError,
    SandboxError,
    StudentError,
    ValueRejected,
    VocabularyError,
    WorkerCrashed,
    WorkerTimeout,
)
from .isolation import (
    HostIdentity,
    bwrap_support,
    claim_host_identity,
    gpu_device_nodes,
    release_host_identity,
    sandbox_argv,
    scrubbed_env,
    trampoline_argv,
    unreadable_by_others,
)
from .limits import ResourceLimits
from .process_tree import freeze_tree, kill_processes, kill_tagged, kill_tree
from .tree_limits import BACKENDS, TreeLimits
from .zygote import ZygoteUnavailable

log = logging.getLogger(__name__)

TAG_VARIABLE = "AUTOGRADER_SANDBOX_WORKER"
OUTPUT_TAIL_BYTES = 64 * 1024
EXPOSED_CHECK_ENTRIES = 1000  # files and folders looked at per exposed path, for the warning
_checked_exposed: set[str] = set()
_degraded_warning = threading.Lock()
_degraded_warned = False


@dataclass(frozen=True)
class CellResult:
    """Outcome of one cell: ``ok``, or the student's exception as ``error``."""

    cell_id: str
    ok: bool
    error: StudentError | None = None

    def raise_for_error(self) -> None:
        if self.error is not None:
            raise self.error


class Worker:
    """A sandboxed Python process holding one student namespace.

    Args:
        isolation: "auto" (bubblewrap when it works on this host, else degraded),
            "bwrap" (raise ``SandboxError`` when it does not work) or "degraded".
        hidden_paths: files and directories the student must not see (bubblewrap
            only): each directory is covered by an empty read-only tmpfs, each file
            by an empty file. Paths that do not exist yet cannot be covered; hide
            their parent directory.
        exposed_paths: paths to keep readable although ``/tmp`` or a hidden directory
            covers them (the interpreter and this package always are).
        limits: resource limits: per process, applied by the worker to itself, and for
            the whole process tree, applied by ``Worker`` (``ResourceLimits()``).
        threads: torch/OpenMP threads in the worker.
        timeout: default wall-clock seconds per request.
        start_timeout: seconds allowed for the worker to start and import torch.
        env: extra environment variables for the worker (the rest is scrubbed).
        gpu: bind NVIDIA device nodes into the sandbox (default: when present).
        preload: modules the worker imports before any student code, typically ones
            that register more probes and fixtures (``@register_probe``). An import
            error there makes start-up fail with ``WorkerCrashed``.
        tree_limits_backend: how the whole-tree limits are enforced: "auto" (a cgroup
            where the machine offers a writable one, else a polling watchdog),
            "cgroup" (``SandboxError`` where there is none) or "watchdog".
        zygote: a ``zygote.ZygoteLease``: under bubblewrap, each start forks the worker
            from a preloaded zygote (whose paths, environment and preloads were fixed
            when the pool started) instead of starting a cold ``python``; where the
            zygote fails, the worker starts cold, with a warning.
    """

    def __init__(self, *, isolation: str = "auto", hidden_paths: Iterable[str | os.PathLike] = (),
                 exposed_paths: Iterable[str | os.PathLike] = (), limits: ResourceLimits | None = None,
                 threads: int = 1, timeout: float = 30.0, start_timeout: float = 60.0,
                 env: Mapping[str, str] | None = None, gpu: bool | None = None,
                 preload: Iterable[str] = (), tree_limits_backend: str = "auto", zygote=None):
        if isolation not in ("auto", "bwrap", "degraded"):
            raise ValueError(f"isolation must be 'auto', 'bwrap' or 'degraded', not {isolation!r}")
        if tree_limits_backend not in BACKENDS:
            raise ValueError(f"tree_limits_backend must be one of {BACKENDS}, not {tree_limits_backend!r}")
        self.sandbox = _choose_sandbox(isolation)
        self.hidden_paths = [os.fspath(p) for p in hidden_paths]
        self.exposed_paths = [os.fspath(p) for p in exposed_paths]
        self.limits = limits or ResourceLimits()
        self.tree_limits_backend = tree_limits_backend
        self.threads = threads
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.env = dict(env or {})
        self.gpu = bool(gpu_device_nodes()) if gpu is None else gpu
        self.preload = list(preload)
        for module in self.preload:
            if not all(part.isidentifier() for part in module.split(".")):
                raise ValueError(f"not a module name: {module!r}")
        self.zygote = zygote if self.sandbox == "bwrap" else None
        self.forked = False  # this start came from the zygote
        self.info: dict[str, Any] = {}
        self._history: list[tuple[str, str, float | None]] = []  # cells that succeeded
        self._cells_seen = 0
        self._next_id = 0
        self._process: subprocess.Popen | None = None
        self._channel: FrameChannel | None = None
        self._output: _OutputTail | None = None
        self._tree_limits: TreeLimits | None = None
        self._finalizer: weakref.finalize | None = None
        if self.sandbox == "bwrap" and bwrap_support().separate_users:
            _warn_unreadable(self.exposed_paths)
        self._start()

    # ------------------------------------------------------------------ requests

    def exec_cell(self, source: str, *, cell_id: str | None = None,
                  timeout: float | None = None) -> CellResult:
        """Run ``source`` in the student namespace. Student exceptions (syntax errors
        included) come back in the result; a timeout or crash raises."""
        self._cells_seen += 1
        cell_id = cell_id or f"cell-{self._cells_seen}"
        try:
            self._request("exec_cell", timeout, f"cell {cell_id!r}", cell_id=cell_id, source=source)
        except StudentError as error:
            return CellResult(cell_id, False, error)
        self._history.append((cell_id, source, timeout))
        return CellResult(cell_id, True)

    def call(self, name: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """``name(*args, **kwargs)`` in the student namespace; its (decoded) return value.

        Arguments must be vocabulary values or fixture references
        (``fixtures.fixture(...)``). A student function taking a keyword argument
        called ``timeout`` cannot receive it this way; wrap it in a probe.
        """
        return self._request("call", timeout, f"call {name}()", name=name, args=list(args), kwargs=kwargs)

    def probe(self, name: str, params: Mapping[str, Any] | None = None, *,
              timeout: float | None = None) -> Any:
        """Run the trusted probe ``name`` (see ``probes``) on the student namespace."""
        return self._request("probe", timeout, f"probe {name!r}", name=name, params=dict(params or {}))

    def reset(self, *, timeout: float | None = None) -> None:
        """A fresh student namespace in the same process, for the next notebook of the
        same submission (see ``session.Session.reset``); a restart no longer replays
        the cells run before."""
        self._request("reset", timeout, "reset")
        self._history = []
        self._cells_seen = 0

    def ping(self, *, timeout: float | None = None) -> dict[str, Any]:
        """The worker's pid, uid, gid and versions, as seen inside the sandbox."""
        return self._request("ping", timeout, "ping")

    # ---------------------------------------------------------------- lifecycle

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        """Host pid of the process started (``bwrap`` itself under bubblewrap)."""
        return self._process.pid if self._process is not None else None

    def output(self) -> str:
        """The last ``OUTPUT_TAIL_BYTES`` of what the worker printed (stdout and stderr)."""
        return self._output.text() if self._output is not None else ""

    def restart(self) -> list[CellResult]:
        """Kill the worker if needed, start a fresh one, and re-run the cells that
        succeeded before (the cell that hung or crashed is not among them). A replayed
        cell that now hangs or crashes is dropped and the replay starts over without
        it. Returns the results of the final replay, dropped cells included."""
        pending = list(self._history)
        dropped: list[CellResult] = []
        while True:
            self._stop()
            self._history = []
            self._start()
            results = []
            for index, (cell_id, source, timeout) in enumerate(pending):
                try:
                    results.append(self.exec_cell(source, cell_id=cell_id, timeout=timeout))
                except (WorkerTimeout, WorkerCrashed) as exc:
                    dropped.append(CellResult(cell_id, False, StudentError(type(exc).__name__, str(exc))))
                    del pending[index]
                    break
            else:
                return results + dropped

    def close(self) -> None:
        """Kill the worker and everything it started. Idempotent.

        No graceful ``shutdown`` request: the student's state is not worth saving, and
        killing the frozen tree is the one way to be sure nothing outlives it."""
        self._stop()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.alive else "stopped"
        return f"<Worker {self.sandbox} {state}>"

    # ----------------------------------------------------------------- internals

    def _start(self) -> None:
        if self.zygote is not None:
            try:
                return self._start_forked()
            except (ZygoteUnavailable, WorkerCrashed, WorkerTimeout) as exc:
                # No student code has run yet: whatever failed is the zygote's, and a
                # cold worker grades the submission as well, only slower.
                log.warning("starting a cold worker: the zygote's worker did not start: %s", exc)
                self._stop()
                self.zygote = None
        self.forked = False
        scratch = tempfile.mkdtemp(prefix="autograder-worker-")
        tag = uuid.uuid4().hex
        identity: HostIdentity | None = None
        tree_limits: TreeLimits | None = None
        try:
            tree_limits = TreeLimits(self.limits, backend=self.tree_limits_backend,
                                     scratch=scratch if self.sandbox == "degraded" else None)
            if self.sandbox == "bwrap" and bwrap_support().separate_users:
                identity = claim_host_identity()
            argv, relays, env = self._command(scratch, tag, identity)
            argv = trampoline_argv(argv, cgroup_procs=tree_limits.join_files, relays=relays, identity=identity)
            process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, cwd=scratch, env=env, bufsize=0,
                                       start_new_session=True, close_fds=True)
        except BaseException:
            if tree_limits is not None:
                tree_limits.close()
            if identity is not None:
                release_host_identity(identity)
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self._attach(process, tag, scratch, tree_limits, identity)

    def _start_forked(self) -> None:
        """Fork the worker from the zygote: pipes made here, the child's ends sent over."""
        scratch = tempfile.mkdtemp(prefix="autograder-worker-")
        tag = uuid.uuid4().hex
        tree_limits = None
        ends: list[int] = []
        try:
            tree_limits = TreeLimits(self.limits, backend=self.tree_limits_backend)
            requests_read, requests_write = os.pipe()
            replies_read, replies_write = os.pipe()
            output_read, output_write = os.pipe()
            ends = [requests_read, replies_write, output_write]
            ours = [requests_write, replies_read, output_read]
            # While it runs, the zygote's host user is this worker's alone (one worker
            # per zygote at a time), as a cold worker's own user is.
            limits = self._limits(own_user=bwrap_support().separate_users)
            try:
                pid = self.zygote.spawn(ends, limits.to_json())
            except BaseException:
                for fd in ours:
                    os.close(fd)
                raise
            for fd in ends:
                os.close(fd)
            ends = []
            process = _Forked(pid, stdin=os.fdopen(requests_write, "wb", buffering=0),
                              stdout=os.fdopen(replies_read, "rb", buffering=0),
                              stderr=os.fdopen(output_read, "rb", buffering=0))
            try:
                tree_limits.join(pid)  # before the first request: no student code has run yet
            except OSError as exc:
                _terminate(process, tag, scratch, _OutputTail(process.stderr.fileno()), tree_limits, None)
                raise ZygoteUnavailable(f"the forked worker could not join its cgroup: {exc}") from None
        except BaseException:
            for fd in ends:
                os.close(fd)
            if tree_limits is not None:
                tree_limits.close()
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self.forked = True
        self._attach(process, tag, scratch, tree_limits, None)

    def _attach(self, process, tag: str, scratch: str, tree_limits: TreeLimits,
                identity: HostIdentity | None) -> None:
        """Take a started worker process into service: channel, output, limits, a first ping."""
        self._process = process
        self._tree_limits = tree_limits
        self._output = _OutputTail(process.stderr.fileno())
        self._channel = FrameChannel(process.stdout.fileno(), process.stdin.fileno(),
                                     alive=lambda: process.poll() is None)
        # Also on garbage collection or interpreter exit, never leave a worker behind.
        self._finalizer = weakref.finalize(self, _terminate, process, tag, scratch, self._output,
                                           tree_limits, identity)
        tree_limits.watch(process.pid)
        self.info = self._request("ping", self.start_timeout, "start-up")

    def _command(self, scratch: str, tag: str,
                 identity: HostIdentity | None) -> tuple[list[str], list[tuple[str, str]], dict[str, str]]:
        """The argv, relays (see ``isolation.Relays``) and environment of a worker
        started in ``scratch`` as ``identity`` (None: as the grader's own user)."""
        if self.sandbox == "degraded":
            env = scrubbed_env(home=scratch, threads=self.threads, extra={**self.env, TAG_VARIABLE: tag})
            return self._worker_command(self.limits), [], env
        limits = self._limits(own_user=identity is not None)
        env = scrubbed_env(home="/tmp", threads=self.threads, extra={**self.env, TAG_VARIABLE: tag})
        argv, relays = sandbox_argv(self._worker_command(limits), scratch=scratch, identity=identity, env=env,
                                    hidden_paths=self.hidden_paths, exposed_paths=self.exposed_paths, gpu=self.gpu)
        return argv, relays, env

    def _limits(self, *, own_user: bool) -> ResourceLimits:
        """The worker's limits; RLIMIT_NPROC counts per user, so a worker running as a
        host user of its own also gets the whole-tree process limit as its own."""
        if own_user and self.limits.processes is None and self.limits.tree_processes is not None:
            return dataclasses.replace(self.limits, processes=self.limits.tree_processes)
        return self.limits

    def _worker_command(self, limits: ResourceLimits) -> list[str]:
        command = [sys.executable, "-s", "-m", "autograder.sandbox.worker_main",
                   "--limits", limits.to_json(), "--threads", str(self.threads)]
        for module in self.preload:
            command += ["--preload", module]
        return command

    def _stop(self, grace: float = 0.0) -> int | None:
        """Kill the process tree; the worker's exit status if it exited on its own.

        ``grace``: seconds to wait for a worker that closed its pipes to finish
        exiting, so its exit status can be reported. Its descendants are frozen
        first, so that they cannot use the time, and are killed even if the worker's
        exit re-parents them out of its tree.
        """
        if self._finalizer is None:
            return None
        process = self._process
        frozen = freeze_tree(process.pid)
        if grace > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(grace)
        status = process.poll() if not self.forked else None  # not our child: no exit status
        kill_processes(frozen)
        self._finalizer()  # _terminate, once: kills what is left, reaps, cleans up
        self._finalizer = None
        self._channel = None
        return status

    def _request(self, op: str, timeout: float | None, what: str, **fields: Any) -> Any:
        if not self.alive or self._channel is None:
            self._raise_if_over_limit(what)
            tail = self.output()
            raise WorkerCrashed(f"{what}: the worker is not running; call restart()"
                                + (f"\n--- last output ---\n{tail[-2000:]}" if tail else ""))
        timeout = self.timeout if timeout is None else timeout
        self._next_id += 1
        request_id = self._next_id
        payload = protocol.encode({"op": op, "id": request_id, **fields})
        deadline = time.monotonic() + timeout
        try:
            self._channel.send(payload, deadline)
            reply = protocol.decode(self._channel.recv(deadline), deadline=deadline)
        except TimeoutError:
            self._stop()
            self._raise_if_over_limit(what)
            raise WorkerTimeout(f"{what} did not finish within {timeout:g} s; the worker was "
                                "killed (call restart())") from None
        except (ChannelClosed, ProtocolError, OSError) as exc:
            status = self._stop(grace=1.0)
            self._raise_if_over_limit(what)
            tail = self.output()
            how = f" (exit status {status})" if status is not None else ""
            raise WorkerCrashed(f"the worker died during {what}{how}: {exc}"
                                + (f"\n--- last output ---\n{tail[-2000:]}" if tail else "")) from None
        except VocabularyError as exc:
            # A whole frame arrived, so the channel is in sync: only the value is bad
            # (a worker the student tampered with let it through).
            raise ValueRejected("VocabularyError", str(exc)) from None
        return self._unpack(reply, request_id, op, what)

    def _raise_if_over_limit(self, what: str) -> None:
        """``LimitExceeded`` if a whole-tree limit is why the worker is gone."""
        breach = self._tree_limits.breach if self._tree_limits is not None else None
        if breach is not None:
            raise LimitExceeded(f"{what} failed: {breach.message}; the worker was killed (call restart())",
                                limit=breach.limit, value=breach.value)

    def _unpack(self, reply: Any, request_id: int, op: str, what: str) -> Any:
        if type(reply) is not dict or reply.get("id") != request_id or type(reply.get("ok")) is not bool:
            self._stop()
            raise WorkerCrashed(f"the worker sent a malformed reply to {what}")
        if reply["ok"]:
            return reply.get("value")
        error = reply.get("error")
        fields = ("kind", "type", "message", "traceback")
        if type(error) is not dict or any(type(error.get(f)) is not str for f in fields):
            self._stop()
            raise WorkerCrashed(f"the worker sent a malformed error for {what}")
        if error["kind"] == "request":
            raise RequestError(f"{what}: {error['message']}")
        error_type = ValueRejected if error["kind"] == "rejected" else StudentError
        raise error_type(error["type"], error["message"], error["traceback"])


def _choose_sandbox(isolation: str) -> str:
    global _degraded_warned
    support = bwrap_support() if isolation != "degraded" else None
    if support is not None and support.usable:
        return "bwrap"
    if isolation == "bwrap":
        raise SandboxError(f"bubblewrap sandbox requested but unavailable: {support.reason}")
    with _degraded_warning:
        if not _degraded_warned:
            _degraded_warned = True
            reason = support.reason if support is not None else "requested"
            log.warning("Sandbox in DEGRADED mode (%s): student code runs as a plain process with "
                        "resource limits only: no file system, network or user isolation.", reason)
    return "degraded"


def _terminate(process: subprocess.Popen, tag: str, scratch: str, output: _OutputTail,
               tree_limits: TreeLimits, identity: HostIdentity | None) -> None:
    kill_tree(process.pid)
    # Degraded mode's last net: processes that left the tree (their parent, the
    # worker, had died first) still carry the worker's tag in their environment.
    # (Those in the worker's cgroup are also killed by tree_limits.close().)
    kill_tagged(TAG_VARIABLE, tag)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # unkillable (D state); nothing more to do
        log.error("sandbox worker %d did not exit after SIGKILL", process.pid)
    tree_limits.close()
    output.join(timeout=2)
    # stderr only once nobody reads it any more (an escaped process could hold it open).
    streams = [process.stdin, process.stdout] + ([process.stderr] if not output.running() else [])
    for stream in streams:
        with contextlib.suppress(OSError):
            stream.close()
    # The host user goes back to the pool only once nothing runs as it any more (an
    # unkillable bwrap keeps it: its sandbox might still hold processes).
    if identity is not None and process.poll() is not None:
        release_host_identity(identity)
    shutil.rmtree(scratch, ignore_errors=True)


def _warn_unreadable(paths: list[str]) -> None:
    """Log, once per path and process, the first thing in an exposed path that the
    worker's own host user cannot read: the sandbox shows it, but student code gets
    ``PermissionError`` (a cache folder made with ``mkdtemp``, a 0600 download)."""
    for path in paths:
        if path in _checked_exposed:
            continue
        _checked_exposed.add(path)
        unreadable = unreadable_by_others(path, max_entries=EXPOSED_CHECK_ENTRIES)
        if unreadable is not None:
            log.warning("exposed path %s holds %s, which student code cannot read: the sandbox runs as a "
                        "user of its own, so it needs read permission for others (chmod o+r, o+rx for "
                        "folders)", path, unreadable)


class _Forked:
    """A worker forked by the zygote, with the part of ``subprocess.Popen``'s interface
    ``Worker`` uses. It is not this process's child: its end is seen through a pidfd,
    and its exit status is unknown."""

    def __init__(self, pid: int, *, stdin, stdout, stderr):
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self._exited = False
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._pidfd, self._exited = None, True

    def _ended(self, timeout: float) -> bool:
        if not self._exited and self._pidfd is not None:
            ready, _, _ = select.select([self._pidfd], [], [], timeout)
            if ready:
                self._exited = True
                os.close(self._pidfd)
                self._pidfd = None
        return self._exited

    def poll(self) -> int | None:
        return -1 if self._ended(0) else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended(timeout if timeout is not None else 1e9):
            raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout)
        return -1


class _OutputTail:
    """Drains the worker's stderr (where student stdout goes too) into a bounded
    buffer. Always draining matters: a full pipe would block a chatty student's
    ``print`` and look like a hang."""

    def __init__(self, fd: int, limit: int = OUTPUT_TAIL_BYTES):
        self._fd = fd
        self._limit = limit
        self._buffer = bytearray()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, name="sandbox-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._buffer += chunk
                if len(self._buffer) > 2 * self._limit:  # trim in bulk, not on every chunk
                    del self._buffer[:-self._limit]

    def text(self) -> str:
        with self._lock:
            return bytes(self._buffer[-self._limit:]).decode(errors="replace")

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def running(self) -> bool:
        return self._thread.is_alive()
