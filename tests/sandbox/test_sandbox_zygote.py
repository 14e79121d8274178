"""Workers forked from a zygote: as isolated as cold ones, from each other and from the zygote.

Each test leases workers from one small pool. Two workers forked from the same
zygote at the same time must not see, signal or write into each other, and what
one student leaves behind (a monkeypatched torch, globals, files, environment)
must never reach the next worker forked from that zygote.
"""
from __future__ import annotations

import dataclasses
import subprocess
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from autograder.sandbox.errors import LimitExceeded, WorkerTimeout
from autograder.sandbox.isolation import HOST_ID_BASE, bwrap_support
from autograder.sandbox.limits import ResourceLimits
from autograder.sandbox.worker import Worker
from autograder.sandbox.zygote import ZygoteLease, ZygotePool, ZygoteUnavailable
from tests.sandbox.probe_cells import CONNECT_OUTCOME

SUPPORT = bwrap_support()
pytestmark = pytest.mark.skipif(not SUPPORT.usable, reason=f"zygotes need bubblewrap: {SUPPORT.reason}")

PROBES = """
import os, signal, socket

def status():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return {"pid": os.getpid(), "uid": os.getuid(), "CapEff": fields["CapEff"].strip(),
            "CapPrm": fields["CapPrm"].strip(), "NoNewPrivs": fields["NoNewPrivs"].strip()}

def visible_pids():
    return sorted(int(p) for p in os.listdir("/proc") if p.isdigit())

def signal_everyone():
    hit = []
    for pid in range(2, 4096):
        try:
            os.kill(pid, 0)
            hit.append(pid)
        except OSError:
            pass
    return hit

def listing(path):
    return sorted(os.listdir(path))

def write(path, text):
    with open(path, "w") as f:
        f.write(text)

def abstract_listen(name):
    global _server
    _server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    _server.bind("\\0" + name)
    _server.listen(1)

def abstract_connect(name):
    return connect_outcome(socket.AF_UNIX, "\\0" + name)

def network():
    return connect_outcome(socket.AF_INET, ("1.1.1.1", 53), timeout=2)

def mount_tmpfs():
    import ctypes
    return ctypes.CDLL(None, use_errno=True).mount(b"x", b"/tmp", b"tmpfs", 0, None)

def unshare_mounts():
    import ctypes
    return ctypes.CDLL(None, use_errno=True).unshare(0x00020000)
""" + CONNECT_OUTCOME


@pytest.fixture(scope="module")
def secret_folder():
    folder = Path(tempfile.mkdtemp(prefix="zygote-secret-", dir="/var/tmp"))
    (folder / "answers.txt").write_text("the answer key")
    folder.chmod(0o755)
    (folder / "answers.txt").chmod(0o644)
    yield folder
    for path in folder.iterdir():
        path.unlink()
    folder.rmdir()


@pytest.fixture(scope="module")
def shared_under_tmp():
    """An exposed folder inside /tmp, as a checkout or a virtual environment under /tmp is."""
    folder = Path(tempfile.mkdtemp(prefix="zygote-shared-"))
    (folder / "data.txt").write_text("course data")
    folder.chmod(0o755)
    (folder / "data.txt").chmod(0o644)
    yield folder
    (folder / "data.txt").unlink()
    folder.rmdir()


@pytest.fixture(scope="module")
def pool(secret_folder, shared_under_tmp):
    with ZygotePool(2, hidden_paths=[str(secret_folder)], exposed_paths=[str(shared_under_tmp)],
                    preload=["autograder.sandbox.probes"]) as pool:
        yield pool


def forked_worker(pool: ZygotePool, **options) -> tuple[Worker, ZygoteLease]:
    lease = ZygoteLease(pool.address)
    worker = Worker(isolation="bwrap", zygote=lease, timeout=20, **options)
    assert worker.forked, "the worker did not come from the zygote"
    worker.exec_cell(PROBES, cell_id="probes").raise_for_error()
    return worker, lease


@pytest.fixture
def two_workers(pool):
    first, first_lease = forked_worker(pool)
    second, second_lease = forked_worker(pool)
    yield first, second
    for worker, lease in ((first, first_lease), (second, second_lease)):
        worker.close()
        lease.close()


def test_a_forked_worker_is_pid_1_of_its_own_namespace_without_privileges(two_workers, secret_folder):
    worker, _ = two_workers
    status = worker.call("status")
    assert status["pid"] == 1 and status["uid"] == 65534
    assert int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0 and status["NoNewPrivs"] == "1"
    assert worker.call("mount_tmpfs") != 0 and worker.call("unshare_mounts") != 0
    assert worker.call("network") in ("OSError", "ConnectionRefusedError", "TimeoutError")
    assert worker.call("listing", str(secret_folder)) == [], "the pool's hidden paths stay hidden"


def test_exposed_paths_under_tmp_show_through_the_workers_own_tmp(two_workers, shared_under_tmp):
    first, second = two_workers
    for worker in (first, second):
        assert worker.call("listing", str(shared_under_tmp)) == ["data.txt"]
    first.call("write", "/tmp/mine", "first")
    assert first.call("listing", "/tmp") != second.call("listing", "/tmp")


def test_two_concurrent_workers_of_one_zygote_cannot_see_signal_or_reach_each_other(two_workers):
    first, second = two_workers
    assert first.call("visible_pids") == [1] and second.call("visible_pids") == [1]
    assert first.call("signal_everyone") == [] and second.call("signal_everyone") == []
    first.call("write", "/tmp/mine", "first")
    first.call("write", "/dev/shm/mine", "first")
    # (a checkout under /tmp shows its mount points there, in every worker alike)
    assert "mine" not in second.call("listing", "/tmp") and "mine" not in second.call("listing", "/dev/shm")
    first.call("abstract_listen", "week6-zygote-test")
    assert first.call("abstract_connect", "week6-zygote-test") == "connected"
    assert second.call("abstract_connect", "week6-zygote-test") == "ConnectionRefusedError"


@pytest.mark.skipif(not SUPPORT.separate_users, reason="host users of their own only under a root grader")
def test_concurrent_leases_run_as_different_host_users(two_workers):
    first, second = two_workers
    users = {psutil.Process(w.pid).uids().real for w in (first, second)}
    assert len(users) == 2 and all(uid >= HOST_ID_BASE for uid in users)


def test_what_a_student_leaves_in_memory_never_reaches_the_next_worker(pool):
    worker, lease = forked_worker(pool)
    worker.exec_cell(
        "import os, sys, torch, random\n"
        "torch.softmax = lambda *a, **k: 'patched'\n"
        "torch.leaked = 'student'\n"
        "sys.modules['json'].dumps = None\n"
        "os.environ['LEAK'] = '1'\n"
        "random.seed(0)\n"
        "open('/tmp/left', 'w').write('x')\n").raise_for_error()
    worker.close()
    worker = Worker(isolation="bwrap", zygote=lease, timeout=20)  # the same zygote: one lease
    try:
        worker.exec_cell(
            "import os, sys, torch, json\n"
            "def state():\n"
            "    return [torch.softmax(torch.zeros(2), 0).tolist(), hasattr(torch, 'leaked'),\n"
            "            json.dumps([1]), os.environ.get('LEAK'), 'left' in os.listdir('/tmp')]\n").raise_for_error()
        assert worker.call("state") == [[0.5, 0.5], False, "[1]", None, False]
    finally:
        worker.close()
        lease.close()


def test_limits_and_timeouts_hold_for_forked_workers(pool):
    limits = dataclasses.replace(ResourceLimits(), tree_processes=16)
    worker, lease = forked_worker(pool, limits=limits)
    try:
        worker.exec_cell("import os, time\n"
                         "def bomb():\n"
                         "    while True:\n"
                         "        try:\n"
                         "            if os.fork() == 0:\n"
                         "                time.sleep(60)\n"
                         "                os._exit(0)\n"
                         "        except OSError:  # refused by the kernel: try again\n"
                         "            pass\n"
                         "def spin():\n"
                         "    while True:\n"
                         "        pass\n").raise_for_error()
        with pytest.raises(LimitExceeded, match="reached the limit of 16 processes and threads"):
            worker.call("bomb", timeout=20)
        worker.restart()
        assert worker.forked
        with pytest.raises(WorkerTimeout):
            worker.call("spin", timeout=1)
        worker.restart()
        assert worker.call("visible_pids") == [1], "the replayed cells are back, the old tree is gone"
    finally:
        worker.close()
        lease.close()


def test_a_job_that_dies_without_closing_its_worker_leaves_nothing_running(pool):
    worker, lease = forked_worker(pool)
    pid = worker.pid
    worker._finalizer.detach()  # as if the job were killed: nothing closes the worker
    lease.close()
    deadline = time.monotonic() + 5
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the pool did not kill the orphaned worker"
        time.sleep(0.05)


def test_without_a_pool_the_worker_starts_cold(caplog, tmp_path):
    with pytest.raises(ZygoteUnavailable):
        ZygoteLease(str(tmp_path / "no-such-socket"))

    class BrokenLease:
        def spawn(self, fds, limits_json):
            raise ZygoteUnavailable("the zygote is gone")

    with Worker(isolation="bwrap", zygote=BrokenLease(), timeout=20) as worker:
        assert not worker.forked and worker.ping()["pid"] != 1
    assert "starting a cold worker" in caplog.text


def test_a_forked_worker_that_dies_at_start_up_is_replaced_by_a_cold_one(caplog):
    """No student code has run before the first ping: a fork that died is the zygote's
    fault, and the submission is graded by a cold worker instead of losing its items."""
    class DeadOnArrival:
        def spawn(self, fds, limits_json):
            gone = subprocess.Popen(["true"])
            gone.wait()
            return gone.pid

    with Worker(isolation="bwrap", zygote=DeadOnArrival(), timeout=20) as worker:
        assert not worker.forked
        worker.exec_cell("def f():\n    return 3\n").raise_for_error()
        assert worker.call("f") == 3
    assert "starting a cold worker" in caplog.text
