"""Fixtures for what students receive: the bundle, a student environment, a sandbox that sees only them.

The student environment is a fresh virtual environment that reaches the
course environment's third-party packages through a plain path entry (so
torch is not installed twice) and gets the course package from the bundle's
wheel, as a student's ``pip install`` would. The course environment's own
editable install of the repository is not visible in it: path entries do not
run the ``.pth`` hooks that make it work.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def student_bundle(tmp_path_factory) -> Path:
    """A freshly built ``week6-student`` folder (``make student-bundle``'s output)."""
    from autograder.build.student_bundle import build

    return build(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def student_env(tmp_path_factory, student_bundle) -> Path:
    """A Python environment with the course package installed from the bundle's wheel."""
    env = tmp_path_factory.mktemp("student-env") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    site = Path(subprocess.run(
        [str(env / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip())
    (site / "course-third-party.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel = next(student_bundle.glob("week6_course-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "--python",
                    str(env / "bin" / "python"), "install", "--no-deps", "--quiet", str(wheel)], check=True)
    return env


def sandbox_command(command: list[str], *, writable: Path, env_root: Path, cwd: Path,
                    env: dict[str, str]) -> list[str]:
    """``command`` under bubblewrap, seeing only system folders, Python and the student's folder.

    Read-only: /usr, /etc, the interpreter's installation, the course
    environment's packages and the student environment, and the decoder cache
    (a conversion of an installed package). Writable: ``writable`` only. The
    repository is not mounted at all, and there is no network.
    """
    base = Path(sys.base_prefix).resolve()
    course_env = Path(sys.prefix).resolve()
    args = ["bwrap", "--die-with-parent", "--unshare-all", "--new-session",
            "--ro-bind", "/usr", "/usr", "--ro-bind", "/etc", "/etc",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = Path("/") / link
        if target.is_symlink():
            args += ["--symlink", os.readlink(target), str(target)]
        elif target.is_dir():
            args += ["--ro-bind", str(target), str(target)]
    for folder in (base, course_env, env_root.resolve()):
        args += ["--ro-bind", str(folder), str(folder)]
    cache = env.get("WEEK6_CACHE")
    if cache and Path(cache).is_dir():
        args += ["--ro-bind", cache, cache]
    args += ["--bind", str(writable), str(writable), "--chdir", str(cwd), "--clearenv"]
    for key, value in env.items():
        args += ["--setenv", key, value]
    return args + command


def bwrap_available() -> str | None:
    """None when bubblewrap can run here, else why not."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed: `make setup` installs it as root, or apt-get install bubblewrap"
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-all", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"bubblewrap cannot create a sandbox here: {probe.stderr.strip()}"
    return None
