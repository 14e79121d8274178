"""Throw-away Unix users, and running a command as one of them (tests run as root).

A command runs as a user in a private mount namespace of its own (``unshare
--mount --propagation private``), set up by root before ``setpriv`` drops to the
user. Why a namespace at all: the files the users need are not always reachable
by other users. This machine's interpreter lives under ``/root`` (mode 0700), the
virtual environment's ``bin/python`` links to it, and on other machines the
repository itself may sit below a private folder (``/root/src/week6``,
``/home/ta/work``). A user cannot traverse such a folder, whatever the modes of
the files below it. Inside the namespace, each topmost private ancestor of a
needed path is covered with an empty, world-readable tmpfs and the needed path
(only it, not its siblings) is bind-mounted back, read-only where asked; so the
user reaches ``/root/.pyenv/versions/3.11.7`` at its usual path and nothing else
of ``/root``. Paths the user must *not* see can be covered by an empty read-only
tmpfs as well. The host's mount table never changes, nothing on disk is
chmod-ed, and every file keeps its owner and mode: what the user can read or
write below the bound paths is decided by ordinary Unix permissions, as on a
real JupyterHub.
"""
from __future__ import annotations

import os
import pwd
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

TOOLS = ("useradd", "userdel", "setpriv", "unshare", "mount", "bwrap")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SETPRIV = shutil.which("setpriv", path=SYSTEM_PATH) or "setpriv"


def missing_prerequisites() -> str | None:
    """Why the lifecycle cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (creates Unix users and mount namespaces)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        return "missing tools: " + ", ".join(missing) + (
            " (bubblewrap: apt-get install bubblewrap)" if "bwrap" in missing else "")
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        return f"cannot create a mount namespace: {probe.stderr.strip()}"
    return None


@dataclass(frozen=True)
class UnixUser:
    name: str
    uid: int
    gid: int
    home: Path


def create_user(name: str, home: Path) -> UnixUser:
    """A new user with its own group and a home folder at ``home`` (mode 0755)."""
    subprocess.run(["useradd", "--create-home", "--home-dir", str(home), "--shell", "/bin/sh",
                    "--user-group", name], check=True, capture_output=True, text=True)
    entry = pwd.getpwnam(name)
    os.chmod(home, 0o755)
    return UnixUser(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def remove_user(user: UnixUser) -> str | None:
    """``userdel -r``, then make sure the account and its home are gone; the problem, or None."""
    done = subprocess.run(["userdel", "--remove", user.name], capture_output=True, text=True)
    problems = []
    # 12: the mail spool or home could not be removed (no spool was ever created).
    if done.returncode not in (0, 12):
        problems.append(f"userdel -r {user.name}: exit {done.returncode}: {done.stderr.strip()}")
    try:
        pwd.getpwnam(user.name)
        problems.append(f"{user.name} still exists")
    except KeyError:
        pass
    if user.home.exists():
        shutil.rmtree(user.home, ignore_errors=True)
    return "; ".join(problems) or None


def chown_tree(path: Path, user: UnixUser) -> None:
    for folder, dirs, files in os.walk(path):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.lchown(name, user.uid, user.gid)


def write_as(user: UnixUser, path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.chown(path.parent, user.uid, user.gid)
    os.chown(path, user.uid, user.gid)


# ---------------------------------------------------------------- mount namespace

def _traversable_by_others(path: str) -> bool:
    return bool(os.stat(path).st_mode & stat.S_IXOTH)


def topmost_private_ancestor(path: str) -> str | None:
    """The highest folder strictly above ``path`` that others cannot traverse, or None."""
    parts = Path(path).parts
    for depth in range(2, len(parts)):
        ancestor = str(Path(*parts[:depth]))
        if not _traversable_by_others(ancestor):
            return ancestor
    return None


def namespace_script(needed: Mapping[str, bool], hidden: Iterable[str], stage: str) -> str:
    """Shell commands (run as root inside the new mount namespace) that make each
    path of ``needed`` (real path -> read-only?) reachable by any user and cover
    each path of ``hidden`` with an empty read-only tmpfs. ``stage`` is an empty
    folder only root can enter, where the needed paths wait while their private
    ancestors are covered."""
    lines = ["set -eu", "umask 022", f"mount -t tmpfs -o mode=0700,size=64k w6stage {shlex.quote(stage)}"]
    covers: dict[str, list[tuple[str, bool]]] = {}
    # A path inside another needed path with the same access comes with it.
    needed = {path: read_only for path, read_only in needed.items()
              if not any(other != path and path.startswith(other.rstrip("/") + "/") and ro == read_only
                         for other, ro in needed.items())}
    for path, read_only in sorted(needed.items()):
        ancestor = topmost_private_ancestor(path)
        if ancestor is None:
            if read_only:  # reachable already; still, the user gets it read-only
                lines.append(f"mount --bind {shlex.quote(path)} {shlex.quote(path)}")
                lines.append(f"mount -o remount,bind,ro {shlex.quote(path)}")
            continue
        covers.setdefault(ancestor, []).append((path, read_only))
    relays = []
    for ancestor, paths in sorted(covers.items()):
        for path, read_only in paths:
            point = f"{stage}/{len(relays)}"
            make = "mkdir" if os.path.isdir(path) else "touch"
            lines.append(f"{make} {shlex.quote(point)}")
            lines.append(f"mount --bind {shlex.quote(path)} {shlex.quote(point)}")
            relays.append((point, path, read_only))
    for ancestor in sorted(covers):
        lines.append(f"mount -t tmpfs -o mode=0755,size=64k w6cover {shlex.quote(ancestor)}")
    for point, path, read_only in relays:
        target = shlex.quote(path)
        if os.path.isdir(path):
            lines.append(f"mkdir -p {target}")
        else:
            lines.append(f"mkdir -p {shlex.quote(os.path.dirname(path))} && touch {target}")
        lines.append(f"mount --bind {shlex.quote(point)} {target}")
        if read_only:
            lines.append(f"mount -o remount,bind,ro {target}")
    for path in sorted(hidden):
        if os.path.isdir(path):
            lines.append(f"mount -t tmpfs -o ro,mode=0555,size=4k w6hidden {shlex.quote(path)}")
    lines.append(f"umount -R {shlex.quote(stage)}")
    return "\n".join(lines)


@dataclass
class Runner:
    """Runs commands as users, each in a fresh mount namespace that exposes ``needed``."""

    needed: Mapping[str, bool]  # real path -> read-only
    base_env: Mapping[str, str]

    def __post_init__(self):
        for path in self.needed:
            mode = os.stat(path).st_mode
            want = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
            if mode & want != want:
                raise PermissionError(f"{path} itself is not readable by others (mode {oct(mode & 0o777)})")

    def run(self, user: UnixUser, argv: Sequence[str], *, cwd: Path, hidden: Iterable[str] = (),
            extra_env: Mapping[str, str] | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
        stage = tempfile.mkdtemp(prefix="w6-stage-")  # 0700, root's
        try:
            script = namespace_script(self.needed, hidden, stage)
            drop = [SETPRIV, f"--reuid={user.uid}", f"--regid={user.gid}", "--init-groups", "--", *argv]
            # Root's part runs with the system's PATH; the user's own comes back for the command.
            script += (f"\ncd {shlex.quote(str(cwd))}\nexport PATH=\"$W6_USER_PATH\"\nunset W6_USER_PATH"
                       f"\nexec {shlex.join(drop)}")
            env = {**self.base_env, "HOME": str(user.home), "USER": user.name, "LOGNAME": user.name,
                   **(extra_env or {})}
            env["W6_USER_PATH"], env["PATH"] = env.get("PATH", SYSTEM_PATH), SYSTEM_PATH
            return subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script],
                                  env=env, capture_output=True, text=True, timeout=timeout, cwd="/")
        finally:
            os.rmdir(stage)
