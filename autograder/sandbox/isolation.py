"""How a worker process is confined: the bubblewrap command line and its environment.

bubblewrap (``bwrap``) builds the sandbox from unprivileged Linux namespaces:

* mount: the host's ``/`` read-only, a fresh ``/dev`` and ``/proc``, a small private
  tmpfs on ``/tmp`` (the only writable place), and an empty, read-only tmpfs (or an
  empty file) over every path the caller hides: hidden test suites, reference
  implementations, solutions, the gradebook, other submissions, the output folder;
* network: a new, empty network namespace (loopback only, nothing listening);
* pid: the worker sees only its own processes, and when the namespace's init dies
  the kernel kills everything left in it, however it was detached;
* user: uid/gid 65534 (nobody) with every capability dropped, and no nested user
  namespaces (a common first step of kernel exploits) where the kernel allows it.

Unix permissions are *not* what protects instructor files: the sandbox's nobody is
the grader's own user seen from outside, so anything the grader can read and that
is not hidden stays readable. The hidden paths are the protection; pass them all.

Without a working ``bwrap`` the launcher runs the worker as a plain process in a new
session ("degraded" mode): same resource limits and environment, no file system,
network or user isolation.
"""
from __future__ import annotations

import functools
import glob
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SANDBOX_UID = SANDBOX_GID = 65534
TMP_BYTES = 512 * 2**20
SHM_BYTES = 256 * 2**20
REPO_ROOT = Path(__file__).resolve().parents[2]
OFFLINE = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "HF_HUB_DISABLE_TELEMETRY": "1"}


def scrubbed_env(*, home: str, threads: int, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The worker's whole environment: nothing of the grader's leaks in (tokens, paths)."""
    interpreter_bin = os.path.dirname(sys.executable)
    env = {
        "PATH": f"{interpreter_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "MPLBACKEND": "Agg",
        "TOKENIZERS_PARALLELISM": "false",
        **{name: str(threads) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
        **OFFLINE,
    }
    if "CUDA_VISIBLE_DEVICES" in os.environ:  # keep the GPU the grader was given
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    env.update(extra or {})
    return env


def runtime_paths() -> list[str]:
    """What the worker must be able to read even where it lies under ``/tmp`` or a hidden
    path: the interpreter's installation, the virtual environment, and this package
    (with its parent's ``__init__.py``), but not the rest of the repository."""
    package = Path(__file__).resolve().parent
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)),
             str(package), str(package.parent / "__init__.py")}
    return sorted(os.path.realpath(p) for p in paths if os.path.exists(p))


# What the sandbox sees of the host: system software and configuration only.
SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")


def gpu_device_nodes() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*"))


def bwrap_argv(command: list[str], *, env: Mapping[str, str], cwd: str = "/tmp",
               hidden_paths: Iterable[str] = (), exposed_paths: Iterable[str] = (),
               placeholder_file: str, gpu: bool = False, disable_userns: bool = True,
               bwrap: str = "bwrap") -> list[str]:
    """The full ``bwrap`` command that runs ``command`` in the sandbox.

    ``placeholder_file`` is an empty regular file bound over hidden *files* (a tmpfs
    can only cover directories; ``/dev/null`` would not open on the ``nodev`` mount).
    ``exposed_paths`` are re-bound read-only where ``/tmp`` or a hidden directory
    covers them; ``runtime_paths()`` are always added, and a hidden path inside one
    of them is refused (``ValueError``): the worker could not start.
    """
    # An allow-list, not the host's whole file system: the operating system's own
    # folders, then (below) the Python runtime and the exposed paths. Home folders,
    # other checkouts of the course and anything else on the machine stay invisible.
    argv = [bwrap]
    for root in SYSTEM_ROOTS:
        if os.path.lexists(root):
            argv += ["--ro-bind", root, root] if not os.path.islink(root) else ["--symlink", os.readlink(root), root]
    argv += ["--dev", "/dev", "--proc", "/proc",
             "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
             "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    if gpu:
        for node in gpu_device_nodes():
            argv += ["--dev-bind", node, node]

    runtime = runtime_paths()
    exposed = sorted({os.path.realpath(p) for p in [*runtime, *exposed_paths] if os.path.exists(p)})
    hidden = sorted({os.path.realpath(p) for p in hidden_paths})
    for path in hidden:
        if any(_inside(path, r) for r in runtime):
            raise ValueError(f"hiding {path} would hide part of the worker's Python runtime")
    covers = ["/tmp", *(p for p in hidden if os.path.isdir(p))]
    mounts: list[tuple[int, int, list[str]]] = []  # (depth, hide?, bwrap arguments)
    for path in exposed:
        if not any(_inside(path, root) for root in SYSTEM_ROOTS) or any(_inside(path, top) for top in covers):
            mounts.append((_depth(path), 0, ["--ro-bind", path, path]))
    tmpfs_hidden = []
    for path in hidden:
        if not os.path.exists(path):
            # Nothing to cover now, and a file created later on the host *would* show
            # through: callers hide the (existing) parent directory of such paths.
            log.debug("hidden path %s does not exist; nothing to hide", path)
        elif _inside(path, "/tmp") and not any(_inside(path, p) for p in exposed):
            pass  # the private /tmp already hides it
        elif os.path.isdir(path):
            mounts.append((_depth(path), 1, ["--size", "65536", "--tmpfs", path]))
            tmpfs_hidden.append(path)
        else:
            mounts.append((_depth(path), 1, ["--ro-bind", placeholder_file, path]))
    # Shallow mounts first, so a deeper one lands on top: an exposed path inside a
    # hidden directory shows through it, and a hidden path inside an exposed one
    # stays hidden. At equal depth hiding comes last, so it wins.
    for _, _, args in sorted(mounts, key=lambda m: m[:2]):
        argv += args
    # Read-only only now: bwrap had to create mount points inside these tmpfs first.
    for path in tmpfs_hidden:
        argv += ["--remount-ro", path]
    # bwrap builds the new root on a tmpfs of its own; nothing may be written there
    # (only the private /tmp and /dev/shm are writable).
    argv += ["--remount-ro", "/"]

    argv += ["--chdir", cwd, "--unshare-all", "--unshare-user"]
    if disable_userns:
        argv.append("--disable-userns")
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL",
             "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--clearenv"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", *command]


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _depth(path: str) -> int:
    return len(Path(path).parts)


@dataclass(frozen=True)
class BwrapSupport:
    """Result of trying bubblewrap once on this host."""

    path: str | None
    usable: bool
    disable_userns: bool
    reason: str


@functools.lru_cache(maxsize=1)
def bwrap_support() -> BwrapSupport:
    """Run a trivial sandboxed Python once and remember whether it worked.

    ``bwrap`` can be installed yet unusable (user namespaces disabled by sysctl or
    AppArmor, a container without the needed privileges), so presence is not enough.
    ``--disable-userns`` needs a recent kernel; it is tried first and dropped if it is
    the only thing that fails.
    """
    path = shutil.which("bwrap")
    if path is None:
        return BwrapSupport(None, False, False, "bwrap is not installed")
    reason = ""
    for disable_userns in (True, False):
        placeholder = os.devnull  # no hidden files in the probe
        argv = bwrap_argv([sys.executable, "-S", "-c", "pass"], env=scrubbed_env(home="/tmp", threads=1),
                          placeholder_file=placeholder, disable_userns=disable_userns, bwrap=path)
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reason = f"{type(exc).__name__}: {exc}"
            continue
        if done.returncode == 0:
            return BwrapSupport(path, True, disable_userns, "ok")
        reason = done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"
    return BwrapSupport(path, False, False, f"bwrap does not work here: {reason}")


def bwrap_works() -> bool:
    return bwrap_support().usable
