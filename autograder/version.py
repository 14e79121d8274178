"""What a report was graded by: the grader's version and a hash of everything that decides a grade.

A report records both, with the hash of the notebook it graded. A re-run (after a
crash, or a Slurm task run again) skips a notebook whose report matches all three,
and grades it again as soon as any of them changes: a new hidden test, a fixed
reference, an edited instructor notebook, or a resubmission.
"""
from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from .errors import IntakeError
from .paths import ASSIGNMENT, PACKAGE, REPO, SOURCE_DIR
from .report import Report, read_report

__version__ = "0.4.0"  # CHANGELOG.md's newest section
# The report's fields; bumped when their meaning changes (reports of another
# schema are never taken as up to date). 2: a test's message is what a student may
# read, and its ``detail`` the course staff's view. 3: ``printed``, what the notebook
# recorded for the written answers that quote numbers.
SCHEMA_VERSION = 3
# What changes no grade, and so is not in the hash: the class report, the LMS export and
# the grade history read reports; the build tools write the release, the handout and the
# student bundle (tests/test_layout.py keeps the grading modules from importing either).
NOT_GRADING = (PACKAGE / "analytics", PACKAGE / "build")


def suite_hash(secret: str | None = None) -> str:
    """sha256 over the grader's code, hidden suites, references and instructor notebooks,
    and over the course secret where there is one (it draws the hidden inputs: a new
    secret is a new grade, and the secret itself cannot be read back from the hash).

    Every file whose change can change a grade is in it (the grader's own code
    too: a fixed bug is a changed grade); ~80 small files, a few milliseconds.
    """
    if secret is None:
        return _code_hash()
    return hashlib.sha256(f"{_code_hash()}\0secret:".encode() + hashlib.sha256(secret.encode()).digest()).hexdigest()


def graded_by() -> list[Path]:
    """The files whose change can change a grade, sorted: the grader's code, hidden
    suites and references, and the instructor notebooks."""
    files = [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.ini"),
             *(SOURCE_DIR / ASSIGNMENT).glob("*.ipynb")]
    return sorted(path for path in files
                  if "__pycache__" not in path.parts and not any(path.is_relative_to(room) for room in NOT_GRADING))


@functools.lru_cache(maxsize=1)
def _code_hash() -> str:
    digest = hashlib.sha256()
    for path in graded_by():
        digest.update(path.relative_to(REPO).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def up_to_date_report(path: Path, digest: str, *, secret: str | None = None, **expected) -> Report | None:
    """The report at ``path`` if it graded (outcome ``graded``) the bytes whose sha256 is
    ``digest``, with this grader and course secret (``suite_hash``) and every other field
    in ``expected`` as given; None when there is none, it is damaged, or it is out of date."""
    try:
        report = read_report(path)
    except (IntakeError, ValueError):
        return None
    wanted = {"outcome": "graded", "submission_sha256": digest, "suite_hash": suite_hash(secret), **expected}
    return None if any(getattr(report, key) != value for key, value in wanted.items()) else report
