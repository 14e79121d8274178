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

Who the sandbox's nobody is on the host depends on who runs the grader:

* a grader running as root starts bwrap as a *host user of its own* for each live
  worker (``claim_host_identity``): a uid/gid from ``HOST_ID_BASE`` on, with no
  passwd entry, no supplementary group, owning no file. Unix permissions then
  protect root's files (``/etc/shadow``, a 0600 file in an exposed folder) as they
  would from any stranger. Without this, nobody would be root seen from outside
  (bwrap maps the sandbox user to the user who started it), with the owner's access
  to every root-owned file;
* any other grader runs bwrap as itself, and nobody is the grader's own user seen
  from outside: anything the grader can read and that is not hidden stays
  readable. Root-only files are out of reach, as they are for the grader.

Either way the hidden paths, not permissions, are what protect instructor files:
pass them all. Exposed paths must be readable by the sandbox user: under a grader
running as root, by others (mode ``o+r``, and ``o+x`` for folders). The folders
*above* them need not be: a path below a private folder (an interpreter under
``/root/.pyenv``) is relayed (``Relays``).

Without a working ``bwrap`` ``Worker`` runs the worker as a plain process in a new
session ("degraded" mode): same resource limits and environment, no file system,
network or user isolation; it runs as the grader's own user, root included (a
separate uid would not even reach an interpreter under ``/root``).

Run as a script (``python -I -S isolation.py SPEC -- ARGV``), this module is the
*trampoline* ``Worker`` starts workers through when it has something to do with
privileges first: join the worker's cgroups, set up relays, drop to the worker's
host user, then exec ``ARGV`` (see ``trampoline_argv``).
"""
from __future__ import annotations

import functools
import glob
import grp
import json
import logging
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

SANDBOX_UID = SANDBOX_GID = 65534  # inside the sandbox
# Host uids/gids of workers started by a grader running as root: HOST_ID_BASE +
# grader pid * HOST_IDS_PER_GRADER + slot, slot < HOST_IDS_PER_GRADER (concurrent
# workers of one grader process). With the kernel's largest pid_max (2**22) that is
# 1,879,048,192 (0x70000000) to 2,147,483,647 (0x7FFFFFFF): above systemd's range for
# containers' users (524288-1879048191), below 2**31 (tools that read uids as signed
# 32-bit numbers), and far from users in /etc/passwd, which are skipped if present.
# Unique among the graders of one pid namespace; graders in containers that share
# the host's users but not its pids could meet.
HOST_ID_BASE = 0x7000_0000
HOST_IDS_PER_GRADER = 64
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
    (with its parent's ``__init__.py``), but not the rest of the repository. A path
    inside another one of them is left out: binding the outer one shows it."""
    package = Path(__file__).resolve().parent
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)),
             str(package), str(package.parent / "__init__.py")}
    real = {os.path.realpath(p) for p in paths if os.path.exists(p)}
    return sorted(p for p in real if not any(p != q and _inside(p, q) for q in real))


def runtime_aliases() -> list[tuple[str, str]]:
    """(path, real path) of the virtual environment and the interpreter's folder where
    they are reached through a symbolic link (``/srv/course/.venv`` linking elsewhere).

    The worker is started as ``sys.executable``, under the name the grader was started
    with, and Python finds its environment (``pyvenv.cfg``, site-packages) from that
    name; binding only the real paths would leave the name dangling in the sandbox."""
    names = {sys.prefix, sys.exec_prefix, os.path.dirname(sys.executable)}
    return sorted((os.path.abspath(name), os.path.realpath(name)) for name in names
                  if os.path.exists(name) and os.path.realpath(name) != os.path.abspath(name))


# What the sandbox sees of the host: system software and configuration only.
SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/sys")


def gpu_device_nodes() -> list[str]:
    return sorted(glob.glob("/dev/nvidia*"))


def bwrap_argv(command: list[str], *, env: Mapping[str, str], cwd: str = "/tmp",
               hidden_paths: Iterable[str] = (), exposed_paths: Iterable[str] = (),
               placeholder_file: str, gpu: bool = False, disable_userns: bool = True,
               bwrap: str = "bwrap", source: Callable[[str], str] | None = None,
               capabilities: Iterable[str] = ()) -> list[str]:
    """The full ``bwrap`` command that runs ``command`` in the sandbox.

    ``placeholder_file`` is an empty regular file bound over hidden *files* (a tmpfs
    can only cover directories; ``/dev/null`` would not open on the ``nodev`` mount).
    ``exposed_paths`` are re-bound read-only where ``/tmp`` or a hidden directory
    covers them; ``runtime_paths()`` are always added, and a hidden path inside one
    of them is refused (``ValueError``): the worker could not start.
    ``source`` maps a host path to where bwrap should bind it from (``Relays``).
    ``capabilities`` are kept (in the sandbox's own user namespace) after all the
    others are dropped: only the zygote gets one, ``CAP_SYS_ADMIN``, to give each
    worker it forks namespaces of its own (``zygote_main``).
    """
    source = source or (lambda path: path)
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
            mounts.append((_depth(path), 0, ["--ro-bind", source(path), path]))
    for alias, real in runtime_aliases():
        mounts.append((_depth(alias), 0, ["--ro-bind", source(real), alias]))
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
            mounts.append((_depth(path), 1, ["--ro-bind", source(placeholder_file), path]))
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
    argv += ["--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    for capability in capabilities:
        argv += ["--cap-add", capability]
    argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--clearenv"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", *command]


def sandbox_argv(command: list[str], *, scratch: str, identity: HostIdentity | None, env: Mapping[str, str],
                 hidden_paths: Iterable[str], exposed_paths: Iterable[str], gpu: bool,
                 capabilities: Iterable[str] = ()) -> tuple[list[str], list[tuple[str, str]]]:
    """The bwrap command that runs ``command`` from the folder ``scratch`` (its placeholder
    file and relays are made there), and the relays the trampoline must bind first
    (see ``Relays``); ``identity``: the host user it will run as (None: the grader's)."""
    support = bwrap_support()
    relays = Relays(os.path.join(scratch, "relays"))
    if identity is not None:
        # The sandbox's own user must reach the placeholder and the relays, not list them.
        os.chmod(scratch, 0o711)
    placeholder = os.path.join(scratch, "hidden")
    open(placeholder, "w").close()
    os.chmod(placeholder, 0o644)
    argv = bwrap_argv(command, env=env, cwd="/tmp", hidden_paths=hidden_paths, exposed_paths=exposed_paths,
                      placeholder_file=placeholder, gpu=gpu, disable_userns=support.disable_userns,
                      bwrap=support.path or "bwrap", source=relays.source if identity is not None else None,
                      capabilities=capabilities)
    return argv, relays.pairs


def _inside(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _depth(path: str) -> int:
    return len(Path(path).parts)


# ------------------------------------------------------------ host identity

@dataclass(frozen=True)
class HostIdentity:
    """The host uid/gid a worker runs as (bwrap and everything in the sandbox)."""

    uid: int
    gid: int


_claimed: set[int] = set()
_claim_lock = threading.Lock()


def separate_identities() -> bool:
    """Whether workers get host users of their own: only a grader running as root
    can start processes as another user, and only for root does it matter (any other
    grader's files are not the system's)."""
    return os.geteuid() == 0


def claim_host_identity() -> HostIdentity:
    """A uid/gid no other live worker of this grader uses (see ``HOST_ID_BASE``);
    ``release_host_identity`` once the worker's processes are gone."""
    from .errors import SandboxError

    base = HOST_ID_BASE + os.getpid() * HOST_IDS_PER_GRADER
    with _claim_lock:
        for uid in range(base, base + HOST_IDS_PER_GRADER):
            if uid not in _claimed and not _has_account(uid):
                _claimed.add(uid)
                return HostIdentity(uid, uid)
    raise SandboxError(f"more than {HOST_IDS_PER_GRADER} workers at once in one grader process")


def release_host_identity(identity: HostIdentity) -> None:
    with _claim_lock:
        _claimed.discard(identity.uid)


def _has_account(uid: int) -> bool:
    # A uid that names somebody could own files; skip it (the range is chosen so
    # that this does not happen, but a directory service might disagree).
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return True
        except KeyError:
            pass
    return False


def unreadable_by_others(path: str, *, max_entries: int = 1000) -> str | None:
    """The first file or folder at or below ``path`` that a user who owns nothing and
    belongs to no group cannot read (a folder: list and enter), or None; the walk
    stops after ``max_entries``. The folders *above* ``path`` are ``Relays``' job."""
    needed_dir = stat.S_IROTH | stat.S_IXOTH
    pending, seen = [path], 0
    while pending and seen < max_entries:
        current = pending.pop()
        seen += 1
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            continue  # gone: nothing to read either
        if stat.S_ISLNK(mode):
            continue
        if stat.S_ISDIR(mode):
            if mode & needed_dir != needed_dir:
                return current
            try:
                pending.extend(os.path.join(current, name) for name in sorted(os.listdir(current)))
            except OSError:
                continue
        elif not mode & stat.S_IROTH:
            return current
    return None


class Relays:
    """Where bwrap, started as a worker's host user, binds paths it cannot look up.

    bwrap resolves every bind source itself, with the permissions of the user it
    runs as, and so cannot reach what lies below a folder private to root: the
    interpreter under ``/root/.pyenv``, a model cache under ``/root/.cache`` (even an
    O_PATH descriptor does not help: bwrap turns it back into the path). For each
    such path the trampoline, still root, bind-mounts it onto an empty mount point in
    the worker's scratch folder, inside a mount namespace of its own (the host's
    mount table never changes), and bwrap binds it from there. Only the lookup is
    relayed: what is inside keeps its owner and mode.
    """

    def __init__(self, folder: str):
        self.folder = folder
        self.pairs: list[tuple[str, str]] = []  # (host path, mount point)
        self._by_path: dict[str, str] = {}

    def source(self, path: str) -> str:
        if _reachable_by_others(path):
            return path
        if path not in self._by_path:
            os.makedirs(self.folder, mode=0o711, exist_ok=True)
            point = os.path.join(self.folder, str(len(self.pairs)))
            if os.path.isdir(path):
                os.mkdir(point, 0o755)
            else:
                open(point, "x").close()
            self.pairs.append((path, point))
            self._by_path[path] = point
        return self._by_path[path]


def _reachable_by_others(path: str) -> bool:
    parent = os.path.dirname(path)
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
        if parent == os.path.dirname(parent):
            return True
        parent = os.path.dirname(parent)


# ------------------------------------------------------------------ trampoline

def trampoline_argv(argv: list[str], *, cgroup_procs: Iterable[str] = (),
                    relays: Iterable[tuple[str, str]] = (), identity: HostIdentity | None = None) -> list[str]:
    """``argv``, started through the trampoline when there is anything to do first:
    join the worker's cgroups (``cgroup.procs`` files), bind the relays, drop to
    ``identity``. ``argv[0]`` must be an absolute path (after the drop, the
    interpreter's own library may be out of reach for a ``PATH`` search).

    A separate process rather than ``Popen(user=...)``: the cgroups must be joined
    and the relays bound *before* the identity changes, and a ``preexec_fn`` is not
    safe in the threaded grader. ``-I -S``: nothing from the environment or
    site-packages runs with root's privileges.
    """
    spec = {"cgroup_procs": list(cgroup_procs), "relays": [list(pair) for pair in relays],
            "identity": [identity.uid, identity.gid] if identity is not None else None}
    if not spec["cgroup_procs"] and not spec["relays"] and identity is None:
        return list(argv)
    if not os.path.isabs(argv[0]):
        raise ValueError(f"the trampoline needs an absolute program path, not {argv[0]!r}")
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), json.dumps(spec), "--", *argv]


# mount(2) and unshare(2) constants (os.unshare needs Python 3.12)
CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


def _trampoline(spec: dict, argv: list[str]) -> None:
    for procs in spec["cgroup_procs"]:
        with open(procs, "w") as file:
            file.write(str(os.getpid()))
    if spec["relays"]:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)

        def check(result: int, what: str) -> None:
            if result != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"{what}: {os.strerror(error)}")

        check(libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        # Private first, so that the relays stay in this namespace.
        check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "making / private")
        for path, point in spec["relays"]:
            check(libc.mount(path.encode(), point.encode(), None, MS_BIND | MS_REC, None), f"binding {path}")
    if spec["identity"] is not None:
        uid, gid = spec["identity"]
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    os.execv(argv[0], argv)


# -------------------------------------------------------------------- the probe

@dataclass(frozen=True)
class BwrapSupport:
    """Result of trying bubblewrap once on this host.

    ``separate_users``: workers run as host users of their own (a grader running as
    root, where unprivileged user namespaces work for such a user)."""

    path: str | None
    usable: bool
    disable_userns: bool
    reason: str
    separate_users: bool = False


@functools.lru_cache(maxsize=1)
def bwrap_support() -> BwrapSupport:
    """Run a trivial sandboxed Python once and remember whether it worked.

    ``bwrap`` can be installed yet unusable (user namespaces disabled by sysctl or
    AppArmor, a container without the needed privileges), so presence is not enough.
    ``--disable-userns`` needs a recent kernel; it is tried first and dropped if it is
    the only thing that fails. A grader running as root tries it as a worker's host
    user first, and falls back to running bwrap as root (the sandbox's nobody is then
    root outside, logged as a warning) only where that fails.
    """
    path = shutil.which("bwrap")
    if path is None:
        return BwrapSupport(None, False, False, "bwrap is not installed")
    reason = ""
    for separate_users in ((True, False) if separate_identities() else (False,)):
        for disable_userns in (True, False):
            reason = _try_bwrap(path, separate_users, disable_userns)
            if reason == "ok":
                if separate_identities() and not separate_users:
                    log.warning("bwrap works here only when started as root: the sandbox's user is "
                                "root outside it, and can read every root-owned file that is not hidden")
                return BwrapSupport(path, True, disable_userns, "ok", separate_users)
    return BwrapSupport(path, False, False, f"bwrap does not work here: {reason}")


def _try_bwrap(path: str, separate_users: bool, disable_userns: bool) -> str:
    """"ok", or why running a trivial Python in the sandbox failed."""
    scratch = tempfile.mkdtemp(prefix="autograder-bwrap-probe-")
    identity = claim_host_identity() if separate_users else None
    try:
        relays = Relays(os.path.join(scratch, "relays"))
        if identity is not None:
            os.chmod(scratch, 0o711)
        argv = bwrap_argv([sys.executable, "-S", "-c", "pass"], env=scrubbed_env(home="/tmp", threads=1),
                          placeholder_file=os.devnull, disable_userns=disable_userns, bwrap=path,
                          source=relays.source if identity is not None else None)
        argv = trampoline_argv(argv, relays=relays.pairs, identity=identity)
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, cwd=scratch)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        if identity is not None:
            release_host_identity(identity)
        shutil.rmtree(scratch, ignore_errors=True)
    if done.returncode == 0:
        return "ok"
    return done.stderr.decode(errors="replace").strip() or f"exit status {done.returncode}"


def bwrap_works() -> bool:
    return bwrap_support().usable


if __name__ == "__main__":  # the trampoline: isolation.py SPEC -- ARGV
    _trampoline(json.loads(sys.argv[1]), sys.argv[sys.argv.index("--") + 1:])
