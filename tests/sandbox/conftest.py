"""Shared fixtures of the sandbox tests.

Starting a worker costs about 1.5 s (``import torch``), so modules share one worker
per sandbox kind where the tests allow it. Tests that need bubblewrap are skipped,
with the reason, where it is not installed or cannot create namespaces.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from autograder.sandbox.isolation import bwrap_support
from autograder.sandbox.worker import Worker

# A host folder the shared worker can read (it sees nothing else outside the system
# folders): tests drop files here to change what student code observes. mkdtemp makes
# it private to the grader; under a grader running as root the worker is a stranger.
TRIGGERS = Path(tempfile.mkdtemp(prefix="sandbox-triggers-"))
TRIGGERS.chmod(0o755)

BWRAP = bwrap_support()
needs_bwrap = pytest.mark.skipif(not BWRAP.usable, reason=f"bubblewrap sandbox unavailable: {BWRAP.reason}")
SANDBOXES = [pytest.param("bwrap", marks=needs_bwrap), pytest.param("degraded")]


@pytest.fixture(scope="module", params=SANDBOXES)
def sandbox(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def worker(sandbox, repo_root):
    """One worker per module and sandbox kind; tests must not depend on each other's cells.

    It preloads ``sample_drivers`` (the tests' drivers) to exercise ``preload``."""
    with Worker(isolation=sandbox, timeout=30, preload=["tests.sandbox.sample_drivers"],
                exposed_paths=[str(repo_root / "tests"), str(TRIGGERS)]) as shared:
        yield shared
