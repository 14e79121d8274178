"""``python -m week6_helpers.lab [FOLDER]``: JupyterLab on the assignment, as a student sees it.

nbgrader installs its instructor tools (formgrader, course list, "create
assignment") into every JupyterLab. A student needs none of them, and the
formgrader complains when the folder is not a course directory. This starts
JupyterLab on FOLDER (default: the working directory) with the settings in
``jupyter_student/`` first on Jupyter's configuration path: those tools
switched off, and nbgrader's Validate button given limits that suit these
notebooks (see ``jupyter_student/nbgrader_config.py``). ``--student ID`` enters
your student id once for every notebook of the session (``WEEK6_STUDENT``: the
seed of your experiments, ``week6_helpers/reference.py``). Any further options
go to ``jupyter lab`` unchanged.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from .reference import STUDENT_VARIABLE

STUDENT_CONFIG = Path(__file__).resolve().parent / "jupyter_student"


def command(folder: Path, extra: list[str]) -> list[str]:
    args = [sys.executable, "-m", "jupyter", "lab", f"--ServerApp.root_dir={folder}"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Jupyter refuses to start as root unless told; a container or a lab
        # machine where the student is root is a normal place to run this.
        args.append("--allow-root")
    return args + extra


def environment(student: str | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if student is not None:
        env[STUDENT_VARIABLE] = student
    env["JUPYTER_CONFIG_PATH"] = os.pathsep.join(
        p for p in (str(STUDENT_CONFIG), env.get("JUPYTER_CONFIG_PATH", "")) if p)
    return env


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    folder = Path(argv.pop(0)) if argv and not argv[0].startswith("-") else Path.cwd()
    if not folder.is_dir():
        print(f"error: {folder} is not a folder; give the folder that holds your notebooks", file=sys.stderr)
        return 2
    folder = folder.resolve()
    student = None
    if "--student" in argv:
        at = argv.index("--student")
        if at + 1 == len(argv) or not argv[at + 1].strip() or argv[at + 1].startswith("-"):
            print("error: --student needs your student id, as in: python -m week6_helpers.lab --student jdoe",
                  file=sys.stderr)
            return 2
        student = argv[at + 1].strip()
        del argv[at:at + 2]
    # nbgrader's Validate reads nbgrader_config.py from the server's working directory.
    return subprocess.call(command(folder, argv), env=environment(student), cwd=folder)


if __name__ == "__main__":
    sys.exit(main())
