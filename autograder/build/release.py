"""``make release``: regenerate ``assignments/week6`` from ``solutions/week6`` with nbgrader.

nbgrader runs in a scratch course root holding a copy of the source folder, so
the repository's gradebook is never touched and the output depends on the
notebooks alone. The generated files are compared with the committed release one
by one through the repository's check-or-write helper (``autograder/build/generated.py``):
``python -m autograder.build.release`` writes what differs and removes what nbgrader no
longer generates; ``--check`` writes nothing and exits 1 naming the files that are
out of date. ``python -m autograder.build.regen`` runs it with the other generated files.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..paths import ASSIGNMENT, RELEASE, REPO, SOURCE, venv_env
from .generated import update

IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info")


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


def _skipped(relative: Path) -> bool:
    """Caches and build leftovers (what ``IGNORED`` leaves out of a copy)."""
    return any(part in ("__pycache__", ".ipynb_checkpoints") or part.endswith((".pyc", ".egg-info"))
               for part in relative.parts)


def tree_files(root: Path) -> dict[Path, bytes]:
    """Every file below ``root`` (caches excluded), by path relative to it."""
    root = Path(root)
    return {path.relative_to(root): path.read_bytes() for path in sorted(root.rglob("*"))
            if path.is_file() and not _skipped(path.relative_to(root))}


def differences(a: Path, b: Path) -> list[str]:
    """Relative paths that differ between two folder trees (ignoring caches)."""
    left, right = tree_files(a), tree_files(b)
    return sorted(str(path) for path in left.keys() | right.keys() if left.get(path) != right.get(path))


def outputs(generated: Path) -> dict[Path, bytes | None]:
    """What each file of the release should hold (``None``: a committed file nbgrader no longer makes)."""
    fresh = tree_files(generated)
    committed = tree_files(RELEASE) if RELEASE.is_dir() else {}
    wanted: dict[Path, bytes | None] = {RELEASE / path: data for path, data in fresh.items()}
    wanted.update({RELEASE / path: None for path in committed.keys() - fresh.keys()})
    return wanted


def regenerate(*, check: bool) -> list[Path]:
    """Generate the release and bring ``assignments/`` up to date (or, with ``check``, list what is not)."""
    with tempfile.TemporaryDirectory(prefix="week6-release-") as scratch:
        wanted = outputs(generate(Path(scratch)))
    stale = [path for path, data in wanted.items() if update(path, data, check=check)]
    if not check:
        for folder in sorted({p.parent for p, data in wanted.items() if data is None}, reverse=True):
            while folder != RELEASE and folder.is_dir() and not any(folder.iterdir()):
                folder.rmdir()
                folder = folder.parent
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.build.release", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare with the committed release; change nothing")
    args = parser.parse_args(argv)
    stale = regenerate(check=args.check)
    if args.check:
        if stale:
            print("assignments/ is out of date; run `make release` (or `make regen`).")
            return 1
        print("assignments/ matches what nbgrader generates from solutions/.")
        return 0
    print(f"{RELEASE.relative_to(REPO)} is up to date with {SOURCE.relative_to(REPO)}"
          f" ({len(stale)} file(s) changed).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
