"""Hidden inputs of each student's own: seeds derived from a course secret and the student.

The hidden suites are public (this repository is), so inputs drawn from fixed seeds
could be computed ahead of time and their answers hard-coded. With a course secret,
every hidden test draws its inputs from seeds that only the grader can compute:

    seed(student, n) = HMAC-SHA256(HMAC-SHA256(secret, student), n), first 63 bits

so two students get different inputs, while grading the same submission again (by
the same course, on any machine or shard) draws exactly the same ones. Without a
secret the seeds are the suites' own numbers (``seed(n) = n``): the inputs CI and the
sample submissions are graded with, which anyone can read.

The secret is read from ``$WEEK6_GRADING_SECRET``, or else from the first line of
``.grading-secret`` at the repository root (git-ignored). Neither reaches student code:
the sandboxed worker's environment is rebuilt from nothing (``sandbox.isolation``),
and the repository is hidden from it. Only the degraded mode, without bubblewrap,
runs student code as the grader's user, where it could read either; the threat model
says so.

Hidden tests use :func:`autograder.suite.generator` and :func:`autograder.suite.seed_for`,
which read the draws of the notebook being graded.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass, field

from .errors import ConfigurationError
from .paths import REPO

SECRET_ENV = "WEEK6_GRADING_SECRET"
SECRET_FILE = REPO / ".grading-secret"
# A secret shorter than this is guessable by trying every word of a dictionary.
MIN_SECRET_CHARS = 16


def course_secret() -> str | None:
    """The course's secret (``$WEEK6_GRADING_SECRET``, else ``.grading-secret``), or None."""
    value = os.environ.get(SECRET_ENV)
    where = f"${SECRET_ENV}"
    if value is None and SECRET_FILE.is_file():
        lines = SECRET_FILE.read_text().splitlines()
        value, where = (lines[0] if lines else ""), str(SECRET_FILE)
    if value is None:
        return None
    value = value.strip()
    if len(value) < MIN_SECRET_CHARS:
        raise ConfigurationError(
            f"the grading secret in {where} has {len(value)} characters; use at least {MIN_SECRET_CHARS} "
            "random ones, e.g. the output of: python -c 'import secrets; print(secrets.token_hex(16))'")
    return value


@dataclass(frozen=True)
class Draws:
    """The seeds of one student's hidden inputs (``key`` None: the public seeds)."""

    key: bytes | None = field(default=None, repr=False)

    @classmethod
    def of(cls, secret: str | None, student: str) -> Draws:
        if secret is None:
            return PUBLIC
        return cls(hmac.new(secret.encode(), student.encode(), hashlib.sha256).digest())

    @property
    def public(self) -> bool:
        return self.key is None

    def seed(self, number: int) -> int:
        """The seed a hidden test numbers ``number``: ``number`` itself when public."""
        if self.key is None:
            return number
        digest = hmac.new(self.key, str(number).encode(), hashlib.sha256).digest()
        return int.from_bytes(digest[:8], "big") >> 1  # below 2**63: any torch or numpy seed


PUBLIC = Draws()


def describe(secret: str | None) -> str:
    """One line for the grader's log: which inputs this run draws (never the secret)."""
    if secret is None:
        return (f"hidden inputs: the public seeds (set ${SECRET_ENV} or write {SECRET_FILE.name} to give each "
                "student inputs of their own)")
    fingerprint = hashlib.sha256(b"fingerprint:" + secret.encode()).hexdigest()[:8]
    return f"hidden inputs: each student's own, from the course secret (fingerprint {fingerprint})"
