"""Workers forked from a preloaded zygote instead of started cold.

A cold worker is a new ``python`` under bubblewrap that imports torch, transformers
and the drivers: 2 to 4 s of CPU before the first student cell, paid for every
notebook. A :class:`Zygote` pays it once per run: a sandboxed process
(``zygote_main``) that imported everything and then only forks. Each fork becomes
a worker with its own PID, mount, network and IPC namespaces, no capability, its
own limits and a cgroup of its own (see ``zygote_main`` for the isolation, and
``Worker`` for everything else, which does not change).

One zygote runs as one host user (``isolation.claim_host_identity``) and serves one
worker at a time, so that a worker's uid is still its own while it runs (the
per-user ``RLIMIT_NPROC`` and the threat model rely on that). A run therefore keeps
a :class:`ZygotePool` of up to ``--jobs`` zygotes behind a Unix socket in a private
folder; each grading job, a separate process, takes a :class:`ZygoteLease` on one
of them for its lifetime and asks it for a worker (again after a restart).

Nothing of the student's reaches the zygote: a worker's changes to torch, globals
or files stay in its own copy-on-write memory and mounts, and the requests the
zygote reads come from the grader alone.
"""
from __future__ import annotations

import array
import contextlib
import dataclasses
import json
import logging
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor

import psutil

from .errors import SandboxError
from .isolation import (
    SHM_BYTES,
    TMP_BYTES,
    bwrap_support,
    claim_host_identity,
    gpu_device_nodes,
    release_host_identity,
    sandbox_argv,
    scrubbed_env,
    trampoline_argv,
)
from .limits import ResourceLimits

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024
FDS_PER_WORKER = 3


class ZygoteUnavailable(SandboxError):
    """No zygote could fork a worker; the caller starts one cold instead."""


def _send(sock: socket.socket, message: dict, fds: Iterable[int] = ()) -> None:
    fds = list(fds)
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([json.dumps(message).encode()], ancillary)


def _receive(sock: socket.socket, timeout: float | None, *, with_fds: bool = False) -> tuple[dict | None, list[int]]:
    """One message (None when the peer closed), and the file descriptors it carried."""
    if timeout is not None:
        ready, _, _ = select.select([sock], [], [], max(0.0, timeout))
        if not ready:
            raise TimeoutError("no reply in time")
    fds = array.array("i")
    space = socket.CMSG_SPACE(FDS_PER_WORKER * fds.itemsize) if with_fds else 0
    data, ancillary, _, _ = sock.recvmsg(MAX_MESSAGE_BYTES, space)
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), list(fds)


class Zygote:
    """One sandboxed zygote process, as a host user of its own.

    Args: as ``Worker``'s: the paths to hide and expose, the environment, the modules
    to preload (all imported once, here), torch threads, GPU nodes, and the seconds
    allowed for the start (the imports) and for each fork.
    """

    def __init__(self, *, hidden_paths: Iterable[str | os.PathLike] = (),
                 exposed_paths: Iterable[str | os.PathLike] = (), env: Mapping[str, str] | None = None,
                 preload: Iterable[str] = (), threads: int = 1, gpu: bool | None = None,
                 start_timeout: float = 60.0):
        support = bwrap_support()
        if not support.usable:
            raise ZygoteUnavailable(f"bubblewrap is unavailable: {support.reason}")
        self.timeout = start_timeout
        self._lock = threading.Lock()
        self._scratch = tempfile.mkdtemp(prefix="autograder-zygote-")
        self._identity = claim_host_identity() if support.separate_users else None
        self.uid = self._identity.uid if self._identity is not None else os.getuid()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = ours
        try:
            command = [sys.executable, "-s", "-m", "autograder.sandbox.zygote_main", "--threads", str(threads),
                       "--tmp-bytes", str(TMP_BYTES), "--shm-bytes", str(SHM_BYTES)]
            for module in preload:
                command += ["--preload", module]
            environment = scrubbed_env(home="/tmp", threads=threads, extra=dict(env or {}))
            argv, relays = sandbox_argv(command, scratch=self._scratch, identity=self._identity, env=environment,
                                        hidden_paths=[os.fspath(p) for p in hidden_paths],
                                        exposed_paths=[os.fspath(p) for p in exposed_paths],
                                        gpu=bool(gpu_device_nodes()) if gpu is None else gpu,
                                        capabilities=["CAP_SYS_ADMIN"])
            argv = trampoline_argv(argv, relays=relays, identity=self._identity)
            self._log = open(os.path.join(self._scratch, "log"), "wb")
            self._process = subprocess.Popen(argv, stdin=theirs, stdout=self._log, stderr=self._log,
                                             cwd=self._scratch, env=environment, start_new_session=True,
                                             close_fds=True)
            theirs.close()
            try:
                ready, _ = _receive(ours, start_timeout)
            except (TimeoutError, OSError, ValueError) as exc:
                raise ZygoteUnavailable(f"the zygote did not start: {exc}; {self.log_tail()}") from None
            if not ready or not ready.get("ready"):
                raise ZygoteUnavailable(f"the zygote did not start; {self.log_tail()}")
        except BaseException:
            self.close()
            raise

    def log_tail(self, limit: int = 2000) -> str:
        with contextlib.suppress(OSError):
            with open(os.path.join(self._scratch, "log"), "rb") as file:
                return file.read()[-limit:].decode(errors="replace").strip() or "no output"
        return "no output"

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def spawn(self, fds: list[int], limits_json: str) -> int:
        """Fork a worker on ``fds`` (its requests, replies and output); its host pid."""
        with self._lock:
            if not self.alive:
                raise ZygoteUnavailable(f"the zygote is not running; {self.log_tail()}")
            limits = ResourceLimits.from_json(limits_json)
            if limits.processes is not None:
                # RLIMIT_NPROC counts every task of the user, and the zygote's own (bwrap,
                # its init, the zygote's threads) run as this user too: on top of them, so
                # that the worker's cgroup or watchdog, which count the worker alone, see
                # the limit reached first and name it.
                limits = dataclasses.replace(limits, processes=limits.processes + self._own_tasks())
            try:
                _send(self._control, {"limits": limits.to_json()}, fds)
                reply, _ = _receive(self._control, self.timeout)
            except (TimeoutError, OSError, ValueError) as exc:
                raise ZygoteUnavailable(f"the zygote did not fork a worker: {exc}") from None
            if not reply or "pid" not in reply:
                raise ZygoteUnavailable(f"the zygote did not fork a worker: {(reply or {}).get('error')}")
            return self._host_pid(int(reply["pid"]))

    def _own_tasks(self) -> int:
        """Tasks (processes and threads) of the zygote's tree, its workers excluded."""
        count = 0
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(self._process.pid)
            for process in [root, *root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    if len(_namespace_pids(process.pid)) <= 2:  # workers are a PID namespace deeper
                        count += process.num_threads()
        return count

    def _host_pid(self, sandbox_pid: int) -> int:
        """The host pid of the worker whose pid is ``sandbox_pid`` in the zygote's namespace
        (the worker is PID 1 of its own namespace one level below)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with contextlib.suppress(psutil.Error):
                for process in psutil.Process(self._process.pid).children(recursive=True):
                    levels = _namespace_pids(process.pid)
                    if len(levels) >= 3 and levels[-2] == sandbox_pid and levels[-1] == 1:
                        return process.pid
            time.sleep(0.005)
        raise ZygoteUnavailable(f"the forked worker {sandbox_pid} was not found on the host")

    def kill_workers(self, pids: Iterable[int]) -> None:
        """Kill those of ``pids`` that are still this zygote's workers (a pid of one that
        ended may have been reused by another process: only descendants are touched)."""
        from .process_tree import kill_tree

        wanted = set(pids)
        if not wanted or self._process is None:
            return
        with contextlib.suppress(psutil.Error):
            for process in psutil.Process(self._process.pid).children(recursive=True):
                if process.pid in wanted:
                    kill_tree(process.pid)

    def close(self) -> None:
        """Stop the zygote and every worker it forked. Idempotent."""
        process = getattr(self, "_process", None)
        with contextlib.suppress(OSError):
            self._control.close()
        if process is not None:
            from .process_tree import kill_tree

            kill_tree(process.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
            self._process = None
        log_file = getattr(self, "_log", None)
        if log_file is not None:
            log_file.close()
        if self._identity is not None and (process is None or process.poll() is not None):
            release_host_identity(self._identity)
            self._identity = None
        shutil.rmtree(self._scratch, ignore_errors=True)


def _namespace_pids(pid: int) -> list[int]:
    """``NSpid`` of ``pid``: its pid in each PID namespace, outermost (the host's) first."""
    with contextlib.suppress(OSError, ValueError):
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("NSpid:"):
                    return [int(field) for field in line.split()[1:]]
    return []


class ZygotePool:
    """Up to ``size`` zygotes behind a Unix socket; a connection leases one for its lifetime.

    The socket is in a folder only the grader's user can enter. A zygote that died is
    replaced at the next lease."""

    def __init__(self, size: int, *, prestart: int = 0, **zygote_options):
        self.size = max(1, size)
        self._options = zygote_options
        self._folder = tempfile.mkdtemp(prefix="autograder-zygotes-")
        os.chmod(self._folder, 0o700)
        self.address = os.path.join(self._folder, "socket")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._server.bind(self.address)
        self._server.listen(64)
        self._idle: list[Zygote] = []
        self._all: list[Zygote] = []
        self._starting = 0
        self._available = threading.Condition()
        self._closed = False
        # Zygotes are started from this one long-lived thread: bubblewrap's
        # --die-with-parent follows the thread that started it, and a lease's thread
        # ends with the lease.
        self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zygote-start")
        self._accepting = threading.Thread(target=self._accept, name="zygote-pool", daemon=True)
        self._accepting.start()
        # Started now, they import while the caller does its own start-up (a fork server).
        for _ in range(min(prestart, self.size)):
            self._starting += 1
            self._starter.submit(Zygote, **self._options).add_done_callback(self._started)

    def _started(self, future) -> None:
        with self._available:
            self._starting -= 1
            if future.exception() is None:
                self._all.append(future.result())
                self._idle.append(future.result())
            else:
                log.warning("a zygote did not start: %s", future.exception())
            self._available.notify_all()

    def _accept(self) -> None:
        while not self._closed:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), name="zygote-lease", daemon=True).start()

    def _lease(self) -> Zygote:
        with self._available:
            while True:
                while self._idle:
                    zygote = self._idle.pop()
                    if zygote.alive:
                        return zygote
                    self._all.remove(zygote)
                    zygote.close()
                if len(self._all) + self._starting < self.size and not self._starting:
                    self._starting += 1
                    break
                self._available.wait()
        try:
            zygote = self._starter.submit(Zygote, **self._options).result()  # outside the lock: seconds
        finally:
            with self._available:
                self._starting -= 1
                self._available.notify()
        with self._available:
            self._all.append(zygote)
        return zygote

    def _release(self, zygote: Zygote) -> None:
        with self._available:
            self._idle.append(zygote)
            self._available.notify()

    def _serve(self, connection: socket.socket) -> None:
        zygote = None
        spawned: list[int] = []
        with connection:
            try:
                while True:
                    request, fds = _receive(connection, None, with_fds=True)
                    if request is None:
                        return
                    try:
                        if zygote is None:
                            zygote = self._lease()
                        spawned.append(zygote.spawn(fds, request["limits"]))
                        _send(connection, {"pid": spawned[-1], "uid": zygote.uid})
                    except (SandboxError, KeyError, OSError) as exc:
                        _send(connection, {"error": str(exc)})
                    finally:
                        for fd in fds:
                            os.close(fd)
            except (OSError, ValueError):
                return
            finally:
                # A job that ended without closing its workers (killed at its deadline)
                # leaves them here: nothing may still run as this zygote's user when
                # the next job leases it.
                if zygote is not None:
                    zygote.kill_workers(spawned)
                    self._release(zygote)

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._server.close()
        with self._available:
            zygotes, self._all, self._idle = list(self._all), [], []
        for zygote in zygotes:
            zygote.close()
        self._starter.shutdown(wait=False)
        shutil.rmtree(self._folder, ignore_errors=True)

    def __enter__(self) -> ZygotePool:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class ZygoteLease:
    """A grading job's hold on one zygote of a pool (by the pool's ``address``)."""

    def __init__(self, address: str, *, timeout: float = 60.0):
        self.timeout = timeout
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._socket.connect(address)
        except OSError as exc:
            self._socket.close()
            raise ZygoteUnavailable(f"no zygote pool at {address}: {exc}") from None
        self.uid: int | None = None

    def spawn(self, fds: list[int], limits_json: str) -> int:
        """A new worker on ``fds``; its host pid. The caller closes its copies of ``fds``."""
        try:
            _send(self._socket, {"limits": limits_json}, fds)
            reply, _ = _receive(self._socket, self.timeout)
        except (TimeoutError, OSError, ValueError) as exc:
            raise ZygoteUnavailable(f"the zygote pool did not answer: {exc}") from None
        if not reply or "pid" not in reply:
            raise ZygoteUnavailable((reply or {}).get("error") or "the zygote pool closed the lease")
        self.uid = reply.get("uid")
        return int(reply["pid"])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._socket.close()
