"""What the student can and cannot reach.

Namespace properties (hidden paths, read-only files, network, uid, pid namespace)
need bubblewrap; killing detached processes is tested in both sandbox kinds.
"""
from __future__ import annotations

import errno
import os
import shutil
import socket
import tempfile
import time
import uuid
from pathlib import Path

import psutil
import pytest

from autograder.sandbox.errors import StudentError, WorkerCrashed
from autograder.sandbox.isolation import HOST_ID_BASE, REPO_ROOT, bwrap_support
from autograder.sandbox.worker import Worker
from tests.sandbox.probe_cells import CONNECT_OUTCOME

SUPPORT = bwrap_support()
needs_bwrap = pytest.mark.skipif(not SUPPORT.usable, reason=f"bubblewrap sandbox unavailable: {SUPPORT.reason}")
needs_separate_users = pytest.mark.skipif(
    not SUPPORT.separate_users,
    reason="workers get host users of their own only under a grader running as root (where bwrap works "
           "for such a user); any other grader's sandbox user is the grader itself")

PROBING = """
import ctypes, os, socket

def listing(path):
    return sorted(os.listdir(path)) if os.path.isdir(path) else None

def read(path):
    with open(path) as f:
        return f.read()

def try_write(path):
    try:
        with open(path, "w") as f:
            f.write("student was here")
        return 0
    except OSError as e:
        return e.errno

def connect(port):
    return connect_outcome(socket.AF_INET, ("127.0.0.1", port), timeout=2)

def identity():
    status = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return {"ids": [os.getuid(), os.geteuid(), os.getgid()], "CapEff": status["CapEff"].strip()}

def visible_pids():
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())

def new_user_namespace():
    return ctypes.CDLL(None, use_errno=True).unshare(0x10000000)  # CLONE_NEWUSER
""" + CONNECT_OUTCOME


def _scratch_outside_tmp() -> Path:
    # The sandbox's /tmp is private anyway, so files hidden there would prove nothing.
    for parent in ("/var/tmp", str(Path.home())):
        if os.access(parent, os.W_OK) and not parent.startswith("/tmp"):
            return Path(tempfile.mkdtemp(prefix="sandbox-test-", dir=parent))
    pytest.skip("no writable directory outside /tmp for instructor files")


@pytest.fixture(scope="module")
def instructor_files():
    root = _scratch_outside_tmp()
    (root / "hidden").mkdir()
    (root / "hidden" / "solution.py").write_text("ANSWER = 42\n")
    (root / "hidden" / "helpers").mkdir()
    (root / "hidden" / "helpers" / "util.py").write_text("HELP = 1\n")
    (root / "gradebook.db").write_text("grades of everyone")
    (root / "visible").mkdir()
    (root / "visible" / "data.txt").write_text("public data")
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def jailed(instructor_files):
    if not SUPPORT.usable:
        pytest.skip(f"bubblewrap sandbox unavailable: {SUPPORT.reason}")
    hidden = [instructor_files / "hidden", instructor_files / "gradebook.db"]
    # Student helpers inside a hidden tree, and a folder of public data; nothing else
    # outside the system folders is mounted at all.
    exposed = [instructor_files / "hidden" / "helpers", instructor_files / "visible"]
    with Worker(isolation="bwrap", hidden_paths=hidden, exposed_paths=exposed, timeout=20) as worker:
        worker.exec_cell(PROBING).raise_for_error()
        yield worker


@needs_bwrap
def test_hidden_paths_are_empty_inside_and_exposed_ones_are_visible(jailed, instructor_files):
    assert jailed.call("listing", str(instructor_files / "hidden")) == ["helpers"]
    assert jailed.call("read", str(instructor_files / "hidden" / "helpers" / "util.py")) == "HELP = 1\n"
    assert jailed.call("read", str(instructor_files / "gradebook.db")) == ""
    assert jailed.call("read", str(instructor_files / "visible" / "data.txt")) == "public data"
    assert (instructor_files / "hidden" / "solution.py").exists()  # untouched outside


@needs_bwrap
def test_files_outside_tmp_are_read_only(jailed, instructor_files):
    assert jailed.call("try_write", str(instructor_files / "visible" / "data.txt")) == errno.EROFS
    assert jailed.call("try_write", str(instructor_files / "hidden" / "planted.py")) == errno.EROFS
    assert jailed.call("try_write", str(instructor_files / "hidden" / "helpers" / "util.py")) == errno.EROFS
    # The repository is not mounted, so the write cannot reach it. Where the checkout
    # itself lies under /tmp, the path exists inside the sandbox's private /tmp (as the
    # parent of the exposed helpers) and the write lands there, in memory: what matters
    # is that the host's repository never sees the file.
    planted = REPO_ROOT / "planted.py"
    status = jailed.call("try_write", str(planted))
    under_tmp = REPO_ROOT.resolve().is_relative_to("/tmp")
    assert status in (errno.EROFS, errno.EACCES, errno.ENOENT) or (under_tmp and status == 0), status
    assert not planted.exists(), "a write from the sandbox reached the repository"
    assert jailed.call("try_write", "/tmp/scratch.txt") == 0
    assert (instructor_files / "visible" / "data.txt").read_text() == "public data"


@needs_bwrap
def test_there_is_no_network(jailed):
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass  # the grader itself can connect: the port is really open
        assert jailed.call("connect", port) in ("ConnectionRefusedError", "OSError", "TimeoutError")


@needs_bwrap
def test_the_student_is_nobody_without_capabilities(jailed):
    info = jailed.call("identity")
    assert info["ids"] == [65534, 65534, 65534]
    assert int(info["CapEff"], 16) == 0


def _host_uids(worker: Worker) -> set[int]:
    root = psutil.Process(worker.pid)
    return {uid for process in [root, *root.children(recursive=True)] for uid in process.uids()}


@pytest.fixture
def root_only_files():
    folder = _scratch_outside_tmp()
    folder.chmod(0o755)  # exposed folders must be readable by others; what is inside decides
    (folder / "public.txt").write_text("for everyone")
    (folder / "secret.txt").write_text("for root only")
    (folder / "secret.txt").chmod(0o600)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@needs_bwrap
@needs_separate_users
def test_a_root_grader_runs_each_worker_as_a_host_user_of_its_own(root_only_files):
    with Worker(isolation="bwrap", exposed_paths=[root_only_files], timeout=20) as first, \
            Worker(isolation="bwrap", exposed_paths=[root_only_files], timeout=20) as second:
        first.exec_cell(PROBING).raise_for_error()
        assert first.call("read", str(root_only_files / "public.txt")) == "for everyone"
        with pytest.raises(StudentError, match="PermissionError"):
            first.call("read", str(root_only_files / "secret.txt"))
        if os.path.exists("/etc/shadow") and not os.stat("/etc/shadow").st_mode & 0o004:
            with pytest.raises(StudentError, match="PermissionError"):
                first.call("read", "/etc/shadow")
        assert first.call("identity")["ids"] == [65534, 65534, 65534]  # still nobody inside
        assert first.ping()["uid"] == 65534  # and the worker still works
        # Outside: one uid for the whole tree (real, effective, saved), neither root nor
        # the grader, from the documented range, and another one for the other worker.
        (uid,) = _host_uids(first)
        assert uid not in (0, os.getuid()) and HOST_ID_BASE <= uid < 2**31
        (other,) = _host_uids(second)
        assert other != uid and other not in (0, os.getuid())
    assert (root_only_files / "secret.txt").read_text() == "for root only"


@needs_bwrap
def test_the_student_sees_only_its_own_processes(jailed):
    pids = jailed.call("visible_pids")
    assert max(pids) < 100 and len(pids) <= 5  # bwrap's init, the worker, maybe a helper


@needs_bwrap
@pytest.mark.skipif(not SUPPORT.disable_userns, reason="bwrap --disable-userns unsupported on this kernel")
def test_nested_user_namespaces_are_refused(jailed):
    assert jailed.call("new_user_namespace") == -1


DETACH = """
import os, sys

def spawn_detached(marker):
    child = os.fork()
    if child == 0:
        os.setsid()
        if os.fork() == 0:
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(300)", marker])
        os._exit(0)
    os.waitpid(child, 0)
    return marker
"""


def _running_with(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline", "status"]):
        if process.info["status"] != psutil.STATUS_ZOMBIE and marker in (process.info["cmdline"] or ()):
            found.append(process)
    return found


def _eventually(condition, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_a_detached_grandchild_is_gone_after_close(sandbox):
    marker = f"sandbox-test-{uuid.uuid4().hex}"
    with Worker(isolation=sandbox, timeout=20) as worker:
        worker.exec_cell(DETACH).raise_for_error()
        assert worker.call("spawn_detached", marker) == marker
        assert _eventually(lambda: len(_running_with(marker)) == 1), "the grandchild never started"
        escaped = _running_with(marker)[0]
        assert os.getsid(escaped.pid) != os.getsid(worker.pid)  # out of reach of a group kill
    assert _eventually(lambda: not _running_with(marker)), "the detached grandchild survived close()"


def test_a_detached_grandchild_is_gone_when_the_worker_dies_first(sandbox):
    # A worker killed outright re-parents its adopted orphans to the host's init before
    # the grader notices. In degraded mode only the tag in their environment finds
    # them then; under bubblewrap the pid namespace ends with the worker.
    marker = f"sandbox-test-{uuid.uuid4().hex}"
    with Worker(isolation=sandbox, timeout=20) as worker:
        worker.exec_cell(DETACH + "\ndef die():\n    os.kill(os.getpid(), 9)\n").raise_for_error()
        worker.call("spawn_detached", marker)
        assert _eventually(lambda: len(_running_with(marker)) == 1), "the grandchild never started"
        with pytest.raises(WorkerCrashed):
            worker.call("die")
        assert _eventually(lambda: not _running_with(marker)), "the grandchild outlived the crash"


@needs_bwrap
def test_a_virtual_environment_reached_through_a_link_keeps_the_full_sandbox(tmp_path):
    """The worker is started under the interpreter's linked name; the sandbox must show it."""
    import subprocess
    import sys

    link = tmp_path / "venv-link"
    link.symlink_to(Path(sys.prefix).resolve(), target_is_directory=True)
    python = link / "bin" / Path(sys.executable).name
    probe = ("from autograder.sandbox.worker import Worker\n"
             "with Worker(isolation='bwrap') as worker:\n"
             "    print(worker.sandbox, worker.ping()['uid'])\n")
    done = subprocess.run([str(python), "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["bwrap", "65534"]
