"""A real single-node Slurm cluster on this machine, for the tests and by hand.

    python cluster/slurm/local_cluster.py                # start it, print the settings, Ctrl-C stops it
    python cluster/slurm/local_cluster.py -- sinfo       # start it, run one command against it, stop it

    from local_cluster import LocalSlurm                 # from Python (tests/cluster/test_slurm.py)
    with LocalSlurm() as cluster:
        cluster.run(["sbatch", "--wrap", "hostname"])

It needs root (slurmd starts every job as the user who submitted it) and Debian's
``slurm-wlm`` and ``munge`` packages (``make cluster-tools``, or
``apt-get install --no-install-recommends slurm-wlm munge``; ``--install`` /
``LocalSlurm(install=True)`` runs that where root and apt-get are available).
Anything missing raises ``ClusterUnavailable`` naming it.

Nothing of the machine's own is used or changed: everything lives in one temporary
folder (``etc/ log/ run/ state/ spool/ munge/``), removed on exit, with a munge key
and a ``munged`` of its own on its own socket (a system munge keeps running
untouched), and Slurm daemons on free ports (16817/16818 when free). The same steps
by hand, as root:

    D=$(mktemp -d) && chmod 755 $D && mkdir -p $D/{etc,log,run,state,spool,munge}
    head -c 1024 /dev/urandom > $D/munge/munge.key && chmod 600 $D/munge/munge.key
    munged -F --socket=$D/munge/munge.socket --key-file=$D/munge/munge.key \\
        --pid-file=$D/run/munged.pid --log-file=$D/log/munged.log --seed-file=$D/munge/munged.seed &
    slurmd -C                                   # this node's CPUs, sockets, cores and RealMemory
    $EDITOR $D/etc/slurm.conf                   # as slurm_conf() below writes it
    export SLURM_CONF=$D/etc/slurm.conf         # every Slurm command, daemons included, reads it
    slurmctld -D & slurmd -D -N localnode &
    sinfo -h -o %T                              # wait for "idle"
    sbatch --array=0-2 --wrap 'echo $SLURM_ARRAY_TASK_ID'
    scancel -p local; kill %3 %2 %1; rm -rf $D  # stop: jobs, slurmd, slurmctld, munged

There is no accounting database (no slurmdbd), so ``sacct`` has nothing to show:
finished jobs stay in ``scontrol show job`` for an hour (``MinJobAge``) and are
listed in ``log/jobcomp.log``.
"""
from __future__ import annotations

import argparse
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODE = "localnode"
PARTITION = "local"
PACKAGES = ("slurm-wlm", "munge")
# Each command and the Debian package that provides it.
COMMANDS = {
    "munged": "munge", "munge": "munge", "unmunge": "munge",
    "slurmctld": "slurm-wlm", "slurmd": "slurm-wlm",
    "sbatch": "slurm-wlm", "sinfo": "slurm-wlm", "squeue": "slurm-wlm",
    "scontrol": "slurm-wlm", "scancel": "slurm-wlm",
}
PREFERRED_PORTS = (16817, 16818)
START_TIMEOUT_S = 60


class ClusterUnavailable(RuntimeError):
    """The local cluster cannot run here; the message names what is missing."""


def missing_commands() -> list[str]:
    return [name for name in COMMANDS if shutil.which(name) is None]


def install_packages() -> None:
    """apt-get install the packages, as the Makefile's cluster-tools target does."""
    if os.geteuid() != 0:
        raise ClusterUnavailable(f"not root: cannot install {' '.join(PACKAGES)}")
    if shutil.which("apt-get") is None:
        raise ClusterUnavailable(f"no apt-get to install {' '.join(PACKAGES)}")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES]
    result = subprocess.run(install, capture_output=True, text=True)
    if result.returncode != 0:
        # The package lists may be missing (a fresh container): fetch them once.
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True)
        result = subprocess.run(install, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-10:])
        raise ClusterUnavailable(f"packages not installable: {' '.join(install)} failed:\n{tail}")


def check_requirements(install: bool = False) -> None:
    if os.geteuid() != 0:
        raise ClusterUnavailable("not root: slurmd must run as root to start jobs as their users")
    missing = missing_commands()
    if missing and install:
        install_packages()
        missing = missing_commands()
    if missing:
        packages = sorted({COMMANDS[name] for name in missing})
        raise ClusterUnavailable(f"missing {', '.join(missing)}: install the Debian packages "
                                 f"{' '.join(packages)} (make cluster-tools)")


def free_ports() -> tuple[int, int]:
    """Ports for slurmctld and slurmd: 16817 and 16818 where free, else ones the kernel picks.

    Both probes stay bound until both are chosen, so the two always differ.
    """
    probes = []
    try:
        for preferred in PREFERRED_PORTS:
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            probes.append(probe)
            try:
                probe.bind(("", preferred))
            except OSError:
                probe.bind(("", 0))
        return tuple(probe.getsockname()[1] for probe in probes)
    except OSError as error:
        raise ClusterUnavailable(f"no free TCP port: {error}") from error
    finally:
        for probe in probes:
            probe.close()


def node_hardware(env: dict[str, str]) -> str:
    """This node's CPUs, sockets, cores, threads and RealMemory, as slurmd measures them.

    slurm.conf must not promise more than slurmd finds, or the node is drained.
    """
    result = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, env=env)
    line = result.stdout.splitlines()[0] if result.stdout else ""
    fields = [f for f in line.split() if not f.startswith("NodeName=")]
    if result.returncode != 0 or not any(f.startswith("RealMemory=") for f in fields):
        raise ClusterUnavailable(f"slurmd -C did not report this node's hardware: {result.stderr.strip()}")
    return " ".join(fields)


def slurm_conf(root: Path, host: str, ports: tuple[int, int], hardware: str) -> str:
    values = dict(f.split("=", 1) for f in hardware.split())
    mem_per_cpu = int(values["RealMemory"]) // int(values["CPUs"])
    return f"""\
# A one-node Slurm cluster in {root}, written by cluster/slurm/local_cluster.py.
ClusterName=local
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# Our own munged, never the system's.
AuthInfo=socket={root}/munge/munge.socket
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
# No cgroups: processes are tracked through /proc, which works in any container.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/log/jobcomp.log
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without a default, a job that names no memory would take the whole node.
DefMemPerCPU={mem_per_cpu}
ReturnToService=2
# No accounting database: finished jobs stay visible to scontrol for an hour instead.
MinJobAge=3600
KillWait=10
NodeName={NODE} NodeHostname={host} NodeAddr=127.0.0.1 {hardware} State=UNKNOWN
PartitionName={PARTITION} Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
"""


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class LocalSlurm:
    """munged, slurmctld and slurmd of their own, configured in a temporary folder."""

    def __init__(self, install: bool = False, start_timeout_s: float = START_TIMEOUT_S):
        self.install = install
        self.start_timeout_s = start_timeout_s
        self.root: Path | None = None
        self.daemons: dict[str, subprocess.Popen] = {}
        # Each daemon leads a session of its own: stop() ends whatever is left in them.
        self.sessions: set[int] = set()

    # -- what callers use -------------------------------------------------------------

    @property
    def conf(self) -> Path:
        return self.root / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """This process's environment with SLURM_CONF pointing at the cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, command: list[str], **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("env", self.env)
        return subprocess.run(command, **kwargs)

    def logs(self) -> str:
        """The daemons' last log lines, for error messages."""
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            text = tail(path)
            if text:
                parts.append(f"--- {path.name}\n{text}")
        return "\n".join(parts)

    def __enter__(self) -> "LocalSlurm":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- start ------------------------------------------------------------------------

    def start(self) -> None:
        check_requirements(self.install)
        self.root = Path(tempfile.mkdtemp(prefix="slurm-local-"))
        atexit.register(self.stop)
        try:
            self._make_folders()
            self._start_munge()
            host = socket.gethostname().split(".")[0]
            self.conf.write_text(slurm_conf(self.root, host, free_ports(), node_hardware(self.env)))
            self._spawn("slurmctld", ["slurmctld", "-D"])
            self._spawn("slurmd", ["slurmd", "-D", "-N", NODE])
            self._wait_until_idle()
        except BaseException:
            self.stop()
            raise

    def _make_folders(self) -> None:
        # munged refuses a socket whose folders others cannot traverse (0755), and a
        # key anyone but its owner can read (0600).
        self.root.chmod(0o755)
        for name in ("etc", "log", "run", "state", "spool", "munge"):
            (self.root / name).mkdir(mode=0o755)
        key = self.root / "munge" / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)

    def _start_munge(self) -> None:
        munge_dir = self.root / "munge"
        socket_path = munge_dir / "munge.socket"
        self._spawn("munged", [
            "munged", "-F", f"--socket={socket_path}", f"--key-file={munge_dir / 'munge.key'}",
            f"--pid-file={self.root / 'run' / 'munged.pid'}", f"--log-file={self.root / 'log' / 'munged.log'}",
            f"--seed-file={munge_dir / 'munged.seed'}"])
        self._wait(lambda: self._munge_works(socket_path), "munged")

    def _munge_works(self, socket_path: Path) -> bool:
        if not socket_path.exists():
            return False
        credential = self.run(["munge", "-n", f"--socket={socket_path}"])
        return credential.returncode == 0 and self.run(
            ["unmunge", f"--socket={socket_path}"], input=credential.stdout).returncode == 0

    def _spawn(self, name: str, command: list[str]) -> None:
        """Run a daemon in the foreground of a session of its own, output in log/NAME.out.

        Foreground daemons keep their process ids here, so stop() ends exactly them.
        """
        with open(self.root / "log" / f"{name}.out", "wb") as out:
            self.daemons[name] = subprocess.Popen(command, env=self.env, stdin=subprocess.DEVNULL, stdout=out,
                                                  stderr=subprocess.STDOUT, start_new_session=True)
        self.sessions.add(self.daemons[name].pid)

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while not ready():
            for name, process in self.daemons.items():
                if process.poll() is not None:
                    raise ClusterUnavailable(f"{name} failed to start (exit status {process.returncode}):\n"
                                             + self.logs())
            if time.monotonic() > deadline:
                raise ClusterUnavailable(f"{what} not ready within {self.start_timeout_s:.0f} s:\n" + self.logs())
            time.sleep(0.5)

    def _wait_until_idle(self) -> None:
        def idle() -> bool:
            result = self.run(["sinfo", "-h", "-n", NODE, "-o", "%T"])
            return result.returncode == 0 and result.stdout.strip() == "idle"

        self._wait(idle, f"node {NODE} (sinfo shows it idle)")

    # -- stop -------------------------------------------------------------------------

    def stop(self) -> None:
        """Cancel the jobs, end the daemons and whatever they left, remove the folder."""
        if self.root is None:
            return
        if self.daemons.get("slurmctld") and self.daemons["slurmctld"].poll() is None:
            self._cancel_jobs()
        for name in ("slurmd", "slurmctld", "munged"):
            if name in self.daemons:
                self._end(self.daemons.pop(name))
        self._end_leftovers()
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def _cancel_jobs(self, timeout_s: float = 30) -> None:
        self.run(["scancel", "-p", PARTITION])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            queue = self.run(["squeue", "-h", "-t", "RUNNING,COMPLETING", "-o", "%i"])
            if queue.returncode != 0 or not queue.stdout.strip():
                return
            time.sleep(0.5)

    def _end(self, process: subprocess.Popen) -> None:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def _end_leftovers(self) -> None:
        """SIGKILL what the daemons started and the cancelled jobs left behind."""
        for pid in leftover_processes(self.sessions, str(self.conf)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def leftover_processes(sessions: set[int], conf: str) -> list[int]:
    """Processes in the daemons' sessions, and in the sessions of this cluster's slurmstepd.

    slurmctld's helper (slurmscriptd) runs in slurmctld's session; each job's slurmstepd
    starts a session of its own for the job, and is known by the SLURM_CONF it inherited.
    """
    table = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            # Field 6 of /proc/PID/stat is the session id; the name before it may hold spaces.
            name, rest = (entry / "stat").read_text().split(" (", 1)[1].rsplit(")", 1)
            table.append((int(entry.name), name, int(rest.split()[3])))
        except (OSError, IndexError, ValueError):
            continue
    sessions = set(sessions)
    for pid, name, session in table:
        if name == "slurmstepd" and f"SLURM_CONF={conf}" in environment(pid):
            sessions.add(session)
    return [pid for pid, _, session in table if session in sessions]


def environment(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Start a single-node Slurm cluster in a temporary folder.")
    parser.add_argument("--install", action="store_true", help="apt-get install slurm-wlm and munge if missing")
    parser.add_argument("command", nargs="*", help="run this command against the cluster, then stop it")
    args = parser.parse_args(argv)
    # SIGTERM (kill PID) stops the cluster as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        with LocalSlurm(install=args.install) as cluster:
            if args.command:
                return subprocess.run(args.command, env=cluster.env).returncode
            print(f"Slurm is up: export SLURM_CONF={cluster.conf}\n"
                  f"logs in {cluster.root / 'log'}; Ctrl-C stops it and removes {cluster.root}", flush=True)
            while True:
                time.sleep(3600)
    except ClusterUnavailable as error:
        print(f"cannot start the local Slurm cluster: {error}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
