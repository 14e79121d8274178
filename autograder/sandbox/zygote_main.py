"""The zygote: a preloaded Python inside the sandbox that forks fresh workers.

Started by ``zygote.Zygote`` as ``python -m autograder.sandbox.zygote_main
--threads N [--preload MODULE ...]`` inside bubblewrap, with one extra capability,
``CAP_SYS_ADMIN`` in the sandbox's own user namespace, and a Unix socket as its
stdin. It imports torch, transformers and the drivers once, runs no student code
and no tensor operation, then waits. Each request on the socket carries three file
descriptors (the new worker's requests, replies and output); the zygote forks, and
the child becomes a worker that is isolated from every other one:

* PID 1 of a PID namespace of its own: it sees and can signal only its own
  processes, and killing it kills all of them;
* a mount namespace of its own with a private, size-limited ``/tmp`` and
  ``/dev/shm``, and its own ``/proc``; the rest of the file system is bubblewrap's,
  read-only;
* network and IPC namespaces of its own (no abstract sockets or System V memory
  shared with a sibling);
* then every capability dropped, ``no_new_privs`` set, its resource limits applied,
  and only after that the request loop of an ordinary worker (``session.serve``).

What a student changes in a worker (monkeypatched torch, globals, files) lives in
the worker's copy-on-write memory and private mounts and dies with it: the zygote
never sees it, so the next worker starts from the zygote's pristine state.
"""
from __future__ import annotations

import argparse
import array
import contextlib
import ctypes
import gc
import importlib
import json
import os
import random
import signal
import socket
import struct
import sys

from .limits import ResourceLimits

# unshare(2), mount(2), prctl(2) and capset(2) constants (os.unshare needs Python 3.12)
CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC = 0x00020000, 0x20000000, 0x40000000, 0x08000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND = 2, 4, 8, 4096
MS_REC, MS_PRIVATE, MNT_DETACH = 16384, 1 << 18, 2
PR_SET_NO_NEW_PRIVS, PR_SET_CHILD_SUBREAPER, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 36, 47, 4
LINUX_CAPABILITY_VERSION_3 = 0x20080522
MAX_REQUEST_BYTES = 64 * 1024
FDS_PER_WORKER = 3

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m autograder.sandbox.zygote_main")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--preload", action="append", default=[], metavar="MODULE")
    parser.add_argument("--tmp-bytes", type=int, required=True)
    parser.add_argument("--shm-bytes", type=int, required=True)
    args = parser.parse_args(argv)

    control = socket.socket(fileno=os.dup(0))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.close(null)
    # Workers whose intermediate parent exited are re-parented here and reaped below.
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
    signal.signal(signal.SIGCHLD, _reap)

    import torch

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    for module in args.preload:
        importlib.import_module(module)
    from . import session  # noqa: F401  (the request loop, imported before any fork)

    # What the zygote imported lives as long as every worker: out of the garbage
    # collector's sight, a worker's collections scan only what the student made, and
    # its pages stay shared with the zygote instead of copied when a collection runs.
    gc.freeze()

    _send(control, {"ready": True, "pid": os.getpid()})
    while True:
        request, fds = _receive(control)
        if request is None:
            os._exit(0)
        try:
            pid = _spawn(request, fds, control, args)
            _send(control, {"pid": pid})
        except Exception as exc:  # a malformed request: say why, keep serving
            _send(control, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            for fd in fds:
                os.close(fd)


def _reap(signum, frame) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _receive(control: socket.socket) -> tuple[dict | None, list[int]]:
    fds = array.array("i")
    message, ancillary, _, _ = control.recvmsg(MAX_REQUEST_BYTES, socket.CMSG_SPACE(FDS_PER_WORKER * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if not message:
        return None, list(fds)
    return json.loads(message), list(fds)


def _send(control: socket.socket, reply: dict) -> None:
    control.sendall(json.dumps(reply).encode())


def _spawn(request: dict, fds: list[int], control: socket.socket, args) -> int:
    """Fork a worker on ``fds``; its pid as the zygote sees it."""
    if len(fds) != FDS_PER_WORKER:
        raise ValueError(f"a worker needs {FDS_PER_WORKER} file descriptors, got {len(fds)}")
    limits = ResourceLimits.from_json(request["limits"])
    report_read, report_write = os.pipe()
    intermediate = os.fork()
    if intermediate == 0:  # the intermediate: enters a new PID namespace for its child
        try:
            os.close(report_read)
            control.close()
            _check(_libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
            worker = os.fork()
            if worker == 0:
                os.close(report_write)
                _become_worker(fds, limits, args)
            os.write(report_write, struct.pack("i", worker))
        finally:
            os._exit(0)
    os.close(report_write)
    data = os.read(report_read, 4)
    os.close(report_read)
    with contextlib.suppress(ChildProcessError):  # the SIGCHLD handler may have reaped it
        os.waitpid(intermediate, 0)
    if len(data) != 4:
        raise RuntimeError("the new worker could not be forked")
    return struct.unpack("i", data)[0]


def _become_worker(fds: list[int], limits: ResourceLimits, args) -> None:
    """In the forked child, PID 1 of its namespace: isolate, drop privileges, serve."""
    status = 70
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 65536)  # nothing of the zygote's: its control socket, its pipes
        _isolate(args.tmp_bytes, args.shm_bytes)
        _drop_privileges()
        limits.apply()
        random.seed()  # as a fresh interpreter would: not the zygote's stream
        from .worker_main import _claim_stdio
        from .session import Session, serve

        requests, replies = _claim_stdio()
        status = serve(Session(), requests, replies)
    except BaseException as exc:  # noqa: BLE001 - say why on stderr, which the grader keeps
        os.write(2, f"zygote worker: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
    finally:
        os._exit(status)


def _isolate(tmp_bytes: int, shm_bytes: int) -> None:
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare(mount, network, IPC)")
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
    # What bubblewrap bound inside the zygote's /tmp (a runtime or an exposed path that
    # lives there, a checkout under /tmp) must show through the worker's new /tmp too:
    # the old /tmp stays reachable on a mount point in the old /dev/shm while its binds
    # are carried over, and both old mounts go before any student code runs.
    kept = _mounts_below("/tmp")
    flags = MS_NOSUID | MS_NODEV
    # The old /dev/shm is the zygote's, shared by all its workers: a name of its own,
    # removed again below.
    old_tmp = f"/dev/shm/.zygote-tmp-{os.urandom(8).hex()}"
    if kept:
        os.mkdir(old_tmp, 0o700)
        _check(_libc.mount(b"/tmp", old_tmp.encode(), None, MS_BIND | MS_REC, None), "keeping the old /tmp")
    _check(_libc.mount(b"tmpfs", b"/tmp", b"tmpfs", flags, f"size={tmp_bytes},mode=1777".encode()), "mounting /tmp")
    for point in kept:
        source = old_tmp + point[len("/tmp"):]
        if os.path.isdir(source):
            os.makedirs(point, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(point), exist_ok=True)
            open(point, "a").close()
        # Recursive: what was mounted below it comes along, read-only where it was.
        _check(_libc.mount(source.encode(), point.encode(), None, MS_BIND | MS_REC, None), f"binding {point}")
    if kept:
        _check(_libc.umount2(old_tmp.encode(), MNT_DETACH), "letting go of the old /tmp")
        os.rmdir(old_tmp)
    _check(_libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", flags, f"size={shm_bytes},mode=1777".encode()),
           "mounting /dev/shm")
    _check(_libc.mount(b"proc", b"/proc", b"proc", flags | MS_NOEXEC, None), "mounting /proc")
    os.chdir("/tmp")


def _mounts_below(top: str) -> list[str]:
    """The outermost mount points strictly below ``top`` (``/proc/self/mountinfo``); those
    below them come along with them."""
    points = set()
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            point = line.split()[4].encode().decode("unicode_escape")
            if point.startswith(top.rstrip("/") + "/"):
                points.add(point)
    return sorted(point for point in points
                  if not any(point.startswith(other + "/") for other in points))


def _drop_privileges() -> None:
    """No capability left in any set, and none to gain by exec (``no_new_privs``)."""
    header = struct.pack("Ii", LINUX_CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two {effective, permitted, inheritable} u32 triples, all zero
    header_buffer, data_buffer = ctypes.create_string_buffer(header), ctypes.create_string_buffer(data)
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clearing ambient capabilities")
    _check(_libc.capset(header_buffer, data_buffer), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


if __name__ == "__main__":
    try:
        main()
    except BaseException as exc:  # noqa: BLE001
        print(f"zygote: {type(exc).__name__}: {exc}", file=sys.stderr)
        os._exit(1)
