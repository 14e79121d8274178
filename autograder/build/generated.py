"""Generated files: one check-or-write helper for every script that writes them.

The release (``autograder/build/release.py``), the handout and grading map
(``handouts/build.py``) and the sample submissions
(``autograder/build/samples.py``) compute what their files should hold and
hand each one to :func:`update`; ``python -m autograder.build.regen`` runs them all. With
``check=True`` nothing is written: a file that differs is reported and counted.
"""
from __future__ import annotations

from pathlib import Path

from ..paths import REPO


def shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def update(path: Path, new: bytes | None, *, check: bool) -> bool:
    """Make the generated file ``path`` hold ``new`` (``None``: it should not exist).

    Returns True when the file was out of date. In write mode it is then written
    (its folders made) or removed, and says so; with ``check`` nothing is
    touched and the file is reported as out of date. Both go to stdout.
    """
    path = Path(path)
    current = path.read_bytes() if path.is_file() else None
    if current == new:
        return False
    if check:
        why = "missing" if current is None else "should not exist" if new is None else "differs"
        print(f"out of date: {shown(path)} ({why})")
        return True
    if new is None:
        path.unlink()
        print(f"removed {shown(path)}")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(new)
        print(f"wrote {shown(path)}")
    return True
