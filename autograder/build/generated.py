"""Generated files: one check-or-write helper for every script that writes them.

The release (``autograder/build/release.py``), the handout and grading map
(``handouts/build.py``) and the sample submissions
(``autograder/build/samples.py``) compute what their files should hold and
hand each one to :func:`update`; ``python -m autograder.build.regen`` runs them all. With
``check=True`` nothing is written: a file that differs is reported and counted. The
handout's and the samples' scripts share their command line, :func:`update_command`; the
data folders' builders, which rebuild from pinned downloads, share :func:`rebuild_command`.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..paths import REPO

# What each generated file should hold, by path; None: the file should not exist.
Files = dict[Path, bytes | None]


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


def update_all(files: Files, *, check: bool) -> list[Path]:
    """:func:`update` on each of ``files``; the paths that were out of date."""
    return [path for path, data in files.items() if update(path, data, check=check)]


def update_command(parser: argparse.ArgumentParser, outputs: Callable[[], Files], failure: type[Exception], *,
                   summary: Callable[[Files, list[Path]], str | None], argv: list[str] | None = None) -> int:
    """The command line of a script that writes generated files (``handouts/build.py``,
    ``python -m autograder.build.samples``); ``parser``, whose ``prog`` is the command,
    gains ``--check``.

    ``outputs()`` computes the files, and each goes through :func:`update`. It exits 1,
    saying why on stderr, when ``outputs()`` raises ``failure`` (a source the build cannot
    follow; nothing is touched) or, with ``--check``, when a file is out of date (naming the
    command that brings it up to date). Otherwise ``summary(files, stale)``, unless None,
    ends the run.
    """
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    check = parser.parse_args(argv).check
    try:
        files = outputs()
    except failure as err:
        print(f"{parser.prog}: error: {err}", file=sys.stderr)
        return 1
    stale = update_all(files, check=check)
    if check and stale:
        print(f"out of date: run {parser.prog} (or make regen)", file=sys.stderr)
        return 1
    if (line := summary(files, stale)) is not None:
        print(line)
    return 0


def rebuild_command(doc: str, folder: Path, names: list[str], build: Callable[[Path], None],
                    argv: list[str] | None = None) -> int:
    """The command line of a data folder's builder (``data/corpus/build.py``,
    ``data/sentiment/build.py``): ``build(folder)`` rewrites its ``names`` in place; with
    ``--check`` it builds into a temporary folder instead and exits 1 when any of them
    differs from the shipped file."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="rebuild in a temporary directory and compare with the shipped files")
    if not parser.parse_args(argv).check:
        build(folder)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp))
        bad = [name for name in names
               if not (folder / name).exists() or (folder / name).read_bytes() != (Path(tmp) / name).read_bytes()]
    if bad:
        print(f"MISMATCH in {folder}: {', '.join(bad)} do(es) not match a fresh rebuild.\n"
              "Run build.py without --check to regenerate, then review the diff.", file=sys.stderr)
        return 1
    print(f"OK: the shipped files in {folder} match a fresh rebuild.")
    return 0
