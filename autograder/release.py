"""``make release``: regenerate ``assignments/week6`` from ``solutions/week6`` with nbgrader.

nbgrader runs in a scratch course root holding a copy of the source folder, so
the repository's gradebook is never touched and the output depends on the
notebooks alone. ``python -m autograder.release --check`` regenerates into a
temporary folder and compares it with the committed release instead of
replacing it (the tests use the same function).
"""
from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .notebook import ASSIGNMENT, REPO

SOURCE = REPO / "solutions" / ASSIGNMENT
RELEASE = REPO / "assignments" / ASSIGNMENT
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


def venv_env() -> dict[str, str]:
    """The environment with this interpreter's ``bin/`` first on PATH.

    nbgrader runs the ``alembic`` command to set up its gradebook; inside a
    virtual environment that is not activated, it would not be found.
    """
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def generate(into: Path) -> Path:
    """Run ``nbgrader generate_assignment`` and return the generated release folder."""
    root = Path(into)
    shutil.copytree(SOURCE, root / "solutions" / ASSIGNMENT, ignore=IGNORED)
    command = [
        sys.executable, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force",
        f"--CourseDirectory.root={root}",
        f"--CourseDirectory.db_url=sqlite:///{root / 'gradebook.db'}",
        "--log-level=WARN",
    ]
    # cwd=REPO so nbgrader reads the course's nbgrader_config.py (stub text etc.);
    # the command-line options above take precedence over it.
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=venv_env())
    if result.returncode != 0:
        raise RuntimeError(f"nbgrader generate_assignment failed:\n{result.stdout}\n{result.stderr}")
    return root / "assignments" / ASSIGNMENT


def differences(a: Path, b: Path) -> list[str]:
    """Relative paths that differ between two folder trees (ignoring caches)."""
    found: list[str] = []

    def walk(cmp: filecmp.dircmp, prefix: str) -> None:
        skip = {"__pycache__", ".ipynb_checkpoints"}
        found.extend(prefix + n for n in cmp.left_only + cmp.right_only if n not in skip)
        found.extend(prefix + n for n in cmp.diff_files)
        for name, sub in cmp.subdirs.items():
            if name not in skip:
                walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(a, b), "")
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.release", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare with the committed release; change nothing")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="week6-release-") as scratch:
        generated = generate(Path(scratch))
        if args.check:
            diff = differences(generated, RELEASE) if RELEASE.is_dir() else ["(no committed release)"]
            if diff:
                print("assignments/ is out of date; run `make release`. Differences: " + ", ".join(diff))
                return 1
            print("assignments/ matches what nbgrader generates from solutions/.")
            return 0
        if RELEASE.exists():
            shutil.rmtree(RELEASE)
        shutil.copytree(generated, RELEASE, ignore=IGNORED)
    print(f"Regenerated {RELEASE.relative_to(REPO)} from {SOURCE.relative_to(REPO)}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
